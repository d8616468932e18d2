/* binary.c - every binary op (kernels.h's ampc_binary_op) of strided runs:
 * cpu/loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// AVX-512

/* a (n) at stride sa, b (n) at stride sb -> out (n) at stride so */
AMPC_TARGET_AVX512 void
ampc_binary_avx512(ampc_binary_op op, ampc_dtype dt, int64_t n, const void *a,
                   int64_t sa, const void *b, int64_t sb, void *out,
                   int64_t so)
{
    ampc_binary_loop(&ampc_cvt_avx512, op, dt, n, a, sa, b, sb, out, so);
}

#endif /* __x86_64__ */
