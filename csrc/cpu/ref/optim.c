/* optim.c - the fused SGD, Adam/AdamW, RMSprop and Adagrad
 * steps, one pass over each
 * parameter: the bodies of cpu/optim_loops.h compiled for the baseline ISA.
 */
#include "cpu/optim_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

static void
sgd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_sgd_range(&ampc_cvt_ref, ctx, b, e);
}

static void
sqrt_block(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        y[i] = sqrtf(x[i]);
    }
}

static void
adam_range(void *ctx, int64_t b, int64_t e)
{
    ampc_adam_range(&ampc_cvt_ref, sqrt_block, ctx, b, e);
}

static void
rmsprop_range(void *ctx, int64_t b, int64_t e)
{
    ampc_rmsprop_range(&ampc_cvt_ref, sqrt_block, ctx, b, e);
}

static void
adagrad_range(void *ctx, int64_t b, int64_t e)
{
    ampc_adagrad_range(&ampc_cvt_ref, sqrt_block, ctx, b, e);
}

/* param, grad, momentum_buffer (n) */
void
ampc_sgd_step_ref(const ampc_sgd_args *a, ampc_dtype dt, int64_t n,
                  void *param, void *grad, void *momentum_buffer)
{
    ampc_sgd_launch(sgd_range, a, dt, n, param, grad, momentum_buffer);
}

/* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (n) */
void
ampc_adam_step_ref(const ampc_adam_args *a, ampc_dtype dt, int64_t n,
                   void *param, void *grad, void *exp_avg,
                   void *exp_avg_sq, void *max_exp_avg_sq)
{
    ampc_adam_launch(adam_range, a, dt, n, param, grad, exp_avg, exp_avg_sq,
                     max_exp_avg_sq);
}

/* param, grad, square_avg, momentum_buffer, grad_avg (n) */
void
ampc_rmsprop_step_ref(const ampc_rmsprop_args *a, ampc_dtype dt,
                      int64_t n, void *param, void *grad,
                      void *square_avg, void *momentum_buffer,
                      void *grad_avg)
{
    ampc_rmsprop_launch(rmsprop_range, a, dt, n, param, grad, square_avg,
                        momentum_buffer, grad_avg);
}

/* param, grad, sum (n) */
void
ampc_adagrad_step_ref(const ampc_adagrad_args *a, ampc_dtype dt,
                      int64_t n, void *param, void *grad, void *sum)
{
    ampc_adagrad_launch(adagrad_range, a, dt, n, param, grad, sum);
}
