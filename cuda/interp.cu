/* interp.cu - interpolate's separable modes on CUDA (linear, bilinear,
 * trilinear, bicubic, antialiased bilinear and bicubic), forward and
 * backward, with the CPU's taps (interp_math.h) and the CPU's order of
 * float32 sums (interp.h), so float32 gives the CPU's bits.
 *
 * A call first fills each axis's table of taps in scratch memory (a thread
 * per output), and for the backward each input's covering outputs (a
 * bisection per input).  The forward is a thread per output over its taps;
 * the backward a thread per input element gathering the outputs that read
 * it: no atomics, so the gradient is deterministic.
 */
#include "interp_math.h"
#include "nn_common.cuh"

/* The per-axis tables of one call (device pointers into one scratch
 * block); cover[a][2 i], cover[a][2 i + 1]: the outputs reading input i. */
struct interp_tables {
    ampc_interp_table t[AMPC_INTERP_AXES];
    int64_t *cover[AMPC_INTERP_AXES];
};

// ----------------------------------------------------------------------------
// CUDA kernels: tables

/* Item e of the axes' items laid end to end (sizes n[a]) -> (axis, index) */
__device__ __forceinline__ int
interp_axis_item(const int64_t n[AMPC_INTERP_AXES], int64_t e, int64_t *i)
{
    int a = 0;
    while (a < AMPC_INTERP_AXES - 1 && e >= n[a]) {
        e -= n[a];
        a++;
    }
    *i = e;
    return a;
}

/* one thread per output of every axis: its row of the table */
__global__ void
interp_table_kernel(ampc_interp_shape s, interp_tables tb)
{
    int64_t on[AMPC_INTERP_AXES] = {s.ax[0].on, s.ax[1].on, s.ax[2].on};
    int64_t total = on[0] + on[1] + on[2];
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t o;
        int a = interp_axis_item(on, e, &o);
        ampc_interp_table_row(&s.ax[a], s.kind, o, &tb.t[a]);
    }
}

/* one thread per input of every axis: the outputs that read it */
__global__ void
interp_cover_kernel(ampc_interp_shape s, interp_tables tb)
{
    int64_t n[AMPC_INTERP_AXES] = {s.ax[0].n, s.ax[1].n, s.ax[2].n};
    int64_t total = n[0] + n[1] + n[2];
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t i;
        int a = interp_axis_item(n, e, &i);
        ampc_interp_cover(&tb.t[a], s.ax[a].on, i, &tb.cover[a][2 * i],
                          &tb.cover[a][2 * i + 1]);
    }
}

// ----------------------------------------------------------------------------
// CUDA kernels: forward and backward

/* x (planes, D, H, W) -> y (planes, OD, OH, OW); one thread per output:
 * sum_d wd (sum_h wh (sum_w ww x)), each from 0 in tap order */
template <ampc_dtype DT>
__global__ void
interp_fwd_kernel(ampc_interp_shape s, interp_tables tb, const nn_t<DT> *x,
                  nn_t<DT> *y)
{
    const ampc_interp_axis &ad = s.ax[0], &ah = s.ax[1], &aw = s.ax[2];
    int64_t total = s.planes * ad.on * ah.on * aw.on;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t ow = e % aw.on;
        int64_t oh = (e / aw.on) % ah.on;
        int64_t od = (e / (aw.on * ah.on)) % ad.on;
        const nn_t<DT> *xp = x + (e / (aw.on * ah.on * ad.on)) * ad.n *
                                     ah.n * aw.n;
        int64_t fd = tb.t[0].first[od], fh = tb.t[1].first[oh];
        int64_t fw = tb.t[2].first[ow];
        int64_t cd = tb.t[0].count[od], ch = tb.t[1].count[oh];
        int64_t cw = tb.t[2].count[ow];
        const float *wd = tb.t[0].w + od * ad.taps;
        const float *wh = tb.t[1].w + oh * ah.taps;
        const float *ww = tb.t[2].w + ow * aw.taps;
        float acc = 0.0f;
        for (int64_t jd = 0; jd < cd; jd++) {
            float t2 = 0.0f;
            for (int64_t jh = 0; jh < ch; jh++) {
                const nn_t<DT> *row =
                    xp + ((fd + jd) * ah.n + fh + jh) * aw.n + fw;
                float t1 = 0.0f;
                for (int64_t jw = 0; jw < cw; jw++) {
                    t1 = AMPC_ADD(t1, AMPC_MUL(ww[jw], nn_load<DT>(row[jw])));
                }
                t2 = AMPC_ADD(t2, AMPC_MUL(wh[jh], t1));
            }
            acc = AMPC_ADD(acc, AMPC_MUL(wd[jd], t2));
        }
        y[e] = nn_store<DT>(acc);
    }
}

/* The weight with which output o of an axis reads input i (o covers i) */
__device__ __forceinline__ float
interp_weight(const ampc_interp_table &t, int taps, int64_t o, int64_t i)
{
    return t.w[o * taps + (i - t.first[o])];
}

/* grad_out (planes, OD, OH, OW) -> grad_in (planes, D, H, W); one thread
 * per input element: sum_ow ww (sum_oh wh (sum_od wd g)) over the outputs
 * that read it, in increasing order, each from 0 (the CPU's adjoint
 * passes D, H, W sum in this order too) */
template <ampc_dtype DT>
__global__ void
interp_bwd_kernel(ampc_interp_shape s, interp_tables tb, const nn_t<DT> *gy,
                  nn_t<DT> *gx)
{
    const ampc_interp_axis &ad = s.ax[0], &ah = s.ax[1], &aw = s.ax[2];
    int64_t total = s.planes * ad.n * ah.n * aw.n;
    for (int64_t e = nn_tid(); e < total; e += nn_nthreads()) {
        int64_t c = e % aw.n;
        int64_t r = (e / aw.n) % ah.n;
        int64_t d = (e / (aw.n * ah.n)) % ad.n;
        const nn_t<DT> *gp = gy + (e / (aw.n * ah.n * ad.n)) * ad.on *
                                      ah.on * aw.on;
        int64_t lo_d = tb.cover[0][2 * d], hi_d = tb.cover[0][2 * d + 1];
        int64_t lo_h = tb.cover[1][2 * r], hi_h = tb.cover[1][2 * r + 1];
        int64_t lo_w = tb.cover[2][2 * c], hi_w = tb.cover[2][2 * c + 1];
        float acc = 0.0f;
        for (int64_t ow = lo_w; ow <= hi_w; ow++) {
            float t1 = 0.0f;
            for (int64_t oh = lo_h; oh <= hi_h; oh++) {
                float t2 = 0.0f;
                for (int64_t od = lo_d; od <= hi_d; od++) {
                    float g = nn_load<DT>(gp[(od * ah.on + oh) * aw.on + ow]);
                    float wd = interp_weight(tb.t[0], ad.taps, od, d);
                    t2 = AMPC_ADD(t2, AMPC_MUL(wd, g));
                }
                float wh = interp_weight(tb.t[1], ah.taps, oh, r);
                t1 = AMPC_ADD(t1, AMPC_MUL(wh, t2));
            }
            float ww = interp_weight(tb.t[2], aw.taps, ow, c);
            acc = AMPC_ADD(acc, AMPC_MUL(ww, t1));
        }
        gx[e] = nn_store<DT>(acc);
    }
}

// ----------------------------------------------------------------------------
// kernel launchers

/* The tables of s in one scratch block (*block, freed by the caller),
 * filled on the stream; with covers, each input's outputs too. */
static int
interp_tables_fill(const ampc_interp_shape *s, int covers, cudaStream_t st,
                   interp_tables *tb, void **block)
{
    int64_t ints = 0, floats = 0, on = 0, n = 0;
    for (int a = 0; a < AMPC_INTERP_AXES; a++) {
        ints += 2 * s->ax[a].on + (covers ? 2 * s->ax[a].n : 0);
        floats += s->ax[a].on * s->ax[a].taps;
        on += s->ax[a].on;
        n += s->ax[a].n;
    }
    int rc = ampc_cuda_scratch_alloc((size_t)ints * sizeof(int64_t) +
                                         (size_t)floats * sizeof(float),
                                     block);
    if (rc != 0) {
        return rc;
    }
    int64_t *at = (int64_t *)*block;
    float *wf = (float *)(at + ints);
    for (int a = 0; a < AMPC_INTERP_AXES; a++) {
        tb->t[a].first = at;
        tb->t[a].count = at + s->ax[a].on;
        at += 2 * s->ax[a].on;
        tb->cover[a] = covers ? at : nullptr;
        at += covers ? 2 * s->ax[a].n : 0;
        tb->t[a].w = wf;
        wf += s->ax[a].on * s->ax[a].taps;
    }
    interp_table_kernel<<<nn_blocks(on, AMPC_NN_THREADS), AMPC_NN_THREADS, 0,
                          st>>>(*s, *tb);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && covers) {
        interp_cover_kernel<<<nn_blocks(n, AMPC_NN_THREADS), AMPC_NN_THREADS,
                              0, st>>>(*s, *tb);
        err = cudaGetLastError();
    }
    if (err != cudaSuccess) {
        ampc_cuda_scratch_free(*block);
        ampc_cuda_record_error(__FILE__, __LINE__, "interp tables launch",
                               (int)err);
        return (int)err;
    }
    return 0;
}

/* forward: in = x, out = y; backward: in = grad_out, out = grad_in */
template <ampc_dtype DT, bool BACKWARD>
static int
interp_launch(const ampc_interp_shape *s, const void *in, void *out)
{
    const ampc_interp_axis *ax = s->ax;
    int64_t total = BACKWARD ? s->planes * ax[0].n * ax[1].n * ax[2].n
                             : s->planes * ax[0].on * ax[1].on * ax[2].on;
    if (total <= 0) {
        return 0;
    }
    cudaStream_t st = ampc_cuda_stream();
    interp_tables tb;
    void *block;
    int rc = interp_tables_fill(s, BACKWARD, st, &tb, &block);
    if (rc != 0) {
        return rc;
    }
    unsigned blocks = nn_blocks(total, AMPC_NN_THREADS);
    if constexpr (BACKWARD) {
        interp_bwd_kernel<DT><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *s, tb, (const nn_t<DT> *)in, (nn_t<DT> *)out);
    }
    else {
        interp_fwd_kernel<DT><<<blocks, AMPC_NN_THREADS, 0, st>>>(
            *s, tb, (const nn_t<DT> *)in, (nn_t<DT> *)out);
    }
    /* NOTE: freed while the kernel may still run: the caching allocator
     * hands the block only to later work on this stream. */
    ampc_cuda_scratch_free(block);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}

/* x (planes, D, H, W) -> y (planes, OD, OH, OW) */
extern "C" int
ampc_interp_fwd_cuda(const ampc_interp_shape *s, ampc_dtype dt,
                     const void *x, void *y)
{
    AMPC_NN_DISPATCH(dt, DT, { return interp_launch<DT, false>(s, x, y); });
    return 0;
}

/* grad_out (planes, OD, OH, OW) -> grad_in (planes, D, H, W) */
extern "C" int
ampc_interp_bwd_cuda(const ampc_interp_shape *s, ampc_dtype dt,
                     const void *grad_out, void *grad_in)
{
    AMPC_NN_DISPATCH(dt, DT, {
        return interp_launch<DT, true>(s, grad_out, grad_in);
    });
    return 0;
}
