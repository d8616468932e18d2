/* optim.cu - the fused SGD and Adam/AdamW steps on CUDA: one kernel per
 * parameter, one pass, float32 math in registers (nn_math.h ampc_sgd_one /
 * ampc_adam_one, the CPU's stages in the CPU's order), 128-bit loads and
 * stores where every buffer is 16-byte aligned.  The device-side skip of
 * PyTorch's _step_supports_amp_scaling contract is read here: with
 * found_inf nonzero the kernels return at once, so nothing is written and
 * no host sync is needed; with a grad_scale, the unscaled gradient is
 * written back to the grad tensor, as torch's fused kernels do.
 */
#include "nn_common.cuh"

/* g *= inv_scale, stored back at `at` (the grad_scale path, kernels.h) */
template <ampc_dtype DT>
__device__ __forceinline__ void
unscale_pack(nn_pack<DT> &g, float inv_scale, nn_t<DT> *at)
{
#pragma unroll
    for (int k = 0; k < nn_pack<DT>::N; k++) {
        g.f[k] = ampc_optim_unscale(g.f[k], inv_scale);
    }
    g.store(at);
}

template <ampc_dtype DT>
__device__ __forceinline__ float
unscale_one(float g, float inv_scale, nn_t<DT> *at)
{
    g = ampc_optim_unscale(g, inv_scale);
    *at = nn_store<DT>(g);
    return g;
}

// ----------------------------------------------------------------------------
// CUDA kernels

/* param, grad, buf (n); buf NULL without momentum; vec: all 16-byte
 * aligned.  NOTE: `a` is a kernel parameter: its grad_scale and found_inf
 * are device pointers read by every thread (two cached loads). */
template <ampc_dtype DT>
__global__ void
sgd_step_kernel(ampc_sgd_args a, int64_t n, nn_t<DT> *param,
                nn_t<DT> *grad, nn_t<DT> *buf, int vec)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    constexpr int N = nn_pack<DT>::N;
    float inv_scale = ampc_optim_inv_scale(a.grad_scale);
    int unscale = a.grad_scale != NULL;
    int has_buf = buf != NULL;
    /* the first step sets the buffer: its old contents are never read */
    int read_buf = has_buf && !a.first_step;
    int64_t stride = nn_nthreads();
    int64_t nvec = vec ? n / N : 0;
    for (int64_t v = nn_tid(); v < nvec; v += stride) {
        int64_t i = v * N;
        nn_pack<DT> p, g, b;
        p.load(param + i);
        g.load(grad + i);
        if (unscale) {
            unscale_pack<DT>(g, inv_scale, grad + i);
        }
        if (read_buf) {
            b.load(buf + i);
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            p.f[k] = ampc_sgd_one(&a, p.f[k], g.f[k], has_buf, &b.f[k]);
        }
        p.store(param + i);
        if (has_buf) {
            b.store(buf + i);
        }
    }
    for (int64_t i = nvec * N + nn_tid(); i < n; i += stride) {
        float b = read_buf ? nn_load<DT>(buf[i]) : 0.0f;
        float g = nn_load<DT>(grad[i]);
        if (unscale) {
            g = unscale_one<DT>(g, inv_scale, grad + i);
        }
        float p = ampc_sgd_one(&a, nn_load<DT>(param[i]), g, has_buf, &b);
        param[i] = nn_store<DT>(p);
        if (has_buf) {
            buf[i] = nn_store<DT>(b);
        }
    }
}

/* One thread: the step counter advances unless the step is skipped.  Queued
 * before adam_step_kernel, which then reads the new count. */
__global__ void
adam_count_kernel(float *step, const float *found_inf)
{
    if (!ampc_optim_skip(found_inf)) {
        *step += 1.0f;
    }
}

/* param, grad, exp_avg, exp_avg_sq, vmax (n); vmax NULL unless amsgrad */
template <ampc_dtype DT>
__global__ void
adam_step_kernel(ampc_adam_args a, int64_t n, nn_t<DT> *param,
                 nn_t<DT> *grad, nn_t<DT> *exp_avg,
                 nn_t<DT> *exp_avg_sq, nn_t<DT> *vmax, int vec)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    if (a.step != NULL) {
        /* every thread forms the constants from the device counter, in
         * double, as the CPU does from its host counter */
        ampc_adam_bias_corrections(a.lr, a.beta1, a.beta2_f64,
                                   (double)*a.step, &a.neg_step_size,
                                   &a.bias_correction2_sqrt);
    }
    constexpr int N = nn_pack<DT>::N;
    float inv_scale = ampc_optim_inv_scale(a.grad_scale);
    int unscale = a.grad_scale != NULL;
    int ams = vmax != NULL;
    int64_t stride = nn_nthreads();
    int64_t nvec = vec ? n / N : 0;
    for (int64_t v = nn_tid(); v < nvec; v += stride) {
        int64_t i = v * N;
        nn_pack<DT> p, g, m, s, x;
        p.load(param + i);
        g.load(grad + i);
        if (unscale) {
            unscale_pack<DT>(g, inv_scale, grad + i);
        }
        m.load(exp_avg + i);
        s.load(exp_avg_sq + i);
        if (ams) {
            x.load(vmax + i);
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            p.f[k] = ampc_adam_one(&a, p.f[k], g.f[k], &m.f[k], &s.f[k],
                                   ams, &x.f[k]);
        }
        p.store(param + i);
        m.store(exp_avg + i);
        s.store(exp_avg_sq + i);
        if (ams) {
            x.store(vmax + i);
        }
    }
    for (int64_t i = nvec * N + nn_tid(); i < n; i += stride) {
        float m = nn_load<DT>(exp_avg[i]), s = nn_load<DT>(exp_avg_sq[i]);
        float x = ams ? nn_load<DT>(vmax[i]) : 0.0f;
        float g = nn_load<DT>(grad[i]);
        if (unscale) {
            g = unscale_one<DT>(g, inv_scale, grad + i);
        }
        float p = ampc_adam_one(&a, nn_load<DT>(param[i]), g, &m, &s, ams,
                                &x);
        param[i] = nn_store<DT>(p);
        exp_avg[i] = nn_store<DT>(m);
        exp_avg_sq[i] = nn_store<DT>(s);
        if (ams) {
            vmax[i] = nn_store<DT>(x);
        }
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* param, grad, momentum_buffer (n) */
extern "C" int
ampc_sgd_step_cuda(const ampc_sgd_args *a, ampc_dtype dt, int64_t n,
                   void *param, void *grad, void *momentum_buffer)
{
    if (n <= 0) {
        return 0;
    }
    int vec = nn_aligned16(param) && nn_aligned16(grad) &&
              nn_aligned16(momentum_buffer);
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        int64_t work = vec ? CEIL_DIV(n, nn_pack<DT>::N) : n;
        sgd_step_kernel<DT><<<nn_blocks(work, AMPC_NN_THREADS),
                              AMPC_NN_THREADS, 0, st>>>(
            *a, n, (nn_t<DT> *)param, (nn_t<DT> *)grad,
            (nn_t<DT> *)momentum_buffer, vec);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (n) */
extern "C" int
ampc_adam_step_cuda(const ampc_adam_args *a, ampc_dtype dt, int64_t n,
                    void *param, void *grad, void *exp_avg,
                    void *exp_avg_sq, void *max_exp_avg_sq)
{
    cudaStream_t st = ampc_cuda_stream();
    if (a->step != NULL) {
        /* also for n == 0: the counter of an empty parameter advances */
        adam_count_kernel<<<1, 1, 0, st>>>(a->step, a->found_inf);
        AMPC_CUDA_CHECK_LAUNCH();
    }
    if (n <= 0) {
        return 0;
    }
    int vec = nn_aligned16(param) && nn_aligned16(grad) &&
              nn_aligned16(exp_avg) && nn_aligned16(exp_avg_sq) &&
              nn_aligned16(max_exp_avg_sq);
    AMPC_NN_DISPATCH(dt, DT, {
        int64_t work = vec ? CEIL_DIV(n, nn_pack<DT>::N) : n;
        adam_step_kernel<DT><<<nn_blocks(work, AMPC_NN_THREADS),
                               AMPC_NN_THREADS, 0, st>>>(
            *a, n, (nn_t<DT> *)param, (nn_t<DT> *)grad,
            (nn_t<DT> *)exp_avg, (nn_t<DT> *)exp_avg_sq,
            (nn_t<DT> *)max_exp_avg_sq, vec);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
