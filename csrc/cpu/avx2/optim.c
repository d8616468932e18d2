/* optim.c - the fused SGD, Adam/AdamW, RMSprop and Adagrad
 * steps, one pass over each
 * parameter: the bodies of cpu/optim_loops.h compiled for AVX2 + FMA + F16C,
 * with the square roots taken by the vector instruction.
 */
#if defined(__x86_64__)

#include <immintrin.h>

#include "cpu/optim_loops.h"

// ----------------------------------------------------------------------------
// AVX2

static AMPC_TARGET_AVX2 void
sgd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_sgd_range(&ampc_cvt_avx2, ctx, b, e);
}

static AMPC_TARGET_AVX2 void
sqrt_block(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
    }
    for (; i < n; i++) {
        y[i] = sqrtf(x[i]);
    }
}

static AMPC_TARGET_AVX2 void
adam_range(void *ctx, int64_t b, int64_t e)
{
    ampc_adam_range(&ampc_cvt_avx2, sqrt_block, ctx, b, e);
}

static AMPC_TARGET_AVX2 void
rmsprop_range(void *ctx, int64_t b, int64_t e)
{
    ampc_rmsprop_range(&ampc_cvt_avx2, sqrt_block, ctx, b, e);
}

static AMPC_TARGET_AVX2 void
adagrad_range(void *ctx, int64_t b, int64_t e)
{
    ampc_adagrad_range(&ampc_cvt_avx2, sqrt_block, ctx, b, e);
}

/* param, grad, momentum_buffer (n) */
void
ampc_sgd_step_avx2(const ampc_sgd_args *a, ampc_dtype dt, int64_t n,
                   void *param, void *grad, void *momentum_buffer)
{
    ampc_sgd_launch(sgd_range, a, dt, n, param, grad, momentum_buffer);
}

/* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (n) */
void
ampc_adam_step_avx2(const ampc_adam_args *a, ampc_dtype dt, int64_t n,
                    void *param, void *grad, void *exp_avg,
                    void *exp_avg_sq, void *max_exp_avg_sq)
{
    ampc_adam_launch(adam_range, a, dt, n, param, grad, exp_avg, exp_avg_sq,
                     max_exp_avg_sq);
}

/* param, grad, square_avg, momentum_buffer, grad_avg (n) */
void
ampc_rmsprop_step_avx2(const ampc_rmsprop_args *a, ampc_dtype dt,
                       int64_t n, void *param, void *grad,
                       void *square_avg, void *momentum_buffer,
                       void *grad_avg)
{
    ampc_rmsprop_launch(rmsprop_range, a, dt, n, param, grad, square_avg,
                        momentum_buffer, grad_avg);
}

/* param, grad, sum (n) */
void
ampc_adagrad_step_avx2(const ampc_adagrad_args *a, ampc_dtype dt,
                       int64_t n, void *param, void *grad, void *sum)
{
    ampc_adagrad_launch(adagrad_range, a, dt, n, param, grad, sum);
}

#endif /* __x86_64__ */
