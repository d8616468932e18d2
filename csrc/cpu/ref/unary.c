/* unary.c - every unary op (kernels.h's ampc_unary_op) of a run:
 * portable C; the loops are in cpu/loops.h.
 */
#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// CPU reference

/* a (n) at stride sa -> out (n) at stride so */
void
ampc_unary_ref(ampc_unary_op op, ampc_dtype dt, int64_t n, const void *a,
               int64_t sa, void *out, int64_t so)
{
    ampc_unary_loop(&ampc_cvt_ref, op, dt, n, a, sa, out, so);
}
