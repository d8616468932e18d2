/* group_norm.cu - group norm on CUDA, forward and backward, with the CPU's
 * semantics (csrc/cpu/group_norm_loops.h) and per-element math
 * (csrc/norm_math.h).  One block per (sample, group), whose D = C / groups
 * * HW values lie contiguous in x: forward sums them twice (mean, then
 * centred sums) and normalises with each channel's scale and shift;
 * backward sums grad_y and grad_y * (x - mean) per channel (kept in scratch
 * for the parameter gradients), gathers the group's sums from those and
 * writes grad_x; a second small kernel folds each channel's sums over the
 * samples in order in double for grad_weight and grad_bias.  Thread
 * partials are float32 folded into doubles every AMPC_NORM_FOLD terms;
 * block reductions are fixed trees, so the results are deterministic.
 */
#include "norm.cuh"

#define GN_THREADS 256              /* threads per (sample, group) block */
#define GN_MAX_BLOCKS 65535         /* grid-stride over the groups beyond */

// ----------------------------------------------------------------------------
// CUDA kernels: helpers

/* The sums of a and b over the block, returned to every thread, in one
 * round of barriers.  NOTE: every thread of the block must call it. */
__device__ __forceinline__ void
gn_block_sum2(double *a, double *b)
{
    __shared__ double part[2][32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int nwarps = blockDim.x >> 5;
    double va = nn_warp_sum_d(*a), vb = nn_warp_sum_d(*b);
    __syncthreads();                /* part[] may hold a previous call's */
    if (lane == 0) {
        part[0][warp] = va;
        part[1][warp] = vb;
    }
    __syncthreads();
    *a = nn_warp_sum_d(lane < nwarps ? part[0][lane] : 0.0);
    *b = nn_warp_sum_d(lane < nwarps ? part[1][lane] : 0.0);
}

/* The position (channel within the group, offset in its plane) of a
 * thread's elements as it strides through a group by blockDim.x, kept
 * without a division per element. */
struct gn_walk {
    int64_t ch, j, dch, dj, hw;

    __device__ __forceinline__
    gn_walk(int64_t start, int64_t hw_) : hw(hw_)
    {
        ch = start / hw;
        j = start % hw;
        dch = (int64_t)blockDim.x / hw;
        dj = (int64_t)blockDim.x % hw;
    }

    __device__ __forceinline__ void
    next()
    {
        ch += dch;
        j += dj;
        if (j >= hw) {
            j -= hw;
            ch++;
        }
    }
};

template <ampc_dtype PT>
__device__ __forceinline__ float
gn_param(const nn_t<PT> *t, int64_t ch, float dflt)
{
    return t == NULL ? dflt : nn_load<PT>(t[ch]);
}

// ----------------------------------------------------------------------------
// CUDA kernels: forward and backward

/* x (N, C, HW) -> y, mean, rstd (N, groups); a block per (sample, group) */
template <ampc_dtype XT, ampc_dtype PT>
__global__ void
group_norm_fwd_kernel(ampc_group_norm_shape s, const nn_t<XT> *x,
                      const nn_t<PT> *w, const nn_t<PT> *b, float *mean,
                      float *rstd, nn_t<XT> *y)
{
    int64_t cg = s.c / s.groups, d = cg * s.hw;
    for (int64_t item = blockIdx.x; item < s.n * s.groups;
         item += gridDim.x) {
        const nn_t<XT> *xg = x + item * d;
        nn_t<XT> *yg = y + item * d;
        double mu = 0.0, var = 0.0;
        if (d > 0) {
            norm_acc acc;
            for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
                acc.add(AMPC_NORM_SUM, nn_load<XT>(xg[k]), 0.0f, 0.0f);
            }
            acc.fold();
            float m0 = (float)(nn_block_sum_d(acc.d1) / (double)d);
            norm_acc dev;
            for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
                dev.add(AMPC_NORM_DEV, nn_load<XT>(xg[k]), 0.0f, m0);
            }
            dev.fold();
            gn_block_sum2(&dev.d1, &dev.d2);
            ampc_norm_moments(m0, dev.d1, dev.d2, d, &mu, &var);
        }
        float mf = (float)mu, rf = (float)ampc_norm_invstd(var, s.eps);
        if (threadIdx.x == 0) {
            mean[item] = mf;
            rstd[item] = rf;
        }
        int64_t c0 = item % s.groups * cg;
        gn_walk at(threadIdx.x, s.hw > 0 ? s.hw : 1);
        for (int64_t k = threadIdx.x; k < d; k += blockDim.x, at.next()) {
            float scale = ampc_group_norm_scale(
                gn_param<PT>(w, c0 + at.ch, 1.0f), rf);
            float shift = gn_param<PT>(b, c0 + at.ch, 0.0f);
            yg[k] = nn_store<XT>(ampc_norm_apply(nn_load<XT>(xg[k]), mf,
                                                 scale, shift));
        }
    }
}

/* grad_y, x (N, C, HW) -> grad_x (or NULL) and sums (N, C, 2): each
 * (sample, channel)'s sums of grad_y and grad_y * (x - mean) (or NULL); a
 * block per (sample, group) */
template <ampc_dtype XT, ampc_dtype PT>
__global__ void
group_norm_bwd_kernel(ampc_group_norm_shape s, const nn_t<XT> *gy,
                      const nn_t<XT> *x, const nn_t<PT> *w, const float *mean,
                      const float *rstd, nn_t<XT> *gx, double *sums)
{
    int64_t cg = s.c / s.groups, d = cg * s.hw;
    for (int64_t item = blockIdx.x; item < s.n * s.groups;
         item += gridDim.x) {
        int64_t off = item * d, c0 = item % s.groups * cg;
        int64_t at0 = (item / s.groups * s.c + c0) * 2;
        float mf = mean[item], rf = rstd[item];
        double s1 = 0.0, s2 = 0.0;
        for (int64_t ch = 0; ch < cg; ch++) {
            const nn_t<XT> *xc = x + off + ch * s.hw;
            const nn_t<XT> *gc = gy + off + ch * s.hw;
            norm_acc acc;
            for (int64_t j = threadIdx.x; j < s.hw; j += blockDim.x) {
                acc.add(AMPC_NORM_GRAD, nn_load<XT>(xc[j]),
                        nn_load<XT>(gc[j]), mf);
            }
            acc.fold();
            gn_block_sum2(&acc.d1, &acc.d2);
            if (sums != NULL && threadIdx.x == 0) {
                sums[at0 + 2 * ch] = acc.d1;
                sums[at0 + 2 * ch + 1] = acc.d2;
            }
            ampc_group_norm_gather(acc.d1, acc.d2,
                                   gn_param<PT>(w, c0 + ch, 1.0f), &s1, &s2);
        }
        if (gx == NULL || d == 0) {
            continue;
        }
        float mg, proj;
        ampc_norm_bwd_consts(s1, s2, d, rf, &mg, &proj);
        gn_walk at(threadIdx.x, s.hw);
        for (int64_t k = threadIdx.x; k < d; k += blockDim.x, at.next()) {
            float g = AMPC_MUL(nn_load<XT>(gy[off + k]),
                               gn_param<PT>(w, c0 + at.ch, 1.0f));
            gx[off + k] = nn_store<XT>(ampc_norm_bwd_one(
                g, nn_load<XT>(x[off + k]), mf, mg, proj, rf));
        }
    }
}

/* sums (N, C, 2) -> grad_weight, grad_bias (C): over the samples in order,
 * in double; a thread per channel */
template <ampc_dtype PT>
__global__ void
group_norm_params_kernel(ampc_group_norm_shape s, const double *sums,
                         const float *rstd, nn_t<PT> *gw, nn_t<PT> *gb)
{
    int64_t cg = s.c / s.groups;
    for (int64_t ch = nn_tid(); ch < s.c; ch += nn_nthreads()) {
        double sw = 0.0, sb = 0.0;
        for (int64_t k = 0; k < s.n; k++) {
            const double *p = sums + 2 * (k * s.c + ch);
            sb += p[0];
            sw += ampc_group_norm_wgrad_term(p[1],
                                             rstd[k * s.groups + ch / cg]);
        }
        if (gw != NULL) {
            gw[ch] = nn_store_f64<PT>(sw);
        }
        if (gb != NULL) {
            gb[ch] = nn_store_f64<PT>(sb);
        }
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

static unsigned int
gn_blocks(const ampc_group_norm_shape *s)
{
    int64_t items = s->n * s->groups;
    return (unsigned int)(items < GN_MAX_BLOCKS ? items : GN_MAX_BLOCKS);
}

/* x (N, C, HW) -> y (N, C, HW); mean, rstd (N, groups) */
extern "C" int
ampc_group_norm_fwd_cuda(const ampc_group_norm_shape *s, ampc_dtype xdt,
                         ampc_dtype pdt, const void *x, const void *weight,
                         const void *bias, float *mean, float *rstd, void *y)
{
    if (s->n * s->groups <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    NORM_DISPATCH(xdt, pdt, {
        group_norm_fwd_kernel<XT, PT><<<gn_blocks(s), GN_THREADS, 0, st>>>(
            *s, (const nn_t<XT> *)x, (const nn_t<PT> *)weight,
            (const nn_t<PT> *)bias, mean, rstd, (nn_t<XT> *)y);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* The two kernels of the backward, the sums in scratch freed behind them
 * (the allocator reuses it only for later work on the same stream). */
template <ampc_dtype XT, ampc_dtype PT>
static int
group_norm_bwd_launch(const ampc_group_norm_shape *s, const void *gy,
                      const void *x, const void *w, const float *mean,
                      const float *rstd, void *gx, void *gw, void *gb,
                      cudaStream_t st)
{
    int params = gw != NULL || gb != NULL;
    void *scratch = NULL;
    int rc = 0;
    if (params) {
        size_t n = 2 * (size_t)s->n * (size_t)s->c;
        rc = ampc_cuda_scratch_alloc(n * sizeof(double) + 1, &scratch);
        if (rc != 0) {
            return rc;
        }
    }
    if (s->n * s->groups > 0) {
        group_norm_bwd_kernel<XT, PT><<<gn_blocks(s), GN_THREADS, 0, st>>>(
            *s, (const nn_t<XT> *)gy, (const nn_t<XT> *)x,
            (const nn_t<PT> *)w, mean, rstd, (nn_t<XT> *)gx,
            (double *)scratch);
        rc = (int)cudaGetLastError();
    }
    if (rc == 0 && params) {
        group_norm_params_kernel<PT>
            <<<nn_blocks(s->c, AMPC_NN_THREADS), AMPC_NN_THREADS, 0, st>>>(
                *s, (const double *)scratch, rstd, (nn_t<PT> *)gw,
                (nn_t<PT> *)gb);
        rc = (int)cudaGetLastError();
    }
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "group_norm_bwd launch",
                               rc);
        if (scratch != NULL) {
            ampc_cuda_scratch_free(scratch);
        }
        return rc;
    }
    return scratch != NULL ? ampc_cuda_scratch_free(scratch) : 0;
}

/* grad_y, x (N, C, HW) -> grad_x (N, C, HW), grad_weight, grad_bias (C) */
extern "C" int
ampc_group_norm_bwd_cuda(const ampc_group_norm_shape *s, ampc_dtype xdt,
                         ampc_dtype pdt, const void *grad_y, const void *x,
                         const void *weight, const float *mean,
                         const float *rstd, void *grad_x, void *grad_weight,
                         void *grad_bias)
{
    if (s->c <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    int rc = 0;
    NORM_DISPATCH(xdt, pdt, {
        rc = group_norm_bwd_launch<XT, PT>(s, grad_y, x, weight, mean, rstd,
                                           grad_x, grad_weight, grad_bias,
                                           st);
    });
    return rc;
}
