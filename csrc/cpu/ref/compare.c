/* compare.c - eq, ne, lt, le, gt and ge of strided runs, into bool:
 * portable C; the loops are in cpu/loops.h.
 */
#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// CPU reference

/* a (n) at stride sa, b (n) at stride sb -> out (n, bool) at stride so */
void
ampc_compare_ref(ampc_compare_op op, ampc_dtype dt, int64_t n, const void *a,
                 int64_t sa, const void *b, int64_t sb, void *out, int64_t so)
{
    ampc_compare_loop(&ampc_cvt_ref, op, dt, n, a, sa, b, sb, out, so);
}
