/* kernels_optim.h - the fused optimizer steps' part of the kernel ABI:
 * SGD, Adam/AdamW, RMSprop and Adagrad (CPU: optim.c of each level, bodies
 * in csrc/cpu/optim_loops.h, per-element math in nn_math.h; CUDA:
 * cuda/optim.cu; Python side in csrc/optim_ops.c and
 * csrc/optim_ops_adaptive.c).
 * NOTE: a part of kernels.h, included there (inside its extern "C") before
 * the kernel table; include kernels.h, never this file on its own.
 */
#ifndef AMPC_KERNELS_OPTIM_H
#define AMPC_KERNELS_OPTIM_H

/* torch.optim.SGD's step; the constants are rounded to float32 as torch's
 * CPU kernels take them.
 *
 * grad_scale and found_inf (PyTorch's _step_supports_amp_scaling contract;
 * NULL when absent) are float32 scalars in the memory of the kernel's
 * device (host pointers for the CPU kernels): when *found_inf != 0 the step
 * writes nothing at all; when grad_scale is set, the gradient used is
 * grad * (1 / *grad_scale), and that unscaled gradient is written back to
 * the grad tensor, as torch's fused kernels do. */
typedef struct {
    float lr, momentum, one_minus_dampening, weight_decay;
    int nesterov, maximize;
    int first_step;             /* the buffer is set to the gradient */
    const float *grad_scale;
    const float *found_inf;
    /* CPU kernels: NULL, or a kept float16/bfloat16 cast of the float32
     * parameter (weight_casts.h), written from the updated values in the
     * same pass (the CUDA kernels take ampc_optim_list.kept) */
    void *kept;
    ampc_dtype kept_dtype;
} ampc_sgd_args;

/* The parameters of one multi-tensor optimizer step, all of one dtype on
 * one device and none sharing memory with another: tensor t has numel[t]
 * elements at param[t], grad[t] and state[s][t] for each state tensor s
 * the optimizer keeps (SGD: the momentum buffer; Adam: exp_avg,
 * exp_avg_sq, max_exp_avg_sq; RMSprop: square_avg, momentum_buffer,
 * grad_avg; Adagrad: sum); state[s] is NULL where not kept.  step: NULL,
 * or the per-parameter float32 step counters (as ampc_adam_args.step).
 * kept: NULL, or per float32 parameter NULL or its kept cast
 * (weight_casts.h), of dtype kept_dtype[t], which the step rewrites from
 * the updated parameter in the same pass. */
typedef struct {
    int64_t n;
    const int64_t *numel;
    void *const *param;
    void *const *grad;
    void *const *state[3];
    float *const *step;
    void *const *kept;
    const int8_t *kept_dtype;
} ampc_optim_list;

/* param, grad, momentum_buffer (n) (NULL when momentum == 0), one pass */
typedef void (*ampc_sgd_step_fn)(const ampc_sgd_args *a, ampc_dtype dt,
                                 int64_t n, void *param, void *grad,
                                 void *momentum_buffer);

/* torch.optim.Adam's step (AdamW when decoupled), with its bias
 * corrections for this step folded into neg_step_size = -lr / (1 -
 * beta1^step) and bias_correction2_sqrt = sqrt(1 - beta2^step). */
typedef struct {
    float one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
    float decay;                /* 1 - lr * weight_decay (decoupled) */
    float neg_step_size, bias_correction2_sqrt;
    int maximize, decoupled;
    const float *grad_scale;    /* as ampc_sgd_args; NULL when absent */
    const float *found_inf;
    /* NULL, or the float32 step counter in the kernel's memory (torch's
     * capturable / fused state "step"): the kernel adds 1 to it unless the
     * step is skipped and then computes neg_step_size and
     * bias_correction2_sqrt from it, lr, beta1 and beta2 (nn_math.h
     * ampc_adam_bias_corrections), so that no host sync is needed. */
    float *step;
    double lr, beta1, beta2_f64;
    void *kept;                 /* as ampc_sgd_args */
    ampc_dtype kept_dtype;
} ampc_adam_args;

/* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (n) (NULL unless
 * amsgrad), one pass */
typedef void (*ampc_adam_step_fn)(const ampc_adam_args *a, ampc_dtype dt,
                                  int64_t n, void *param, void *grad,
                                  void *exp_avg, void *exp_avg_sq,
                                  void *max_exp_avg_sq);

/* torch.optim.RMSprop's step (torch's single-tensor implementation, op by
 * op, the constants rounded to float32 as torch's CPU kernels take them):
 * with d the gradient (negated when maximizing) plus weight_decay * param,
 *   square_avg = square_avg * alpha + ((1 - alpha) * d) * d
 *   centered: grad_avg = lerp(grad_avg, d, 1 - alpha),
 *             avg = sqrt(square_avg - grad_avg * grad_avg) + eps
 *   else:     avg = sqrt(square_avg) + eps
 *   momentum: buf = buf * momentum + d / avg; param += -lr * buf
 *   else:     param += (-lr * d) / avg
 * The momentum buffer is given when momentum > 0 and grad_avg when
 * centered (NULL otherwise).  grad_scale, found_inf, kept and kept_dtype
 * as ampc_sgd_args; step as ampc_adam_args.step (the count only: RMSprop's
 * arithmetic does not use it). */
typedef struct {
    float neg_lr, alpha, one_minus_alpha, eps, weight_decay, momentum;
    int maximize;
    const float *grad_scale;
    const float *found_inf;
    float *step;
    void *kept;
    ampc_dtype kept_dtype;
} ampc_rmsprop_args;

/* param, grad, square_avg, momentum_buffer, grad_avg (n), one pass */
typedef void (*ampc_rmsprop_step_fn)(const ampc_rmsprop_args *a,
                                     ampc_dtype dt, int64_t n, void *param,
                                     void *grad, void *square_avg,
                                     void *momentum_buffer, void *grad_avg);

/* torch.optim.Adagrad's step, likewise: with d as for RMSprop,
 *   sum = sum + d * d
 *   param += (-clr * d) / (sqrt(sum) + eps),
 *   clr = lr / (1 + (step - 1) * lr_decay)   (in double, as torch's Python)
 * neg_clr is -clr for this step, unless step is set: then the kernel
 * advances the counter (unless the step is skipped) and forms neg_clr
 * from it, lr and lr_decay (nn_math.h ampc_adagrad_neg_clr).  grad_scale,
 * found_inf, kept and kept_dtype as ampc_sgd_args. */
typedef struct {
    float neg_clr, eps, weight_decay;
    int maximize;
    const float *grad_scale;
    const float *found_inf;
    float *step;
    double lr, lr_decay;
    void *kept;
    ampc_dtype kept_dtype;
} ampc_adagrad_args;

/* param, grad, sum (n), one pass */
typedef void (*ampc_adagrad_step_fn)(const ampc_adagrad_args *a,
                                     ampc_dtype dt, int64_t n, void *param,
                                     void *grad, void *sum);

#endif /* AMPC_KERNELS_OPTIM_H */
