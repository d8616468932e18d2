/* lerp.c - torch.lerp over strided runs: portable C; the loop is in
 * cpu/lerp_loops.h.
 */
#include "cpu/lerp_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

/* start (n) at stride ss, end at se, weight at sw (or `scalar` when NULL)
 * -> out (n) at stride so */
void
ampc_lerp_ref(ampc_dtype dt, int64_t n, const void *start, int64_t ss,
              const void *end, int64_t se, const void *weight,
              int64_t sw, float scalar, void *out, int64_t so)
{
    ampc_lerp_loop(&ampc_cvt_ref, dt, n, start, ss, end, se, weight, sw,
                   scalar, out, so);
}
