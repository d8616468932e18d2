/* relu.c - the gradient of relu from its output: the body of
 * cpu/nn_loops.h compiled for AVX2 (float16/bfloat16 are handled on their
 * bits, so 16 elements per instruction).
 */
#if defined(__x86_64__)

#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// AVX2

static AMPC_TARGET_AVX2 void
relu_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_relu_bwd_range(ctx, b, e);
}

/* grad_out, out (n) -> grad_in (n) */
void
ampc_relu_bwd_avx2(ampc_dtype dt, int64_t n, const void *grad_out,
                   const void *out, void *grad_in)
{
    ampc_relu_bwd_launch(relu_bwd_range, dt, n, grad_out, out, grad_in);
}

#endif /* __x86_64__ */
