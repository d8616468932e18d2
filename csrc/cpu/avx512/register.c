/* register.c - points the slots that have an AVX-512 variant at it;
 * arange, amp_update_scale and nll_loss keep the portable kernels (random
 * keeps them for every kind but normal).  Does nothing off x86-64.
 */
#include "cpu/cpu.h"

void
ampc_register_cpu_avx512(ampc_kernel_table *t, const char **variant)
{
#if defined(__x86_64__)
    t->cast = ampc_cast_avx512;
    variant[AMPC_SLOT_cast] = "avx512";
    t->binary = ampc_binary_avx512;
    variant[AMPC_SLOT_binary] = "avx512";
    t->lerp = ampc_lerp_avx512;
    variant[AMPC_SLOT_lerp] = "avx512";
    t->compare = ampc_compare_avx512;
    variant[AMPC_SLOT_compare] = "avx512";
    t->unary = ampc_unary_avx512;
    variant[AMPC_SLOT_unary] = "avx512";
    t->reduce = ampc_reduce_avx512;
    variant[AMPC_SLOT_reduce] = "avx512";
    t->amp_unscale = ampc_amp_unscale_avx512;
    variant[AMPC_SLOT_amp_unscale] = "avx512";
    t->grad_norm = ampc_grad_norm_avx512;
    variant[AMPC_SLOT_grad_norm] = "avx512";
    t->gemm = ampc_gemm_avx512;
    variant[AMPC_SLOT_gemm] = "avx512";
    t->conv2d_fwd = ampc_conv2d_fwd_avx512;
    variant[AMPC_SLOT_conv2d_fwd] = "avx512";
    t->conv2d_bwd_input = ampc_conv2d_bwd_input_avx512;
    variant[AMPC_SLOT_conv2d_bwd_input] = "avx512";
    t->conv2d_bwd_weight = ampc_conv2d_bwd_weight_avx512;
    variant[AMPC_SLOT_conv2d_bwd_weight] = "avx512";
    t->peak_flops = ampc_peak_flops_avx512;
    variant[AMPC_SLOT_peak_flops] = "avx512";
    t->relu_bwd = ampc_relu_bwd_avx512;
    variant[AMPC_SLOT_relu_bwd] = "avx512";
    t->max_pool2d_fwd = ampc_max_pool2d_fwd_avx512;
    variant[AMPC_SLOT_max_pool2d_fwd] = "avx512";
    t->max_pool2d_bwd = ampc_max_pool2d_bwd_avx512;
    variant[AMPC_SLOT_max_pool2d_bwd] = "avx512";
    t->avg_pool2d_fwd = ampc_avg_pool2d_fwd_avx512;
    variant[AMPC_SLOT_avg_pool2d_fwd] = "avx512";
    t->avg_pool2d_bwd = ampc_avg_pool2d_bwd_avx512;
    variant[AMPC_SLOT_avg_pool2d_bwd] = "avx512";
    t->interp_fwd = ampc_interp_fwd_avx512;
    variant[AMPC_SLOT_interp_fwd] = "avx512";
    t->interp_bwd = ampc_interp_bwd_avx512;
    variant[AMPC_SLOT_interp_bwd] = "avx512";
    t->softmax_fwd = ampc_softmax_fwd_avx512;
    variant[AMPC_SLOT_softmax_fwd] = "avx512";
    t->softmax_bwd = ampc_softmax_bwd_avx512;
    variant[AMPC_SLOT_softmax_bwd] = "avx512";
    t->cross_entropy_fwd = ampc_cross_entropy_fwd_avx512;
    variant[AMPC_SLOT_cross_entropy_fwd] = "avx512";
    t->cross_entropy_bwd = ampc_cross_entropy_bwd_avx512;
    variant[AMPC_SLOT_cross_entropy_bwd] = "avx512";
    t->mse_loss_fwd = ampc_mse_loss_fwd_avx512;
    variant[AMPC_SLOT_mse_loss_fwd] = "avx512";
    t->mse_loss_bwd = ampc_mse_loss_bwd_avx512;
    variant[AMPC_SLOT_mse_loss_bwd] = "avx512";
    t->masked_scale = ampc_masked_scale_avx512;
    variant[AMPC_SLOT_masked_scale] = "avx512";
    t->sgd_step = ampc_sgd_step_avx512;
    variant[AMPC_SLOT_sgd_step] = "avx512";
    t->adam_step = ampc_adam_step_avx512;
    variant[AMPC_SLOT_adam_step] = "avx512";
    t->rmsprop_step = ampc_rmsprop_step_avx512;
    variant[AMPC_SLOT_rmsprop_step] = "avx512";
    t->adagrad_step = ampc_adagrad_step_avx512;
    variant[AMPC_SLOT_adagrad_step] = "avx512";
    t->batch_norm_fwd = ampc_batch_norm_fwd_avx512;
    variant[AMPC_SLOT_batch_norm_fwd] = "avx512";
    t->batch_norm_bwd = ampc_batch_norm_bwd_avx512;
    variant[AMPC_SLOT_batch_norm_bwd] = "avx512";
    t->layer_norm_fwd = ampc_layer_norm_fwd_avx512;
    variant[AMPC_SLOT_layer_norm_fwd] = "avx512";
    t->layer_norm_bwd = ampc_layer_norm_bwd_avx512;
    variant[AMPC_SLOT_layer_norm_bwd] = "avx512";
    t->group_norm_fwd = ampc_group_norm_fwd_avx512;
    variant[AMPC_SLOT_group_norm_fwd] = "avx512";
    t->group_norm_bwd = ampc_group_norm_bwd_avx512;
    variant[AMPC_SLOT_group_norm_bwd] = "avx512";
    t->random = ampc_random_avx512;
    variant[AMPC_SLOT_random] = "avx512";
#else
    (void)t;
    (void)variant;
#endif /* __x86_64__ */
}
