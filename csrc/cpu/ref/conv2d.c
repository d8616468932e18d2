/* conv2d.c - 2-D convolution lowered onto the level's GEMM parts, one
 * image and group at a time: im2col + GEMM forward, GEMM + col2im for the
 * input gradient, im2col + GEMM summed over the batch for the weight
 * gradient.  Every level shares these drivers; a level's conv2d entry points
 * pass its GEMM parts in.
 *
 * Groups: group g of image i is a convolution of its own, C/G channels to
 * OC/G, on slices of x, w, the bias and y that start at an offset (each
 * group's channels are contiguous), so the per-image code below runs
 * unchanged on the group's shape (group_shape).  A "task" is one (image,
 * group) pair, numbered image-major; with G = 1 tasks are images.  A
 * depthwise convolution (C/G = 1) runs its tasks on direct loops instead
 * (conv2d_depthwise.c): its GEMMs would be one row deep.
 *
 * Each image is first copied inside a border of zeros, so im2col and col2im
 * move whole rows without bounds checks (before that, im2col's per-row
 * checks on the lab's 16-element rows cost about half as much time as the
 * second layer's microkernel; measured with perf on one core).  The forward
 * pass writes the column matrix straight into the GEMM's packed B panels
 * (one pass instead of im2col and then packing); the weight gradient's GEMM
 * reads the column matrix transposed, so it keeps an explicit im2col (one
 * image's matrix, 27 x 1024 or 288 x 256 for the lab's layers, stays in L2)
 * and packs it with register transposes.
 *
 * Threads: at least as many tasks as threads are split by task (each GEMM
 * single-threaded, no synchronisation), so the many small tasks of a
 * grouped or depthwise convolution spread over the cores even for one
 * image; fewer tasks run in turn with every thread inside each GEMM.  Weight and bias gradients are
 * summed in float32 per thread, then across threads in a fixed order, and
 * rounded once.
 */
#include <omp.h>
#include <stdlib.h>

#include "cpu/gemm.h"

// ----------------------------------------------------------------------------
// helpers

/* A 1x1 kernel at stride 1 without padding: the image is its own column
 * matrix, and the input gradient needs no col2im. */
static int
is_pointwise(const ampc_conv2d_shape *s)
{
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 &&
           s->ph == 0 && s->pw == 0;
}

/* One group's convolution, C/G input channels to OC/G outputs: the shape
 * the per-image helpers work on (the whole convolution when G is 1). */
static ampc_conv2d_shape
group_shape(const ampc_conv2d_shape *s)
{
    ampc_conv2d_shape g = *s;
    g.c = s->c / s->groups;
    g.oc = s->oc / s->groups;
    g.groups = 1;
    return g;
}

/* Each group one input channel, and more than one group (a single-channel
 * convolution with groups 1 keeps the GEMM path). */
static int
is_depthwise(const ampc_conv2d_shape *s)
{
    return s->groups > 1 && s->c == s->groups;
}

/* Where task t (image t / G, group t % G) starts: element offsets of its
 * slices of x (C/G channels), y (OC/G channels) and w (OC/G filters), and
 * its first output channel (into the bias). */
typedef struct {
    int64_t group, x, y, w, oc;
} conv_task;

static conv_task
task_at(const ampc_conv2d_shape *s, int64_t t)
{
    const int64_t i = t / s->groups, g = t % s->groups;
    const int64_t cg = s->c / s->groups, ocg = s->oc / s->groups;
    return (conv_task){
        .group = g,
        .x = (i * s->c + g * cg) * s->h * s->w,
        .y = (i * s->oc + g * ocg) * s->oh * s->ow,
        .w = g * ocg * cg * s->kh * s->kw,
        .oc = g * ocg,
    };
}

/* The threads for the whole convolution, and whether to split by task. */
static int
conv_threads(const ampc_conv2d_shape *s, int *by_task)
{
    double flops = 2.0 * (double)s->n * (double)s->oc * (double)s->oh *
                   (double)s->ow *
                   (double)(s->c / s->groups * s->kh * s->kw);
    int nt = ampc_gemm_threads(flops, 0);
    *by_task = nt > 1 && s->n * s->groups >= nt;
    return nt;
}

static int
is_padded(const ampc_conv2d_shape *s)
{
    return s->ph != 0 || s->pw != 0;
}

static int64_t
padded_size(const ampc_conv2d_shape *s)
{
    return s->c * (s->h + 2 * s->ph) * (s->w + 2 * s->pw);
}

/* x (C, H, W) -> xp (C, H + 2ph, W + 2pw): x inside a border of zeros. */
static void
pad_image(const ampc_conv2d_shape *s, size_t es, const char *x, char *xp)
{
    const int64_t wp = s->w + 2 * s->pw, e = (int64_t)es;
    const size_t row = (size_t)(s->w * e), side = (size_t)(s->pw * e);
    for (int64_t c = 0; c < s->c; c++) {
        char *d = xp + c * (s->h + 2 * s->ph) * wp * e;
        memset(d, 0, (size_t)(s->ph * wp * e));
        d += s->ph * wp * e;
        for (int64_t h = 0; h < s->h; h++, d += wp * e) {
            memset(d, 0, side);
            memcpy(d + side, x + (c * s->h + h) * s->w * e, row);
            memset(d + side + row, 0, side);
        }
        memset(d, 0, (size_t)(s->ph * wp * e));
    }
}

/* Image x with its zero padding (x itself without padding), in the
 * thread's buffer; NULL when memory is short. */
static const void *
padded_image(const ampc_conv2d_shape *s, size_t es, const char *x)
{
    if (!is_padded(s)) {
        return x;
    }
    void *buf = ampc_gemm_buffer(AMPC_BUF_IMG, (size_t)padded_size(s) * es);
    if (buf != NULL) {
        pad_image(s, es, x, buf);
    }
    return buf;
}

/* The column matrix of image x into the thread's buffer; NULL when memory
 * is short. */
static const void *
image_columns(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
              size_t es, const char *x)
{
    const int64_t k = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    void *col = ampc_gemm_buffer(AMPC_BUF_COL, (size_t)(k * ohw) * es);
    const void *xp = padded_image(s, es, x);
    if (col == NULL || xp == NULL) {
        return NULL;
    }
    P->im2col(s, es, xp, col);
    return col;
}

// ----------------------------------------------------------------------------
// forward

/* The image-independent operand A of a convolution's per-image GEMMs:
 * each group's weights (forward, OC/G x K) or their transpose (input
 * gradient, K x OC/G), packed once for the batch instead of once per image
 * and group, as ampc_gemm_pack_a packs one.  Group g's panels start at the
 * result + g * *stride floats, on a cache line (a new buffer for free();
 * NULL when memory is short). */
static float *
pack_weights(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
             ampc_dtype dt, const void *w, int transposed, int64_t *stride)
{
    const ampc_conv2d_shape gs = group_shape(s);
    const int64_t k = gs.c * s->kh * s->kw;
    const int64_t m = transposed ? k : gs.oc, depth = transposed ? gs.oc : k;
    const int64_t line = AMPC_GEMM_ALIGN / (int64_t)sizeof(float);
    int64_t size = ((m > 0 ? m : 1) + P->mr - 1) / P->mr * P->mr *
                   (depth > 0 ? depth : 1);
    size = (size + line - 1) / line * line;
    float *a = aligned_alloc(AMPC_GEMM_ALIGN,
                             (size_t)(size * s->groups) * sizeof(float));
    if (a == NULL || m == 0 || depth == 0) {
        *stride = size;
        return a;
    }
    const size_t es = ampc_dtype_size[dt];
    for (int64_t g = 0; g < s->groups; g++) {
        P->pack(dt, (const char *)w + g * gs.oc * k * (int64_t)es,
                transposed ? 1 : k, transposed ? k : 1, m, depth, P->mr,
                a + g * size);
    }
    *stride = size;
    return a;
}

/* x (C, H, W) of one image -> y (OC, OH, OW), s one group's shape
 * (group_shape) and the pointers its slices; wp: w packed (pack_weights);
 * gemm_threads inside */
static int
fwd_image(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
          ampc_dtype dt, const char *x, const void *w, const float *wp,
          const void *bias, int relu, char *y, int gemm_threads)
{
    const size_t es = ampc_dtype_size[dt];
    const int64_t k = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    /* y (OC, OHW) = w (OC, K) col (K, OHW) + bias per row; a pointwise
     * kernel's col is x itself */
    ampc_gemm_args g = {
        .m = s->oc, .n = ohw, .k = k, .dt = dt,
        .a = w, .rsa = k, .csa = 1,
        .b = x, .rsb = ohw, .csb = 1,
        .c = y, .cdt = dt, .ldc = ohw,
        .bias = bias, .bias_mode = bias ? AMPC_BIAS_ROW : AMPC_BIAS_NONE,
        .relu = relu, .beta = 0, .nthreads = gemm_threads,
    };
    if (is_pointwise(s)) {
        return ampc_gemm_run_packed(P, &g, wp, NULL);
    }
    /* col goes straight into the GEMM's packed B panels (one pass over
     * the image instead of im2col and then packing) */
    const void *xp = padded_image(s, es, x);
    int64_t cols = (ohw + P->nr - 1) / P->nr * P->nr;
    float *panels = ampc_gemm_buffer(AMPC_BUF_COL,
                                     (size_t)(cols * k) * sizeof(float));
    if (xp == NULL || panels == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    P->im2col_panels(s, dt, xp, P->nr, panels);
    return ampc_gemm_run_packed(P, &g, wp, panels);
}

/* Task t of the forward pass (task_at): one group of one image. */
static int
fwd_task(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
         const ampc_conv2d_shape *gs, ampc_dtype dt, const char *x,
         const char *w, const float *wp, int64_t wstride, const char *bias,
         int relu, char *y, int64_t t, int gemm_threads)
{
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    const conv_task o = task_at(s, t);
    if (is_depthwise(s)) {
        return ampc_dw_fwd_task(P, gs, dt, x + o.x * es, w + o.w * es,
                                bias != NULL ? bias + o.oc * es : NULL, relu,
                                y + o.y * es);
    }
    return fwd_image(P, gs, dt, x + o.x * es, w + o.w * es,
                     wp + o.group * wstride,
                     bias != NULL ? bias + o.oc * es : NULL, relu,
                     y + o.y * es, gemm_threads);
}

int
ampc_conv2d_fwd_run(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
                    ampc_dtype dt, const void *x, const void *w,
                    const void *bias, int relu, void *y)
{
    const ampc_conv2d_shape gs = group_shape(s);
    const int64_t tasks = s->n * s->groups;
    int by_task, nt = conv_threads(s, &by_task), err = 0;
    int64_t wstride = 0;
    float *wp = NULL;
    if (!is_depthwise(s) &&
        (wp = pack_weights(P, s, dt, w, 0, &wstride)) == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    if (by_task) {
#pragma omp parallel for schedule(static) num_threads(nt) reduction(| : err)
        for (int64_t t = 0; t < tasks; t++) {
            err |= fwd_task(P, s, &gs, dt, x, w, wp, wstride, bias, relu, y,
                            t, 1);
        }
    }
    else {
        for (int64_t t = 0; t < tasks && err == 0; t++) {
            err = fwd_task(P, s, &gs, dt, x, w, wp, wstride, bias, relu, y,
                           t, nt);
        }
    }
    free(wp);
    return err;
}

// ----------------------------------------------------------------------------
// input gradient

/* dy (OC, OH, OW) of one image -> dx (C, H, W), s one group's shape
 * and the pointers its slices; wtp: w^T packed (pack_weights) */
static int
bwd_input_image(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
                ampc_dtype dt, const char *dy, const void *w, const float *wtp,
                char *dx, int gemm_threads)
{
    const int64_t k = s->c * s->kh * s->kw, ohw = s->oh * s->ow;
    const int64_t hp = s->h + 2 * s->ph, wp = s->w + 2 * s->pw;
    const size_t es = ampc_dtype_size[dt];
    /* dcol (K, OHW) = w^T (K, OC) dy (OC, OHW); for a pointwise kernel
     * dcol is dx itself */
    ampc_gemm_args g = {
        .m = k, .n = ohw, .k = s->oc, .dt = dt,
        .a = w, .rsa = 1, .csa = k,
        .b = dy, .rsb = ohw, .csb = 1,
        .c = dx, .cdt = dt, .ldc = ohw,
        .bias = NULL, .bias_mode = AMPC_BIAS_NONE,
        .relu = 0, .beta = 0, .nthreads = gemm_threads,
    };
    if (is_pointwise(s)) {
        return ampc_gemm_run_packed(P, &g, wtp, NULL);
    }
    /* col2im sums into a padded float32 image (dx itself when that is
     * one), whose inside is then rounded once into dx */
    int direct = dt == AMPC_FLOAT32 && !is_padded(s);
    float *dcol = ampc_gemm_buffer(AMPC_BUF_COL,
                                   (size_t)(k * ohw) * sizeof(float));
    float *img = direct ? (float *)dx
                        : ampc_gemm_buffer(AMPC_BUF_IMG,
                                           (size_t)padded_size(s) *
                                               sizeof(float));
    if (dcol == NULL || img == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    g.c = dcol;
    g.cdt = AMPC_FLOAT32;
    int err = ampc_gemm_run_packed(P, &g, wtp, NULL);
    if (err) {
        return err;
    }
    memset(img, 0, (size_t)padded_size(s) * sizeof(float));
    P->col2im(s, dcol, img);
    if (!direct) {
        for (int64_t c = 0; c < s->c; c++) {
            for (int64_t h = 0; h < s->h; h++) {
                ampc_gemm_narrow(P->cvt, dt,
                                 img + (c * hp + h + s->ph) * wp + s->pw,
                                 s->w,
                                 dx + (c * s->h + h) * s->w * (int64_t)es);
            }
        }
    }
    return 0;
}

/* Task t of the input gradient (task_at): one group of one image. */
static int
bwd_input_task(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
               const ampc_conv2d_shape *gs, ampc_dtype dt, const char *dy,
               const char *w, const float *wtp, int64_t wstride, char *dx,
               int64_t t, int gemm_threads)
{
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    const conv_task o = task_at(s, t);
    if (is_depthwise(s)) {
        return ampc_dw_bwd_input_task(P, gs, dt, dy + o.y * es,
                                      w + o.w * es, dx + o.x * es);
    }
    return bwd_input_image(P, gs, dt, dy + o.y * es, w + o.w * es,
                           wtp + o.group * wstride, dx + o.x * es,
                           gemm_threads);
}

int
ampc_conv2d_bwd_input_run(const ampc_gemm_parts *P,
                          const ampc_conv2d_shape *s, ampc_dtype dt,
                          const void *dy, const void *w, void *dx)
{
    const ampc_conv2d_shape gs = group_shape(s);
    const int64_t tasks = s->n * s->groups;
    int by_task, nt = conv_threads(s, &by_task), err = 0;
    int64_t wstride = 0;
    float *wp = NULL;
    if (!is_depthwise(s) &&
        (wp = pack_weights(P, s, dt, w, 1, &wstride)) == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    if (by_task) {
#pragma omp parallel for schedule(static) num_threads(nt) reduction(| : err)
        for (int64_t t = 0; t < tasks; t++) {
            err |= bwd_input_task(P, s, &gs, dt, dy, w, wp, wstride, dx, t,
                                  1);
        }
    }
    else {
        for (int64_t t = 0; t < tasks && err == 0; t++) {
            err = bwd_input_task(P, s, &gs, dt, dy, w, wp, wstride, dx, t,
                                 nt);
        }
    }
    free(wp);
    return err;
}

// ----------------------------------------------------------------------------
// weight and bias gradients

/* Sum of n float32 values in 16 independent lanes (a loop the compiler
 * vectorises without reassociating), folded pairwise. */
static float
row_sum(const float *x, int64_t n)
{
    float acc[16] = {0.0f};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int l = 0; l < 16; l++) {
            acc[l] += x[i + l];
        }
    }
    for (int l = 0; i < n; i++, l++) {
        acc[l] += x[i];
    }
    for (int half = 8; half > 0; half /= 2) {
        for (int l = 0; l < half; l++) {
            acc[l] += acc[l + half];
        }
    }
    return acc[0];
}

/* Tasks [t0, t1) (task_at): for each, the group's rows of gw (OC/G, K)
 * += dy_ig (OC/G, OHW) col_ig^T (OHW, K) and of gb (OC) += the row sums of
 * dy_ig, all float32; gw or gb NULL to skip. */
static int
bwd_weight_tasks(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
                 ampc_dtype dt, const char *dy, const char *x, int64_t t0,
                 int64_t t1, float *gw, float *gb, int gemm_threads)
{
    const size_t es = ampc_dtype_size[dt];
    const ampc_conv2d_shape gs = group_shape(s);
    const int64_t k = gs.c * s->kh * s->kw, ohw = s->oh * s->ow;
    float *row = NULL;
    if (gb != NULL && dt != AMPC_FLOAT32) {
        row = ampc_gemm_buffer(AMPC_BUF_ROW, (size_t)ohw * sizeof(float));
        if (row == NULL) {
            return AMPC_LINALG_NOMEM;
        }
    }
    for (int64_t t = t0; t < t1; t++) {
        const conv_task o = task_at(s, t);
        const char *dyi = dy + o.y * (int64_t)es;
        if (gw != NULL && is_depthwise(s)) {
            int err = ampc_dw_bwd_weight_task(P, &gs, dt, dyi,
                                              x + o.x * (int64_t)es,
                                              gw + o.w);
            if (err) {
                return err;
            }
        }
        else if (gw != NULL) {
            const char *xi = x + o.x * (int64_t)es;
            const void *col = is_pointwise(&gs)
                                  ? xi
                                  : image_columns(P, &gs, es, xi);
            if (col == NULL) {
                return AMPC_LINALG_NOMEM;
            }
            /* both operands are contiguous along the OHW sum */
            ampc_gemm_args g = {
                .m = gs.oc, .n = k, .k = ohw, .dt = dt,
                .a = dyi, .rsa = ohw, .csa = 1,
                .b = col, .rsb = 1, .csb = ohw,
                .c = gw + o.w, .cdt = AMPC_FLOAT32, .ldc = k,
                .bias = NULL, .bias_mode = AMPC_BIAS_NONE,
                .relu = 0, .beta = 1, .nthreads = gemm_threads,
            };
            int err = ampc_gemm_run(P, &g);
            if (err) {
                return err;
            }
        }
        if (gb != NULL) {
            for (int64_t j = 0; j < gs.oc; j++) {
                const char *r = dyi + j * ohw * (int64_t)es;
                if (dt == AMPC_FLOAT32) {
                    gb[o.oc + j] += row_sum((const float *)r, ohw);
                }
                else {
                    ampc_gemm_widen(P->cvt, dt, r, ohw, row);
                    gb[o.oc + j] += row_sum(row, ohw);
                }
            }
        }
    }
    return 0;
}

int
ampc_conv2d_bwd_weight_run(const ampc_gemm_parts *P,
                           const ampc_conv2d_shape *s, ampc_dtype dt,
                           const void *dy, const void *x, void *dw, void *db)
{
    const int64_t nw = s->oc * (s->c / s->groups) * s->kh * s->kw;
    const int64_t ng = nw + s->oc, tasks = s->n * s->groups;
    int by_task, nt = conv_threads(s, &by_task), err = 0;
    /* split by task, or one team member with every thread in its GEMMs */
    int gemm_nt = by_task ? 1 : nt;
    if (!by_task) {
        nt = 1;
    }
    /* one float32 block [weight grads | bias grads] per thread */
    float **part = calloc((size_t)nt, sizeof(float *));
    if (part == NULL) {
        return AMPC_LINALG_NOMEM;
    }
#pragma omp parallel num_threads(nt) reduction(| : err) if (nt > 1)
    {
        int me = omp_get_thread_num(), team = omp_get_num_threads();
        float *g = ampc_gemm_buffer(AMPC_BUF_GRAD, (size_t)ng * sizeof(float));
        part[me] = g;
        if (g == NULL) {
            err |= AMPC_LINALG_NOMEM;
        }
        else {
            memset(g, 0, (size_t)ng * sizeof(float));
            int64_t t0 = tasks * me / team, t1 = tasks * (me + 1) / team;
            err |= bwd_weight_tasks(
                P, s, dt, dy, x, t0, t1, dw != NULL ? g : NULL,
                db != NULL ? g + nw : NULL, gemm_nt);
        }
#pragma omp barrier
        /* the threads' sums, added in thread order and rounded once; a
         * thread that failed leaves err set and nothing is read */
        enum { PIECE = 1024 };
        float sum[PIECE];
        int64_t npieces = (ng + PIECE - 1) / PIECE;
        int ok = 1;
        for (int t = 0; t < team; t++) {
            ok = ok && part[t] != NULL;
        }
#pragma omp for schedule(static)
        for (int64_t q = 0; q < npieces; q++) {
            int64_t j0 = q * PIECE, n = ng - j0 < PIECE ? ng - j0 : PIECE;
            if (!ok) {
                continue;
            }
            memcpy(sum, part[0] + j0, (size_t)n * sizeof(float));
            for (int t = 1; t < team; t++) {
                for (int64_t j = 0; j < n; j++) {
                    sum[j] += part[t][j0 + j];
                }
            }
            /* a piece may straddle the weight/bias boundary */
            int64_t nwp = j0 >= nw ? 0 : (nw - j0 < n ? nw - j0 : n);
            size_t es = ampc_dtype_size[dt];
            if (dw != NULL && nwp > 0) {
                ampc_gemm_narrow(P->cvt, dt, sum, nwp,
                                 (char *)dw + j0 * (int64_t)es);
            }
            if (db != NULL && nwp < n) {
                ampc_gemm_narrow(P->cvt, dt, sum + nwp, n - nwp,
                                 (char *)db + (j0 + nwp - nw) * (int64_t)es);
            }
        }
    }
    free(part);
    return err;
}

// ----------------------------------------------------------------------------
// CPU reference

/* x (N, C, H, W), w (OC, C/G, KH, KW), bias (OC) -> y (N, OC, OH, OW) */
int
ampc_conv2d_fwd_ref(const ampc_conv2d_shape *s, ampc_dtype dt, const void *x,
                    const void *w, const void *bias, int relu, void *y)
{
    return ampc_conv2d_fwd_run(&ampc_gemm_parts_ref, s, dt, x, w, bias, relu,
                               y);
}

/* dy (N, OC, OH, OW), w (OC, C/G, KH, KW) -> dx (N, C, H, W) */
int
ampc_conv2d_bwd_input_ref(const ampc_conv2d_shape *s, ampc_dtype dt,
                          const void *dy, const void *w, void *dx)
{
    return ampc_conv2d_bwd_input_run(&ampc_gemm_parts_ref, s, dt, dy, w, dx);
}

/* dy (N, OC, OH, OW), x (N, C, H, W) -> dw (OC, C/G, KH, KW), db (OC) */
int
ampc_conv2d_bwd_weight_ref(const ampc_conv2d_shape *s, ampc_dtype dt,
                           const void *dy, const void *x, void *dw, void *db)
{
    return ampc_conv2d_bwd_weight_run(&ampc_gemm_parts_ref, s, dt, dy, x, dw,
                                      db);
}
