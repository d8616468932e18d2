/* optim.cu - the fused SGD and Adam/AdamW steps on CUDA, float32 math in
 * registers (nn_math.h ampc_sgd_one / ampc_adam_one, the CPU's stages in
 * the CPU's order), 128-bit loads and stores where a tensor's buffers are
 * all 16-byte aligned.  SGD updates a whole list of parameters in one
 * launch (one block per chunk of a parameter, multi_tensor.cuh); Adam
 * takes one launch per parameter.  The device-side skip of PyTorch's
 * _step_supports_amp_scaling contract is read here: with found_inf nonzero
 * the kernels return at once, so nothing is written and no host sync is
 * needed; with a grad_scale, the unscaled gradient is written back to the
 * grad tensor, as torch's fused kernels do.
 */
#include "multi_tensor.cuh"
#include "nn_common.cuh"

/* Elements per block of the multi-tensor SGD step: a multiple of 8, so
 * that every chunk of an aligned tensor starts 16-byte aligned; small
 * enough that the lab's 2.1M parameters make about 500 blocks. */
#define OPTIM_CHUNK 4096
/* Parameters per launch (about 4.7 KB of kernel parameters); a longer list
 * takes one launch per OPTIM_MAX_TENSORS. */
#define OPTIM_MAX_TENSORS 128

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

/* The parameters of one SGD launch: tensor t owns blocks [first_block[t],
 * first_block[t + 1]), block k of them elements [k * OPTIM_CHUNK,
 * min(numel, (k + 1) * OPTIM_CHUNK)); buf[t] is NULL without momentum. */
struct sgd_launch {
    void *param[OPTIM_MAX_TENSORS];
    void *grad[OPTIM_MAX_TENSORS];
    void *buf[OPTIM_MAX_TENSORS];
    int64_t numel[OPTIM_MAX_TENSORS];
    int32_t first_block[OPTIM_MAX_TENSORS + 1];
    uint8_t aligned[OPTIM_MAX_TENSORS]; /* all three 16-byte aligned */
    int32_t n;
};

/* grid: one block per (parameter, chunk) of the launch.  NOTE: `a` is a
 * kernel parameter: its grad_scale and found_inf are device pointers read
 * by every thread (two cached loads). */
template <ampc_dtype DT>
__global__ void
sgd_step_kernel(ampc_sgd_args a, sgd_launch L)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    constexpr int N = nn_pack<DT>::N;
    int t = mt_block_tensor(L.first_block, L.n, (int32_t)blockIdx.x);
    int64_t begin = (int64_t)((int32_t)blockIdx.x - L.first_block[t]) *
                    OPTIM_CHUNK;
    int64_t end = L.numel[t] - begin < OPTIM_CHUNK ? L.numel[t]
                                                   : begin + OPTIM_CHUNK;
    nn_t<DT> *param = (nn_t<DT> *)L.param[t];
    nn_t<DT> *grad = (nn_t<DT> *)L.grad[t];
    nn_t<DT> *buf = (nn_t<DT> *)L.buf[t];
    float inv_scale = ampc_optim_inv_scale(a.grad_scale);
    int unscale = a.grad_scale != NULL;
    int has_buf = buf != NULL;
    /* the first step sets the buffer: its old contents are never read */
    int read_buf = has_buf && !a.first_step;
    /* begin is a multiple of N: an aligned tensor's chunk is aligned too */
    int64_t vend = L.aligned[t] ? begin + (end - begin) / N * N : begin;
    for (int64_t i = begin + (int64_t)threadIdx.x * N; i < vend;
         i += (int64_t)blockDim.x * N) {
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
    for (int64_t i = vend + threadIdx.x; i < end; i += blockDim.x) {
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

/* Fills `L` with parameters [*next, ...) of l: as many as fit in one
 * launch (OPTIM_MAX_TENSORS, and fewer than 2^31 blocks); advances *next. */
static void
sgd_launch_fill(sgd_launch *L, const ampc_optim_list *l, int64_t *next)
{
    int32_t blocks = 0;
    int n = 0;
    while (*next < l->n && n < OPTIM_MAX_TENSORS) {
        int64_t t = *next;
        int64_t nb = CEIL_DIV(l->numel[t], (int64_t)OPTIM_CHUNK);
        if (n > 0 && (int64_t)blocks + nb > (int64_t)INT32_MAX) {
            break;
        }
        L->param[n] = l->param[t];
        L->grad[n] = l->grad[t];
        L->buf[n] = l->state[0] != NULL ? l->state[0][t] : NULL;
        L->numel[n] = l->numel[t];
        L->first_block[n] = blocks;
        L->aligned[n] = nn_aligned16(L->param[n]) &&
                        nn_aligned16(L->grad[n]) && nn_aligned16(L->buf[n]);
        blocks += (int32_t)nb;
        n++;
        (*next)++;
    }
    L->first_block[n] = blocks;
    L->n = n;
}

/* every parameter of l, state[0] the momentum buffers (or NULL) */
extern "C" int
ampc_sgd_step_cuda(const ampc_sgd_args *a, ampc_dtype dt,
                   const ampc_optim_list *l)
{
    cudaStream_t st = ampc_cuda_stream();
    sgd_launch L;
    int64_t next = 0;
    while (next < l->n) {
        sgd_launch_fill(&L, l, &next);
        int32_t blocks = L.first_block[L.n];
        if (blocks == 0) {
            continue;           /* only empty parameters */
        }
        AMPC_NN_DISPATCH(dt, DT, {
            sgd_step_kernel<DT><<<blocks, AMPC_NN_THREADS, 0, st>>>(*a, L);
        });
        AMPC_CUDA_CHECK_LAUNCH();
    }
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
