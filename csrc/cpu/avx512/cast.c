/* cast.c - dtype conversion of a strided run, every pair of dtypes:
 * cpu/loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// AVX-512

/* src (n) at stride ss -> dst (n) at stride ds */
AMPC_TARGET_AVX512 void
ampc_cast_avx512(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                 ampc_dtype ddt, void *dst, int64_t ds)
{
    ampc_cast_loop(&ampc_cvt_avx512, n, sdt, src, ss, ddt, dst, ds);
}

#endif /* __x86_64__ */
