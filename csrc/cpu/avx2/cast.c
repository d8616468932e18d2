/* cast.c - dtype conversion of a strided run, every pair of dtypes:
 * cpu/loops.h compiled for AVX2 + FMA + F16C.
 */
#if defined(__x86_64__)

#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// AVX2

/* src (n) at stride ss -> dst (n) at stride ds */
AMPC_TARGET_AVX2 void
ampc_cast_avx2(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
               ampc_dtype ddt, void *dst, int64_t ds)
{
    ampc_cast_loop(&ampc_cvt_avx2, n, sdt, src, ss, ddt, dst, ds);
}

#endif /* __x86_64__ */
