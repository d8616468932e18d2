/* optim.cu - the fused SGD, Adam/AdamW, RMSprop and Adagrad steps on
 * CUDA, float32 math in registers (nn_math.h ampc_sgd_one, ampc_adam_one,
 * ampc_rmsprop_one, ampc_adagrad_one: the CPU's stages in the CPU's order), 128-bit loads and stores where a parameter's tensors
 * are all 16-byte aligned.  Each step updates a whole list of parameters
 * in one launch, one block per chunk of a parameter (multi_tensor.cuh).
 * A parameter's kept cast (weight_casts.h) is written from the updated
 * float32 values as they are stored.
 * The device-side skip of PyTorch's _step_supports_amp_scaling contract is
 * read here: with found_inf nonzero the kernels return at once, so nothing
 * is written and no host sync is needed; with a grad_scale, the unscaled
 * gradient is written back to the grad tensor, as torch's fused kernels
 * do.
 */
#include "multi_tensor.cuh"
#include "nn_common.cuh"

/* Elements per block: a multiple of 8, so that every chunk of an aligned
 * tensor starts 16-byte aligned; small enough that the lab's 2.1M
 * parameters make about 500 blocks. */
#define OPTIM_CHUNK 4096
/* Parameters per launch (about 9 KB of kernel parameters, within the 32 KB
 * that CUDA 12.1 allows); a longer list takes one launch per
 * OPTIM_MAX_TENSORS. */
#define OPTIM_MAX_TENSORS 128

// ----------------------------------------------------------------------------
// launch metadata

/* The parameters of one launch (kernels.h ampc_optim_list): parameter t
 * owns blocks [first_block[t], first_block[t + 1]), block k of them
 * elements [k * OPTIM_CHUNK, min(numel, (k + 1) * OPTIM_CHUNK)). */
struct optim_launch {
    void *param[OPTIM_MAX_TENSORS];
    void *grad[OPTIM_MAX_TENSORS];
    void *state[3][OPTIM_MAX_TENSORS];  /* NULL where not kept */
    float *step[OPTIM_MAX_TENSORS];     /* step counters, or NULL */
    void *kept[OPTIM_MAX_TENSORS];      /* kept casts, or NULL */
    int8_t kept_dtype[OPTIM_MAX_TENSORS];
    int64_t numel[OPTIM_MAX_TENSORS];
    int32_t first_block[OPTIM_MAX_TENSORS + 1];
    uint8_t aligned[OPTIM_MAX_TENSORS]; /* all its tensors 16-byte aligned */
    int32_t n;
};
static_assert(sizeof(optim_launch) + sizeof(ampc_adam_args) <= 32764 &&
                  sizeof(ampc_adam_args) >= sizeof(ampc_rmsprop_args) &&
                  sizeof(ampc_adam_args) >= sizeof(ampc_adagrad_args),
              "kernel parameters beyond CUDA's limit");

/* This block's parameter t and its elements [*begin, *end). */
__device__ __forceinline__ int
optim_chunk(const optim_launch &L, int64_t *begin, int64_t *end)
{
    int32_t b = (int32_t)blockIdx.x;
    int t = mt_block_tensor(L.first_block, L.n, b);
    *begin = (int64_t)(b - L.first_block[t]) * OPTIM_CHUNK;
    *end = L.numel[t] - *begin < OPTIM_CHUNK ? L.numel[t]
                                             : *begin + OPTIM_CHUNK;
    return t;
}

/* Fills `L` with parameters [*next, ...) of l: as many as fit in one
 * launch (OPTIM_MAX_TENSORS, and fewer than 2^31 blocks); advances *next. */
static void
optim_launch_fill(optim_launch *L, const ampc_optim_list *l, int64_t *next)
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
        int aligned = nn_aligned16(L->param[n]) && nn_aligned16(L->grad[n]);
        for (int s = 0; s < 3; s++) {
            L->state[s][n] = l->state[s] != NULL ? l->state[s][t] : NULL;
            aligned = aligned && nn_aligned16(L->state[s][n]);
        }
        L->step[n] = l->step != NULL ? l->step[t] : NULL;
        L->kept[n] = l->kept != NULL ? l->kept[t] : NULL;
        L->kept_dtype[n] = l->kept != NULL ? l->kept_dtype[t] : 0;
        L->numel[n] = l->numel[t];
        L->first_block[n] = blocks;
        L->aligned[n] = (uint8_t)aligned;
        blocks += (int32_t)nb;
        n++;
        (*next)++;
    }
    L->first_block[n] = blocks;
    L->n = n;
}

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

/* Element i of a kept cast (kernels.h ampc_optim_list.kept) := p. */
__device__ __forceinline__ void
store_kept(void *kept, int8_t dt, int64_t i, float p)
{
    if (dt == AMPC_FLOAT16) {
        ((nn_t<AMPC_FLOAT16> *)kept)[i] = nn_store<AMPC_FLOAT16>(p);
    }
    else {
        ((nn_t<AMPC_BFLOAT16> *)kept)[i] = nn_store<AMPC_BFLOAT16>(p);
    }
}

// ----------------------------------------------------------------------------
// CUDA kernels

/* grid: one block per (parameter, chunk) of the launch; state[0]: the
 * momentum buffers.  NOTE: `a` is a kernel parameter: its grad_scale and
 * found_inf are device pointers read by every thread (two cached loads). */
template <ampc_dtype DT>
__global__ void
sgd_step_kernel(ampc_sgd_args a, optim_launch L)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    constexpr int N = nn_pack<DT>::N;
    int64_t begin, end;
    int t = optim_chunk(L, &begin, &end);
    nn_t<DT> *param = (nn_t<DT> *)L.param[t];
    nn_t<DT> *grad = (nn_t<DT> *)L.grad[t];
    nn_t<DT> *buf = (nn_t<DT> *)L.state[0][t];
    void *kept = L.kept[t];
    int8_t kept_dt = L.kept_dtype[t];
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
            if (kept != NULL) {
                store_kept(kept, kept_dt, i + k, p.f[k]);
            }
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
        if (kept != NULL) {
            store_kept(kept, kept_dt, i, p);
        }
        if (has_buf) {
            buf[i] = nn_store<DT>(b);
        }
    }
}

/* Thread t: parameter t's step counter advances unless the step is
 * skipped (empty parameters too).  Queued before the step's kernel, which
 * then reads the new counts (Adam, Adagrad). */
__global__ void
step_count_kernel(optim_launch L, const float *found_inf)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < L.n && !ampc_optim_skip(found_inf)) {
        *L.step[t] += 1.0f;
    }
}

/* grid: one block per (parameter, chunk) of the launch; state[0..2]:
 * exp_avg, exp_avg_sq, max_exp_avg_sq (NULL unless amsgrad). */
template <ampc_dtype DT>
__global__ void
adam_step_kernel(ampc_adam_args a, optim_launch L)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    int64_t begin, end;
    int t = optim_chunk(L, &begin, &end);
    if (L.step[t] != NULL) {
        /* every thread forms the constants from the device counter, in
         * double, as the CPU does from its host counter */
        ampc_adam_bias_corrections(a.lr, a.beta1, a.beta2_f64,
                                   (double)*L.step[t], &a.neg_step_size,
                                   &a.bias_correction2_sqrt);
    }
    constexpr int N = nn_pack<DT>::N;
    nn_t<DT> *param = (nn_t<DT> *)L.param[t];
    nn_t<DT> *grad = (nn_t<DT> *)L.grad[t];
    nn_t<DT> *exp_avg = (nn_t<DT> *)L.state[0][t];
    nn_t<DT> *exp_avg_sq = (nn_t<DT> *)L.state[1][t];
    nn_t<DT> *vmax = (nn_t<DT> *)L.state[2][t];
    void *kept = L.kept[t];
    int8_t kept_dt = L.kept_dtype[t];
    float inv_scale = ampc_optim_inv_scale(a.grad_scale);
    int unscale = a.grad_scale != NULL;
    int ams = vmax != NULL;
    int64_t vend = L.aligned[t] ? begin + (end - begin) / N * N : begin;
    for (int64_t i = begin + (int64_t)threadIdx.x * N; i < vend;
         i += (int64_t)blockDim.x * N) {
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
            if (kept != NULL) {
                store_kept(kept, kept_dt, i + k, p.f[k]);
            }
        }
        p.store(param + i);
        m.store(exp_avg + i);
        s.store(exp_avg_sq + i);
        if (ams) {
            x.store(vmax + i);
        }
    }
    for (int64_t i = vend + threadIdx.x; i < end; i += blockDim.x) {
        float m = nn_load<DT>(exp_avg[i]), s = nn_load<DT>(exp_avg_sq[i]);
        float x = ams ? nn_load<DT>(vmax[i]) : 0.0f;
        float g = nn_load<DT>(grad[i]);
        if (unscale) {
            g = unscale_one<DT>(g, inv_scale, grad + i);
        }
        float p = ampc_adam_one(&a, nn_load<DT>(param[i]), g, &m, &s, ams,
                                &x);
        param[i] = nn_store<DT>(p);
        if (kept != NULL) {
            store_kept(kept, kept_dt, i, p);
        }
        exp_avg[i] = nn_store<DT>(m);
        exp_avg_sq[i] = nn_store<DT>(s);
        if (ams) {
            vmax[i] = nn_store<DT>(x);
        }
    }
}

/* grid: one block per (parameter, chunk) of the launch; state[0..2]:
 * square_avg, momentum_buffer, grad_avg (the last two NULL where not
 * kept). */
template <ampc_dtype DT>
__global__ void
rmsprop_step_kernel(ampc_rmsprop_args a, optim_launch L)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    constexpr int N = nn_pack<DT>::N;
    int64_t begin, end;
    int t = optim_chunk(L, &begin, &end);
    nn_t<DT> *param = (nn_t<DT> *)L.param[t];
    nn_t<DT> *grad = (nn_t<DT> *)L.grad[t];
    nn_t<DT> *square_avg = (nn_t<DT> *)L.state[0][t];
    nn_t<DT> *buf = (nn_t<DT> *)L.state[1][t];
    nn_t<DT> *grad_avg = (nn_t<DT> *)L.state[2][t];
    void *kept = L.kept[t];
    int8_t kept_dt = L.kept_dtype[t];
    float inv_scale = ampc_optim_inv_scale(a.grad_scale);
    int unscale = a.grad_scale != NULL;
    int has_buf = buf != NULL, centered = grad_avg != NULL;
    int64_t vend = L.aligned[t] ? begin + (end - begin) / N * N : begin;
    for (int64_t i = begin + (int64_t)threadIdx.x * N; i < vend;
         i += (int64_t)blockDim.x * N) {
        nn_pack<DT> p, g, v, m, b;
        p.load(param + i);
        g.load(grad + i);
        if (unscale) {
            unscale_pack<DT>(g, inv_scale, grad + i);
        }
        v.load(square_avg + i);
        if (centered) {
            m.load(grad_avg + i);
        }
        if (has_buf) {
            b.load(buf + i);
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            p.f[k] = ampc_rmsprop_one(&a, p.f[k], g.f[k], &v.f[k], centered,
                                      &m.f[k], has_buf, &b.f[k]);
            if (kept != NULL) {
                store_kept(kept, kept_dt, i + k, p.f[k]);
            }
        }
        p.store(param + i);
        v.store(square_avg + i);
        if (centered) {
            m.store(grad_avg + i);
        }
        if (has_buf) {
            b.store(buf + i);
        }
    }
    for (int64_t i = vend + threadIdx.x; i < end; i += blockDim.x) {
        float v = nn_load<DT>(square_avg[i]);
        float m = centered ? nn_load<DT>(grad_avg[i]) : 0.0f;
        float b = has_buf ? nn_load<DT>(buf[i]) : 0.0f;
        float g = nn_load<DT>(grad[i]);
        if (unscale) {
            g = unscale_one<DT>(g, inv_scale, grad + i);
        }
        float p = ampc_rmsprop_one(&a, nn_load<DT>(param[i]), g, &v,
                                   centered, &m, has_buf, &b);
        param[i] = nn_store<DT>(p);
        if (kept != NULL) {
            store_kept(kept, kept_dt, i, p);
        }
        square_avg[i] = nn_store<DT>(v);
        if (centered) {
            grad_avg[i] = nn_store<DT>(m);
        }
        if (has_buf) {
            buf[i] = nn_store<DT>(b);
        }
    }
}

/* grid: one block per (parameter, chunk) of the launch; state[0]: sum. */
template <ampc_dtype DT>
__global__ void
adagrad_step_kernel(ampc_adagrad_args a, optim_launch L)
{
    if (ampc_optim_skip(a.found_inf)) {
        return;
    }
    int64_t begin, end;
    int t = optim_chunk(L, &begin, &end);
    if (L.step[t] != NULL) {
        /* every thread forms -clr from the device counter, in double, as
         * the CPU does from its host counter */
        a.neg_clr = ampc_adagrad_neg_clr(a.lr, a.lr_decay,
                                         (double)*L.step[t]);
    }
    constexpr int N = nn_pack<DT>::N;
    nn_t<DT> *param = (nn_t<DT> *)L.param[t];
    nn_t<DT> *grad = (nn_t<DT> *)L.grad[t];
    nn_t<DT> *sum = (nn_t<DT> *)L.state[0][t];
    void *kept = L.kept[t];
    int8_t kept_dt = L.kept_dtype[t];
    float inv_scale = ampc_optim_inv_scale(a.grad_scale);
    int unscale = a.grad_scale != NULL;
    int64_t vend = L.aligned[t] ? begin + (end - begin) / N * N : begin;
    for (int64_t i = begin + (int64_t)threadIdx.x * N; i < vend;
         i += (int64_t)blockDim.x * N) {
        nn_pack<DT> p, g, s;
        p.load(param + i);
        g.load(grad + i);
        if (unscale) {
            unscale_pack<DT>(g, inv_scale, grad + i);
        }
        s.load(sum + i);
#pragma unroll
        for (int k = 0; k < N; k++) {
            p.f[k] = ampc_adagrad_one(&a, p.f[k], g.f[k], &s.f[k]);
            if (kept != NULL) {
                store_kept(kept, kept_dt, i + k, p.f[k]);
            }
        }
        p.store(param + i);
        s.store(sum + i);
    }
    for (int64_t i = vend + threadIdx.x; i < end; i += blockDim.x) {
        float s = nn_load<DT>(sum[i]);
        float g = nn_load<DT>(grad[i]);
        if (unscale) {
            g = unscale_one<DT>(g, inv_scale, grad + i);
        }
        float p = ampc_adagrad_one(&a, nn_load<DT>(param[i]), g, &s);
        param[i] = nn_store<DT>(p);
        if (kept != NULL) {
            store_kept(kept, kept_dt, i, p);
        }
        sum[i] = nn_store<DT>(s);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* every parameter of l, state[0] the momentum buffers (or NULL) */
extern "C" int
ampc_sgd_step_cuda(const ampc_sgd_args *a, ampc_dtype dt,
                   const ampc_optim_list *l)
{
    cudaStream_t st = ampc_cuda_stream();
    optim_launch L;
    int64_t next = 0;
    while (next < l->n) {
        optim_launch_fill(&L, l, &next);
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

/* every parameter of l: state[0..2] exp_avg, exp_avg_sq, max_exp_avg_sq
 * (or NULL), l->step the counters (or NULL) */
extern "C" int
ampc_adam_step_cuda(const ampc_adam_args *a, ampc_dtype dt,
                    const ampc_optim_list *l)
{
    cudaStream_t st = ampc_cuda_stream();
    optim_launch L;
    int64_t next = 0;
    while (next < l->n) {
        optim_launch_fill(&L, l, &next);
        if (l->step != NULL) {
            step_count_kernel<<<CEIL_DIV(L.n, 128), 128, 0, st>>>(
                L, a->found_inf);
            AMPC_CUDA_CHECK_LAUNCH();
        }
        int32_t blocks = L.first_block[L.n];
        if (blocks == 0) {
            continue;           /* only empty parameters */
        }
        AMPC_NN_DISPATCH(dt, DT, {
            adam_step_kernel<DT><<<blocks, AMPC_NN_THREADS, 0, st>>>(*a, L);
        });
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}

/* every parameter of l: state[0..2] square_avg, momentum_buffer, grad_avg
 * (the last two NULL where not kept), l->step the counters (or NULL) */
extern "C" int
ampc_rmsprop_step_cuda(const ampc_rmsprop_args *a, ampc_dtype dt,
                       const ampc_optim_list *l)
{
    cudaStream_t st = ampc_cuda_stream();
    optim_launch L;
    int64_t next = 0;
    while (next < l->n) {
        optim_launch_fill(&L, l, &next);
        if (l->step != NULL) {
            step_count_kernel<<<CEIL_DIV(L.n, 128), 128, 0, st>>>(
                L, a->found_inf);
            AMPC_CUDA_CHECK_LAUNCH();
        }
        int32_t blocks = L.first_block[L.n];
        if (blocks == 0) {
            continue;           /* only empty parameters */
        }
        AMPC_NN_DISPATCH(dt, DT, {
            rmsprop_step_kernel<DT>
                <<<blocks, AMPC_NN_THREADS, 0, st>>>(*a, L);
        });
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}

/* every parameter of l: state[0] sum, l->step the counters (or NULL: then
 * a->neg_clr is this step's) */
extern "C" int
ampc_adagrad_step_cuda(const ampc_adagrad_args *a, ampc_dtype dt,
                       const ampc_optim_list *l)
{
    cudaStream_t st = ampc_cuda_stream();
    optim_launch L;
    int64_t next = 0;
    while (next < l->n) {
        optim_launch_fill(&L, l, &next);
        if (l->step != NULL) {
            step_count_kernel<<<CEIL_DIV(L.n, 128), 128, 0, st>>>(
                L, a->found_inf);
            AMPC_CUDA_CHECK_LAUNCH();
        }
        int32_t blocks = L.first_block[L.n];
        if (blocks == 0) {
            continue;           /* only empty parameters */
        }
        AMPC_NN_DISPATCH(dt, DT, {
            adagrad_step_kernel<DT>
                <<<blocks, AMPC_NN_THREADS, 0, st>>>(*a, L);
        });
        AMPC_CUDA_CHECK_LAUNCH();
    }
    return 0;
}
