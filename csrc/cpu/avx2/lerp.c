/* lerp.c - torch.lerp over strided runs: cpu/lerp_loops.h compiled for
 * AVX2 + FMA + F16C.
 */
#if defined(__x86_64__)

#include "cpu/lerp_loops.h"

// ----------------------------------------------------------------------------
// AVX2

/* start (n) at stride ss, end at se, weight at sw (or `scalar` when NULL)
 * -> out (n) at stride so */
AMPC_TARGET_AVX2 void
ampc_lerp_avx2(ampc_dtype dt, int64_t n, const void *start, int64_t ss,
               const void *end, int64_t se, const void *weight,
               int64_t sw, float scalar, void *out, int64_t so)
{
    ampc_lerp_loop(&ampc_cvt_avx2, dt, n, start, ss, end, se, weight, sw,
                   scalar, out, so);
}

#endif /* __x86_64__ */
