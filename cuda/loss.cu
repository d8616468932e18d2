/* loss.cu - the losses on CUDA: nll_loss, the fused cross_entropy
 * (log_softmax and the loss in one pass per row) and mse_loss, forward and
 * backward, with every reduction on the device: rows (or per-block partial
 * sums) in double, then one block folds them in a fixed order, so the
 * result is deterministic and no row loss crosses to the host.  Also the
 * deferred error record (kernels_cuda.h ampc_nn_error): class targets are
 * validated here, on the device, and reported through it instead of by a
 * host sync per step.
 */
#include "nn_common.cuh"

#define ROWS_PER_BLOCK (AMPC_NN_THREADS / 32)
/* mse_loss's first pass: at most this many blocks of partial sums */
#define MSE_PARTS 1024

// ----------------------------------------------------------------------------
// the deferred error record

static ampc_nn_error *nn_error_host = NULL;
static ampc_nn_error *nn_error_dev = NULL;

/* Mapped and portable pinned memory: the kernels of every device write it
 * through the same (UVA) address, and the host reads it without a sync. */
static int
nn_error_alloc(void)
{
    if (nn_error_host != NULL) {
        return 0;
    }
    void *h = NULL, *d = NULL;
    AMPC_CUDA_CHECK(cudaHostAlloc(&h, sizeof(ampc_nn_error),
                                  cudaHostAllocMapped |
                                      cudaHostAllocPortable));
    memset(h, 0, sizeof(ampc_nn_error));
    /* NOTE: with unified addressing (every 64-bit platform CUDA 13
     * supports) a mapped host pointer is also the device pointer; the call
     * can only fail where mapping is off, and then no kernel may write it */
    cudaError_t rc = cudaHostGetDevicePointer(&d, h, 0);
    if (rc != cudaSuccess) {
        cudaFreeHost(h);
        AMPC_CUDA_CHECK(rc);
    }
    nn_error_host = (ampc_nn_error *)h;
    nn_error_dev = (ampc_nn_error *)d;
    return 0;
}

extern "C" int
ampc_nn_error_cuda(ampc_nn_error **host)
{
    int rc = nn_error_alloc();
    *host = nn_error_host;
    return rc;
}

int
ampc_nn_error_device(ampc_nn_error **dev)
{
    int rc = nn_error_alloc();
    *dev = nn_error_dev;
    return rc;
}

// ----------------------------------------------------------------------------
// CUDA kernels: class-index losses

/* The class of row i: 1 and *t for a valid target, 0 for ignore_index; a
 * bad target is reported and also gives 0 (the caller marks the row). */
__device__ __forceinline__ int
class_target(const ampc_cuda_class_loss_args &a, int64_t i, int64_t *t,
             ampc_nn_error *err, int *bad)
{
    *t = a.target[i];
    *bad = 0;
    if (*t == a.s.ignore_index) {
        return 0;
    }
    if (*t < 0 || *t >= a.s.c) {
        *bad = 1;
        nn_report(err, *t, a.s.c, AMPC_NN_ERR_TARGET);
        return 0;
    }
    return 1;
}

template <ampc_dtype DT>
__device__ __forceinline__ float
class_weight(const ampc_cuda_class_loss_args &a, int64_t k)
{
    return a.weight != NULL ? nn_load<DT>(((const nn_t<DT> *)a.weight)[k])
                            : 1.0f;
}

/* A row's loss and weight: into loss (N) for 'none', else into rows
 * (2N doubles: losses, then weights) for class_reduce_kernel. */
template <ampc_dtype DT>
__device__ __forceinline__ void
class_row_out(const ampc_cuda_class_loss_args &a, int64_t i, double loss,
              double w, double *rows)
{
    if (a.reduction == 0) {
        ((nn_t<DT> *)a.loss)[i] = nn_store_f64<DT>(loss);
    }
    else {
        rows[i] = loss;
        rows[a.s.n + i] = w;
    }
}

/* logp (N, C) -> row losses -w[t] logp[t]; a thread per row */
template <ampc_dtype DT>
__global__ void
nll_fwd_kernel(ampc_cuda_class_loss_args a, double *rows,
               ampc_nn_error *err)
{
    const nn_t<DT> *lp = (const nn_t<DT> *)a.input;
    for (int64_t i = nn_tid(); i < a.s.n; i += nn_nthreads()) {
        int64_t t;
        int bad;
        double loss = 0.0, w = 0.0;
        if (class_target(a, i, &t, err, &bad)) {
            w = class_weight<DT>(a, t);
            loss = ampc_nll_row_loss(w, nn_load<DT>(lp[i * a.s.c + t]));
        }
        else if (bad) {
            loss = NAN;
        }
        class_row_out<DT>(a, i, loss, w, rows);
    }
}

/* logits (N, C) -> logp (N, C) and the row losses; a warp per row: the max,
 * the sum of exp(x - max), then logp with (label smoothing) its weighted
 * sum, as the CPU's ampc_xent_fwd_row. */
template <ampc_dtype DT>
__global__ void
xent_fwd_kernel(ampc_cuda_class_loss_args a, double *rows,
                ampc_nn_error *err)
{
    int lane = threadIdx.x & 31;
    int64_t warp = nn_tid() >> 5, nwarps = nn_nthreads() >> 5;
    int64_t nc = a.s.c;
    int smooth = a.s.label_smoothing > 0.0;
    for (int64_t row = warp; row < a.s.n; row += nwarps) {
        const nn_t<DT> *x = (const nn_t<DT> *)a.input + row * nc;
        nn_t<DT> *lp = (nn_t<DT> *)a.logp + row * nc;
        float m = -INFINITY;
        for (int64_t k = lane; k < nc; k += 32) {
            m = ampc_nn_max(m, nn_load<DT>(x[k]));
        }
        m = nn_warp_max(m);
        float sum = 0.0f;
        for (int64_t k = lane; k < nc; k += 32) {
            sum += ampc_exp_nonpos_f32(nn_load<DT>(x[k]) - m);
        }
        float ls = ampc_softmax_log_sum((double)nn_warp_sum(sum));
        float wlp = 0.0f;
        for (int64_t k = lane; k < nc; k += 32) {
            float o = ampc_log_softmax_one(nn_load<DT>(x[k]), m, ls);
            lp[k] = nn_store<DT>(o);
            if (smooth) {
                wlp += o * class_weight<DT>(a, k);
            }
        }
        wlp = nn_warp_sum(wlp);
        if (lane != 0) {
            continue;
        }
        int64_t t;
        int bad;
        double loss = 0.0, w = 0.0;
        if (class_target(a, row, &t, err, &bad)) {
            w = class_weight<DT>(a, t);
            double lpt = ampc_log_softmax_one(nn_load<DT>(x[t]), m, ls);
            loss = ampc_xent_row_loss(w, lpt, a.s.label_smoothing, nc,
                                      (double)wlp);
        }
        else if (bad) {
            loss = NAN;
        }
        class_row_out<DT>(a, row, loss, w, rows);
    }
}

/* rows (2N) -> loss (one element of DT): the sum of the losses, divided by
 * the sum of the weights for 'mean'; total_weight = that sum.  One block
 * of AMPC_NN_REDUCE_THREADS: thread k folds rows k, k + T, ... in order,
 * then the block tree. */
template <ampc_dtype DT>
__global__ void
class_reduce_kernel(ampc_cuda_class_loss_args a, const double *rows)
{
    double sum = 0.0, total = 0.0;
    for (int64_t i = threadIdx.x; i < a.s.n; i += blockDim.x) {
        sum += rows[i];
        total += rows[a.s.n + i];
    }
    sum = nn_block_sum_d(sum);
    total = nn_block_sum_d(total);
    if (threadIdx.x == 0) {
        *(nn_t<DT> *)a.loss = nn_store_f64<DT>(
            a.reduction == 1 ? sum / total : sum);
        *a.total_weight = (float)total;
    }
}

/* The backward's per-call constants, one block: consts[0] = the factor of
 * grad_out (1 / total weight for 'mean', else 1), consts[1] = the sum of
 * the class weights (xent). */
template <ampc_dtype DT>
__global__ void
class_bwd_consts_kernel(ampc_cuda_class_loss_args a, double *consts)
{
    double wsum = 0.0, total = 0.0;
    for (int64_t k = threadIdx.x; k < a.s.c; k += blockDim.x) {
        wsum += class_weight<DT>(a, k);
    }
    int recompute = a.reduction == 1 && a.total_in == NULL &&
                    a.total_recompute;
    for (int64_t i = threadIdx.x; recompute && i < a.s.n;
         i += blockDim.x) {
        int64_t t = a.target[i];
        if (t != a.s.ignore_index && t >= 0 && t < a.s.c) {
            total += class_weight<DT>(a, t);
        }
    }
    wsum = nn_block_sum_d(wsum);
    total = nn_block_sum_d(total);
    if (threadIdx.x != 0) {
        return;
    }
    double scale = 1.0;
    if (a.reduction == 1) {
        if (a.total_in != NULL) {
            scale = 1.0 / (double)nn_load_any(a.tdt, a.total_in);
        }
        else if (recompute) {
            /* as the forward's float32 total_weight holds it */
            scale = 1.0 / (double)(float)total;
        }
        else {
            scale = 1.0 / a.total_host;
        }
    }
    consts[0] = scale;
    consts[1] = wsum;
}

/* row i's factor: grad_out (its row for 'none') times consts[0], rounded
 * to float32 as the CPU's row_scale */
__device__ __forceinline__ float
class_row_scale(const ampc_cuda_class_loss_args &a, const double *consts,
                int64_t i)
{
    const char *g = (const char *)a.grad_out;
    if (a.reduction == 0) {
        g += i * a.grad_stride * (a.gdt == AMPC_FLOAT32 ? 4 : 2);
    }
    return (float)((double)nn_load_any(a.gdt, g) * consts[0]);
}

/* -> grad (N, C): 0 except grad[i, t_i] = -row_scale[i] * w[t_i]; a thread
 * per element */
template <ampc_dtype DT>
__global__ void
nll_bwd_kernel(ampc_cuda_class_loss_args a, const double *consts,
               ampc_nn_error *err)
{
    int64_t total = a.s.n * a.s.c;
    nn_t<DT> *g = (nn_t<DT> *)a.grad;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t i = e / a.s.c, k = e % a.s.c;
        int64_t t = a.target[i];
        double v = 0.0;
        if (t == k && t != a.s.ignore_index) {
            v = ampc_nll_grad(class_row_scale(a, consts, i),
                              class_weight<DT>(a, t));
        }
        else if (k == 0 && t != a.s.ignore_index && (t < 0 || t >= a.s.c)) {
            nn_report(err, t, a.s.c, AMPC_NN_ERR_TARGET);
        }
        g[e] = nn_store_f64<DT>(v);
    }
}

/* logp (N, C) -> grad (N, C) = row_scale * (exp(logp) * total - a_k); a
 * warp per row, as the CPU's ampc_xent_bwd_row; 0 for ignored rows */
template <ampc_dtype DT>
__global__ void
xent_bwd_kernel(ampc_cuda_class_loss_args a, const double *consts,
                ampc_nn_error *err)
{
    int lane = threadIdx.x & 31;
    int64_t warp = nn_tid() >> 5, nwarps = nn_nthreads() >> 5;
    int64_t nc = a.s.c;
    for (int64_t row = warp; row < a.s.n; row += nwarps) {
        const nn_t<DT> *lp = (const nn_t<DT> *)a.input + row * nc;
        nn_t<DT> *g = (nn_t<DT> *)a.grad + row * nc;
        int64_t t = a.target[row];
        int valid = t != a.s.ignore_index && t >= 0 && t < nc;
        if (!valid) {
            if (lane == 0 && t != a.s.ignore_index) {
                nn_report(err, t, nc, AMPC_NN_ERR_TARGET);
            }
            for (int64_t k = lane; k < nc; k += 32) {
                g[k] = nn_store<DT>(0.0f);
            }
            continue;
        }
        float wt = class_weight<DT>(a, t);
        float sc = class_row_scale(a, consts, row);
        ampc_xent_coefs kc = ampc_xent_coefs_of(a.s.label_smoothing, wt, nc,
                                                consts[1]);
        for (int64_t k = lane; k < nc; k += 32) {
            float coef = k == t ? ampc_xent_target_coef(kc, wt)
                         : a.weight != NULL
                             ? kc.spread * class_weight<DT>(a, k)
                             : kc.spread;
            g[k] = nn_store<DT>(
                ampc_xent_grad_one(sc, nn_load<DT>(lp[k]), kc.total, coef));
        }
    }
}

// ----------------------------------------------------------------------------
// CUDA kernels: mse_loss

/* x, t -> out (n) = (x - t)^2 */
template <ampc_dtype DT>
__global__ void
mse_fwd_none_kernel(int64_t n, const nn_t<DT> *x, const nn_t<DT> *t,
                    nn_t<DT> *out)
{
    for (int64_t i = nn_tid(); i < n; i += nn_nthreads()) {
        out[i] = nn_store<DT>(
            ampc_mse_one(nn_load<DT>(x[i]), nn_load<DT>(t[i])));
    }
}

/* x, t (n) -> parts[block] = the block's sum of (x - t)^2 in double; the
 * grid is fixed by n alone, so the sum is deterministic */
template <ampc_dtype DT>
__global__ void
mse_fwd_parts_kernel(int64_t n, const nn_t<DT> *x, const nn_t<DT> *t,
                     double *parts)
{
    double s = 0.0;
    for (int64_t i = nn_tid(); i < n; i += nn_nthreads()) {
        s += (double)ampc_mse_one(nn_load<DT>(x[i]), nn_load<DT>(t[i]));
    }
    s = nn_block_sum_d(s);
    if (threadIdx.x == 0) {
        parts[blockIdx.x] = s;
    }
}

/* parts (nparts) -> out (one element): their sum, / n for 'mean' */
template <ampc_dtype DT>
__global__ void
mse_fwd_final_kernel(int64_t n, int mean, const double *parts, int nparts,
                     nn_t<DT> *out)
{
    double s = 0.0;
    for (int k = threadIdx.x; k < nparts; k += blockDim.x) {
        s += parts[k];
    }
    s = nn_block_sum_d(s);
    if (threadIdx.x == 0) {
        *out = nn_store_f64<DT>(mean ? s / (double)n : s);
    }
}

/* grad_x (n) = (scale * (x - t)) * g: g = grad[i] ('none', scale 2), or 1
 * with scale = 2 * grad[0] (/ n for 'mean') from one element of gdt */
template <ampc_dtype DT>
__global__ void
mse_bwd_kernel(int64_t n, int reduction, const nn_t<DT> *x,
               const nn_t<DT> *t, const void *grad, ampc_dtype gdt,
               nn_t<DT> *gx)
{
    float scale = 2.0f;
    if (reduction != 0) {
        double s = 2.0 * (double)nn_load_any(gdt, grad);
        if (reduction == 1) {
            s /= (double)n;
        }
        scale = (float)s;
    }
    const nn_t<DT> *g = (const nn_t<DT> *)grad;
    for (int64_t i = nn_tid(); i < n; i += nn_nthreads()) {
        float gi = reduction == 0 ? nn_load<DT>(g[i]) : 1.0f;
        gx[i] = nn_store<DT>(ampc_mse_bwd_one(scale, nn_load<DT>(x[i]),
                                              nn_load<DT>(t[i]), gi));
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* Scratch for 2N row doubles (reduced forward) or 2 constants (backward). */
static int
rows_alloc(size_t count, double **rows)
{
    *rows = NULL;
    return ampc_cuda_scratch_alloc((count > 0 ? count : 1) * sizeof(double),
                                   (void **)rows);
}

/* nll (xent == 0) or cross_entropy forward; see ampc_cuda_class_loss_args */
static int
class_fwd(const ampc_cuda_class_loss_args *a, int xent)
{
    ampc_nn_error *err;
    double *rows = NULL;
    int rc = ampc_nn_error_device(&err);
    if (rc == 0 && a->reduction != 0) {
        rc = rows_alloc(2 * (size_t)a->s.n, &rows);
    }
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(a->dt, DT, {
        if (a->s.n > 0 && xent) {
            xent_fwd_kernel<DT><<<nn_blocks(a->s.n, ROWS_PER_BLOCK),
                                  AMPC_NN_THREADS, 0, st>>>(*a, rows, err);
        }
        else if (a->s.n > 0) {
            nll_fwd_kernel<DT><<<nn_blocks(a->s.n, AMPC_NN_THREADS),
                                 AMPC_NN_THREADS, 0, st>>>(*a, rows, err);
        }
        rc = (int)cudaGetLastError();
        if (rc == 0 && a->reduction != 0) {
            class_reduce_kernel<DT><<<1, AMPC_NN_REDUCE_THREADS, 0, st>>>(
                *a, rows);
            rc = (int)cudaGetLastError();
        }
    });
    if (rows != NULL) {
        ampc_cuda_scratch_free(rows);
    }
    if (rc == 0 && a->reduction == 0) {
        /* 'none': total_weight is 0, as torch */
        rc = (int)cudaMemsetAsync(a->total_weight, 0, sizeof(float), st);
    }
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "class loss forward", rc);
    }
    return rc;
}

static int
class_bwd(const ampc_cuda_class_loss_args *a, int xent)
{
    ampc_nn_error *err;
    double *consts = NULL;
    if (a->s.n * a->s.c <= 0) {
        return 0;
    }
    int rc = ampc_nn_error_device(&err);
    if (rc == 0) {
        rc = rows_alloc(2, &consts);
    }
    if (rc != 0) {
        return rc;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(a->dt, DT, {
        class_bwd_consts_kernel<DT><<<1, AMPC_NN_REDUCE_THREADS, 0, st>>>(
            *a, consts);
        rc = (int)cudaGetLastError();
        if (rc == 0 && xent) {
            xent_bwd_kernel<DT><<<nn_blocks(a->s.n, ROWS_PER_BLOCK),
                                  AMPC_NN_THREADS, 0, st>>>(*a, consts, err);
            rc = (int)cudaGetLastError();
        }
        else if (rc == 0) {
            nll_bwd_kernel<DT><<<nn_blocks(a->s.n * a->s.c, AMPC_NN_THREADS),
                                 AMPC_NN_THREADS, 0, st>>>(*a, consts, err);
            rc = (int)cudaGetLastError();
        }
    });
    ampc_cuda_scratch_free(consts);
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "class loss backward",
                               rc);
    }
    return rc;
}

/* logp (N, C) -> loss, total_weight */
extern "C" int
ampc_nll_loss_fwd_cuda(const ampc_cuda_class_loss_args *a)
{
    return class_fwd(a, 0);
}

/* -> grad (N, C) */
extern "C" int
ampc_nll_loss_bwd_cuda(const ampc_cuda_class_loss_args *a)
{
    return class_bwd(a, 0);
}

/* logits (N, C) -> logp (N, C), loss, total_weight */
extern "C" int
ampc_cross_entropy_fwd_cuda(const ampc_cuda_class_loss_args *a)
{
    return class_fwd(a, 1);
}

/* logp (N, C) -> grad (N, C) */
extern "C" int
ampc_cross_entropy_bwd_cuda(const ampc_cuda_class_loss_args *a)
{
    return class_bwd(a, 1);
}

/* x, t (n) -> out: (n) for 'none', else one element */
extern "C" int
ampc_mse_loss_fwd_cuda(ampc_dtype dt, int64_t n, int reduction,
                       const void *x, const void *t, void *out)
{
    cudaStream_t st = ampc_cuda_stream();
    if (reduction == 0) {
        if (n <= 0) {
            return 0;
        }
        AMPC_NN_DISPATCH(dt, DT, {
            mse_fwd_none_kernel<DT><<<nn_blocks(n, AMPC_NN_THREADS),
                                      AMPC_NN_THREADS, 0, st>>>(
                n, (const nn_t<DT> *)x, (const nn_t<DT> *)t,
                (nn_t<DT> *)out);
        });
        AMPC_CUDA_CHECK_LAUNCH();
        return 0;
    }
    /* 8 elements per thread before a block is worth adding */
    int64_t nparts64 = CEIL_DIV(n, (int64_t)AMPC_NN_THREADS * 8);
    int nparts = (int)(nparts64 < 1 ? 1
                                    : (nparts64 > MSE_PARTS ? MSE_PARTS
                                                            : nparts64));
    double *parts;
    int rc = rows_alloc((size_t)nparts, &parts);
    if (rc != 0) {
        return rc;
    }
    AMPC_NN_DISPATCH(dt, DT, {
        mse_fwd_parts_kernel<DT><<<nparts, AMPC_NN_THREADS, 0, st>>>(
            n, (const nn_t<DT> *)x, (const nn_t<DT> *)t, parts);
        rc = (int)cudaGetLastError();
        if (rc == 0) {
            mse_fwd_final_kernel<DT><<<1, AMPC_NN_REDUCE_THREADS, 0, st>>>(
                n, reduction == 1, parts, nparts, (nn_t<DT> *)out);
            rc = (int)cudaGetLastError();
        }
    });
    ampc_cuda_scratch_free(parts);
    if (rc != 0) {
        ampc_cuda_record_error(__FILE__, __LINE__, "mse_loss forward", rc);
    }
    return rc;
}

/* x, t, grad -> grad_x (n) */
extern "C" int
ampc_mse_loss_bwd_cuda(ampc_dtype dt, int64_t n, int reduction,
                       const void *x, const void *t, const void *grad,
                       ampc_dtype gdt, void *grad_x)
{
    if (n <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    AMPC_NN_DISPATCH(dt, DT, {
        mse_bwd_kernel<DT><<<nn_blocks(n, AMPC_NN_THREADS), AMPC_NN_THREADS,
                             0, st>>>(n, reduction, (const nn_t<DT> *)x,
                                      (const nn_t<DT> *)t, grad, gdt,
                                      (nn_t<DT> *)grad_x);
    });
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
