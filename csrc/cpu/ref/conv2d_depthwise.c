/* conv2d_depthwise.c - one (image, group) task of a depthwise convolution
 * (C/G = 1) for conv2d.c's drivers, which thread and sum these tasks as
 * they do the GEMM path's: the plane is widened to float32 inside its zero
 * padding, the level's loops (cpu/depthwise.h) run on float32 planes, and
 * each result is rounded once at the end.
 *
 * Measured on one AVX-512 core, 3x3 depthwise at stride 1 over 32x32
 * planes: the loops run at about 50 GFLOP/s forward, where the GEMM path's
 * one-row products ran at 7 (and 2 for the weight gradient).
 */
#include "cpu/depthwise.h"
#include "cpu/gemm.h"

// ----------------------------------------------------------------------------
// helpers
//
// Planes are small (a 32x32 image's rows are 128 bytes), so rows are moved
// by plain loops rather than a memcpy or a converter call each: the calls
// took half the forward pass's time.

/* x (H, W) of dtype dt -> xp (Hp, Wp) float32 inside a border of zeros,
 * and the slack of zeros after it (ampc_dw_slack).  NULL when memory is
 * short. */
static float *
padded_plane(const ampc_converters *cv, const ampc_conv2d_shape *s,
             ampc_dtype dt, const char *x)
{
    /* NOTE: the sizes in locals: without strict aliasing, a store to a
     * float could change *s, which would keep the loops scalar */
    const int64_t h = s->h, w = s->w, ph = s->ph, pw = s->pw;
    const int64_t wp = w + 2 * pw, end = (h + 2 * ph) * wp + ampc_dw_slack(s);
    float *restrict xp = ampc_gemm_buffer(AMPC_BUF_IMG,
                                          (size_t)end * sizeof(float));
    const float *restrict src = (const float *)x;
    if (dt != AMPC_FLOAT32) {
        float *wide = ampc_gemm_buffer(AMPC_BUF_ACC,
                                       (size_t)(h * w) * sizeof(float));
        if (wide == NULL) {
            return NULL;
        }
        ampc_gemm_widen(cv, dt, x, h * w, wide);
        src = wide;
    }
    if (xp == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < ph * wp; i++) {
        xp[i] = 0.0f;
    }
    for (int64_t r = 0; r < h; r++) {
        float *restrict d = xp + (r + ph) * wp;
        for (int64_t i = 0; i < pw; i++) {
            d[i] = 0.0f;
            d[pw + w + i] = 0.0f;
        }
        for (int64_t i = 0; i < w; i++) {
            d[pw + i] = src[r * w + i];
        }
    }
    for (int64_t i = (ph + h) * wp; i < end; i++) {
        xp[i] = 0.0f;
    }
    return xp;
}

/* The rows x cols values at src (row stride ld), + b when bias, relu when
 * relu, -> dst of dtype dt: float32 is written straight; the 16-bit types
 * are gathered to buf first (buf <= src, in place: each row moves down)
 * and rounded in one call. */
static void
store_plane(const ampc_converters *cv, ampc_dtype dt, const float *src,
            int64_t ld, int64_t rows, int64_t cols, int bias, float b,
            int relu, float *buf, char *dst)
{
    float *d = dt == AMPC_FLOAT32 ? (float *)dst : buf;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * ld;
        float *o = d + r * cols;
        if (bias) {
            for (int64_t i = 0; i < cols; i++) {
                o[i] = x[i] + b;
            }
        }
        else {
            for (int64_t i = 0; i < cols; i++) {
                o[i] = x[i];
            }
        }
        if (relu) {
            /* relu keeps NaN and maps -0 to +0, as ampc_relu_f32 */
            for (int64_t i = 0; i < cols; i++) {
                o[i] = (o[i] > 0.0f || o[i] != o[i]) ? o[i] : 0.0f;
            }
        }
    }
    if (dt != AMPC_FLOAT32) {
        ampc_gemm_narrow(cv, dt, buf, rows * cols, dst);
    }
}

/* Output channel j's plane of dy (M, OH, OW) as float32: dy itself, or
 * widened into buf. */
static const float *
dy_plane(const ampc_converters *cv, const ampc_conv2d_shape *s,
         ampc_dtype dt, const char *dy, int64_t j, float *buf)
{
    const int64_t ohw = s->oh * s->ow;
    const char *p = dy + j * ohw * (int64_t)ampc_dtype_size[dt];
    if (dt == AMPC_FLOAT32) {
        return (const float *)p;
    }
    ampc_gemm_widen(cv, dt, p, ohw, buf);
    return buf;
}

// ----------------------------------------------------------------------------
// the three directions

int
ampc_dw_fwd_task(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
                 ampc_dtype dt, const char *x, const char *w,
                 const char *bias, int relu, char *y)
{
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    const int64_t taps = s->kh * s->kw, ldo = ampc_dw_row_stride(s);
    const float *xp = padded_plane(P->cvt, s, dt, x);
    float *out = ampc_gemm_buffer(AMPC_BUF_COL,
                                  (size_t)(s->oh * ldo) * sizeof(float));
    float *wk = ampc_gemm_buffer(AMPC_BUF_ROW, (size_t)taps * sizeof(float));
    if (xp == NULL || out == NULL || wk == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    for (int64_t j = 0; j < s->oc; j++) {
        ampc_gemm_widen(P->cvt, dt, w + j * taps * es, taps, wk);
        P->dw_fwd(s, xp, wk, out);
        /* the GEMM epilogue's order: the sum, + bias, relu, one rounding */
        store_plane(P->cvt, dt, out, ldo, s->oh, s->ow, bias != NULL,
                    bias != NULL ? ampc_gemm_load1(dt, bias, j) : 0.0f, relu,
                    out, y + j * s->oh * s->ow * es);
    }
    return 0;
}

int
ampc_dw_bwd_input_task(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
                       ampc_dtype dt, const char *dy, const char *w,
                       char *dx)
{
    const int64_t es = (int64_t)ampc_dtype_size[dt];
    const int64_t taps = s->kh * s->kw, wp = s->w + 2 * s->pw;
    const int64_t size = (s->h + 2 * s->ph) * wp;
    float *dxp = ampc_gemm_buffer(AMPC_BUF_IMG, (size_t)size * sizeof(float));
    float *buf = ampc_gemm_buffer(AMPC_BUF_COL,
                                  (size_t)(s->oh * s->ow) * sizeof(float));
    float *wk = ampc_gemm_buffer(AMPC_BUF_ROW, (size_t)taps * sizeof(float));
    if (dxp == NULL || buf == NULL || wk == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    for (int64_t i = 0; i < size; i++) {
        dxp[i] = 0.0f;
    }
    for (int64_t j = 0; j < s->oc; j++) {
        ampc_gemm_widen(P->cvt, dt, w + j * taps * es, taps, wk);
        P->dw_bwd_input(s, dy_plane(P->cvt, s, dt, dy, j, buf), wk, dxp);
    }
    /* the inside of the padded plane, rounded once */
    store_plane(P->cvt, dt, dxp + s->ph * wp + s->pw, wp, s->h, s->w, 0,
                0.0f, 0, dxp, dx);
    return 0;
}

int
ampc_dw_bwd_weight_task(const ampc_gemm_parts *P, const ampc_conv2d_shape *s,
                        ampc_dtype dt, const char *dy, const char *x,
                        float *gw)
{
    const int64_t taps = s->kh * s->kw;
    const float *xp = padded_plane(P->cvt, s, dt, x);
    float *buf = ampc_gemm_buffer(AMPC_BUF_COL,
                                  (size_t)(s->oh * s->ow) * sizeof(float));
    /* NOTE: not AMPC_BUF_ROW, which the caller holds for the bias
     * gradient's rows */
    float *lanes = ampc_gemm_buffer(AMPC_BUF_PACK_A,
                                    (size_t)(taps * 16) * sizeof(float));
    if (xp == NULL || buf == NULL || lanes == NULL) {
        return AMPC_LINALG_NOMEM;
    }
    for (int64_t j = 0; j < s->oc; j++) {
        P->dw_bwd_weight(s, dy_plane(P->cvt, s, dt, dy, j, buf), xp, lanes,
                         gw + j * taps);
    }
    return 0;
}
