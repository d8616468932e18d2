/* cast.c - dtype conversion of a strided run, every pair of dtypes:
 * portable C; the loops are in cpu/loops.h.
 */
#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// CPU reference

/* src (n) at stride ss -> dst (n) at stride ds */
void
ampc_cast_ref(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
              ampc_dtype ddt, void *dst, int64_t ds)
{
    ampc_cast_loop(&ampc_cvt_ref, n, sdt, src, ss, ddt, dst, ds);
}
