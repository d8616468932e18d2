/* binary.c - every binary op (kernels.h's ampc_binary_op) of strided runs:
 * portable C; the loops are in cpu/loops.h.
 */
#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// CPU reference

/* a (n) at stride sa, b (n) at stride sb -> out (n) at stride so */
void
ampc_binary_ref(ampc_binary_op op, ampc_dtype dt, int64_t n, const void *a,
                int64_t sa, const void *b, int64_t sb, void *out, int64_t so)
{
    ampc_binary_loop(&ampc_cvt_ref, op, dt, n, a, sa, b, sb, out, so);
}
