/* register.c - fills every slot of the CPU table with the portable kernels;
 * the SIMD levels then override what they implement.
 */
#include "cpu/cpu.h"

void
ampc_register_cpu_ref(ampc_kernel_table *t, const char **variant)
{
    t->cast = ampc_cast_ref;
    t->binary = ampc_binary_ref;
    t->compare = ampc_compare_ref;
    t->unary = ampc_unary_ref;
    t->reduce = ampc_reduce_ref;
    t->random = ampc_random_ref;
    t->arange = ampc_arange_ref;
    t->index_gather = ampc_index_gather_ref;
    t->index_put = ampc_index_put_ref;
    t->scatter_reduce = ampc_scatter_reduce_ref;
    t->scan = ampc_scan_ref;
    t->sort = ampc_sort_ref;
    t->topk = ampc_topk_ref;
    t->scan_minmax = ampc_scan_minmax_ref;
    t->histc = ampc_histc_ref;
    t->count_true = ampc_count_true_ref;
    t->nonzero = ampc_nonzero_ref;
    t->where = ampc_where_ref;
    t->lerp = ampc_lerp_ref;
    t->amp_unscale = ampc_amp_unscale_ref;
    t->amp_update_scale = ampc_amp_update_scale_ref;
    t->grad_norm = ampc_grad_norm_ref;
    t->gemm = ampc_gemm_ref;
    t->conv2d_fwd = ampc_conv2d_fwd_ref;
    t->conv2d_bwd_input = ampc_conv2d_bwd_input_ref;
    t->conv2d_bwd_weight = ampc_conv2d_bwd_weight_ref;
    t->peak_flops = ampc_peak_flops_ref;
    t->relu_bwd = ampc_relu_bwd_ref;
    t->max_pool2d_fwd = ampc_max_pool2d_fwd_ref;
    t->max_pool2d_bwd = ampc_max_pool2d_bwd_ref;
    t->max_pool2d_gather = ampc_max_pool2d_gather_ref;
    t->avg_pool2d_fwd = ampc_avg_pool2d_fwd_ref;
    t->avg_pool2d_bwd = ampc_avg_pool2d_bwd_ref;
    t->interp_fwd = ampc_interp_fwd_ref;
    t->interp_bwd = ampc_interp_bwd_ref;
    t->adaptive_max_pool2d = ampc_adaptive_max_pool2d_ref;
    t->embedding_bag_fwd = ampc_embedding_bag_fwd_ref;
    t->embedding_bag_bwd = ampc_embedding_bag_bwd_ref;
    t->softmax_fwd = ampc_softmax_fwd_ref;
    t->softmax_bwd = ampc_softmax_bwd_ref;
    t->nll_loss_fwd = ampc_nll_loss_fwd_ref;
    t->nll_loss_bwd = ampc_nll_loss_bwd_ref;
    t->cross_entropy_fwd = ampc_cross_entropy_fwd_ref;
    t->cross_entropy_bwd = ampc_cross_entropy_bwd_ref;
    t->mse_loss_fwd = ampc_mse_loss_fwd_ref;
    t->mse_loss_bwd = ampc_mse_loss_bwd_ref;
    t->masked_scale = ampc_masked_scale_ref;
    t->sgd_step = ampc_sgd_step_ref;
    t->adam_step = ampc_adam_step_ref;
    t->rmsprop_step = ampc_rmsprop_step_ref;
    t->adagrad_step = ampc_adagrad_step_ref;
    t->batch_norm_fwd = ampc_batch_norm_fwd_ref;
    t->batch_norm_bwd = ampc_batch_norm_bwd_ref;
    t->layer_norm_fwd = ampc_layer_norm_fwd_ref;
    t->layer_norm_bwd = ampc_layer_norm_bwd_ref;
    t->group_norm_fwd = ampc_group_norm_fwd_ref;
    t->group_norm_bwd = ampc_group_norm_bwd_ref;
    for (int s = 0; s < AMPC_NUM_SLOTS; s++) {
        variant[s] = "ref";
    }
}
