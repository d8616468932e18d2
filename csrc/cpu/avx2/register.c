/* register.c - points the slots that have an AVX2 variant at it;
 * random, arange, amp_update_scale and nll_loss keep the portable
 * kernels.  Does nothing off x86-64.
 */
#include "cpu/cpu.h"

void
ampc_register_cpu_avx2(ampc_kernel_table *t, const char **variant)
{
#if defined(__x86_64__)
    t->cast = ampc_cast_avx2;
    variant[AMPC_SLOT_cast] = "avx2";
    t->binary = ampc_binary_avx2;
    variant[AMPC_SLOT_binary] = "avx2";
    t->lerp = ampc_lerp_avx2;
    variant[AMPC_SLOT_lerp] = "avx2";
    t->compare = ampc_compare_avx2;
    variant[AMPC_SLOT_compare] = "avx2";
    t->unary = ampc_unary_avx2;
    variant[AMPC_SLOT_unary] = "avx2";
    t->reduce = ampc_reduce_avx2;
    variant[AMPC_SLOT_reduce] = "avx2";
    t->amp_unscale = ampc_amp_unscale_avx2;
    variant[AMPC_SLOT_amp_unscale] = "avx2";
    t->grad_norm = ampc_grad_norm_avx2;
    variant[AMPC_SLOT_grad_norm] = "avx2";
    t->gemm = ampc_gemm_avx2;
    variant[AMPC_SLOT_gemm] = "avx2";
    t->conv2d_fwd = ampc_conv2d_fwd_avx2;
    variant[AMPC_SLOT_conv2d_fwd] = "avx2";
    t->conv2d_bwd_input = ampc_conv2d_bwd_input_avx2;
    variant[AMPC_SLOT_conv2d_bwd_input] = "avx2";
    t->conv2d_bwd_weight = ampc_conv2d_bwd_weight_avx2;
    variant[AMPC_SLOT_conv2d_bwd_weight] = "avx2";
    t->peak_flops = ampc_peak_flops_avx2;
    variant[AMPC_SLOT_peak_flops] = "avx2";
    t->relu_bwd = ampc_relu_bwd_avx2;
    variant[AMPC_SLOT_relu_bwd] = "avx2";
    t->max_pool2d_fwd = ampc_max_pool2d_fwd_avx2;
    variant[AMPC_SLOT_max_pool2d_fwd] = "avx2";
    t->max_pool2d_bwd = ampc_max_pool2d_bwd_avx2;
    variant[AMPC_SLOT_max_pool2d_bwd] = "avx2";
    t->avg_pool2d_fwd = ampc_avg_pool2d_fwd_avx2;
    variant[AMPC_SLOT_avg_pool2d_fwd] = "avx2";
    t->avg_pool2d_bwd = ampc_avg_pool2d_bwd_avx2;
    variant[AMPC_SLOT_avg_pool2d_bwd] = "avx2";
    t->interp_fwd = ampc_interp_fwd_avx2;
    variant[AMPC_SLOT_interp_fwd] = "avx2";
    t->interp_bwd = ampc_interp_bwd_avx2;
    variant[AMPC_SLOT_interp_bwd] = "avx2";
    t->softmax_fwd = ampc_softmax_fwd_avx2;
    variant[AMPC_SLOT_softmax_fwd] = "avx2";
    t->softmax_bwd = ampc_softmax_bwd_avx2;
    variant[AMPC_SLOT_softmax_bwd] = "avx2";
    t->cross_entropy_fwd = ampc_cross_entropy_fwd_avx2;
    variant[AMPC_SLOT_cross_entropy_fwd] = "avx2";
    t->cross_entropy_bwd = ampc_cross_entropy_bwd_avx2;
    variant[AMPC_SLOT_cross_entropy_bwd] = "avx2";
    t->mse_loss_fwd = ampc_mse_loss_fwd_avx2;
    variant[AMPC_SLOT_mse_loss_fwd] = "avx2";
    t->mse_loss_bwd = ampc_mse_loss_bwd_avx2;
    variant[AMPC_SLOT_mse_loss_bwd] = "avx2";
    t->masked_scale = ampc_masked_scale_avx2;
    variant[AMPC_SLOT_masked_scale] = "avx2";
    t->sgd_step = ampc_sgd_step_avx2;
    variant[AMPC_SLOT_sgd_step] = "avx2";
    t->adam_step = ampc_adam_step_avx2;
    variant[AMPC_SLOT_adam_step] = "avx2";
    t->rmsprop_step = ampc_rmsprop_step_avx2;
    variant[AMPC_SLOT_rmsprop_step] = "avx2";
    t->adagrad_step = ampc_adagrad_step_avx2;
    variant[AMPC_SLOT_adagrad_step] = "avx2";
    t->batch_norm_fwd = ampc_batch_norm_fwd_avx2;
    variant[AMPC_SLOT_batch_norm_fwd] = "avx2";
    t->batch_norm_bwd = ampc_batch_norm_bwd_avx2;
    variant[AMPC_SLOT_batch_norm_bwd] = "avx2";
    t->layer_norm_fwd = ampc_layer_norm_fwd_avx2;
    variant[AMPC_SLOT_layer_norm_fwd] = "avx2";
    t->layer_norm_bwd = ampc_layer_norm_bwd_avx2;
    variant[AMPC_SLOT_layer_norm_bwd] = "avx2";
    t->group_norm_fwd = ampc_group_norm_fwd_avx2;
    variant[AMPC_SLOT_group_norm_fwd] = "avx2";
    t->group_norm_bwd = ampc_group_norm_bwd_avx2;
    variant[AMPC_SLOT_group_norm_bwd] = "avx2";
#else
    (void)t;
    (void)variant;
#endif /* __x86_64__ */
}
