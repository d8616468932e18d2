/* unary.c - every unary op (kernels.h's ampc_unary_op) of a run:
 * cpu/loops.h compiled for AVX-512 F/BW/VL.
 */
#if defined(__x86_64__)

#include "cpu/loops.h"

// ----------------------------------------------------------------------------
// AVX-512

/* a (n) at stride sa -> out (n) at stride so */
AMPC_TARGET_AVX512 void
ampc_unary_avx512(ampc_unary_op op, ampc_dtype dt, int64_t n, const void *a,
                  int64_t sa, void *out, int64_t so)
{
    ampc_unary_loop(&ampc_cvt_avx512, op, dt, n, a, sa, out, so);
}

#endif /* __x86_64__ */
