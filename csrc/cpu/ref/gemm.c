/* gemm.c - the GEMM driver every CPU level shares (cache blocking, thread
 * split, K-block accumulation, per-thread scratch buffers), the portable
 * parts (packing and a plain-C 4x16 microkernel) and the portable peak-FLOP
 * loop.
 */
#define _POSIX_C_SOURCE 200809L     /* clock_gettime, thread CPU clocks */

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/depthwise.h"
#include "cpu/gemm.h"

/* Below this many flops one thread does the whole GEMM: waking the other
 * costs more than it saves (measured here: a parallel region costs about
 * 1 us with warm threads; 1 MFLOP takes about 6 us on one core). */
#define AMPC_GEMM_PARALLEL_FLOPS 1.0e6
/* Packing one element costs about this many multiply-adds (measured: 0.3
 * to 0.6 cycles an element against 1/32 cycle a multiply-add on AVX-512);
 * it weighs the thread split below. */
#define AMPC_GEMM_PACK_COST 12.0

// ----------------------------------------------------------------------------
// per-thread scratch buffers

typedef struct {
    void *p[AMPC_NUM_BUFS];
    size_t size[AMPC_NUM_BUFS];
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;

static void
scratch_free(void *v)
{
    scratch *s = v;
    for (int i = 0; i < AMPC_NUM_BUFS; i++) {
        free(s->p[i]);
    }
    free(s);
}

static void
scratch_init(void)
{
    scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

void *
ampc_gemm_buffer(int slot, size_t nbytes)
{
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_ok) {
        return NULL;
    }
    if (nbytes == 0) {
        nbytes = 1;             /* an empty operand still gets a pointer */
    }
    scratch *s = pthread_getspecific(scratch_key);
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->size[slot] < nbytes) {
        /* grow by half again, so slowly growing shapes do not reallocate
         * on every call */
        size_t want = nbytes + nbytes / 2;
        want = (want + AMPC_GEMM_ALIGN - 1) / AMPC_GEMM_ALIGN *
               AMPC_GEMM_ALIGN;
        free(s->p[slot]);
        s->p[slot] = aligned_alloc(AMPC_GEMM_ALIGN, want);
        s->size[slot] = s->p[slot] != NULL ? want : 0;
    }
    return s->p[slot];
}

// ----------------------------------------------------------------------------
// the driver

static int64_t
round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int
ampc_gemm_threads(double flops, int nthreads)
{
    int t = nthreads > 0 ? nthreads : omp_get_max_threads();
    return flops < AMPC_GEMM_PARALLEL_FLOPS ? 1 : t;
}

/* Rows [m0, m1) x columns [n0, n1) of C on the calling thread: the BLIS
 * loops jc (NC) > pc (KC) > ic (MC) > jr (NR) > ir (MR), with a B panel in
 * L1 across the ir loop and the A block in L2 across the jr loop.  A and B
 * come packed by the caller when a_packed / b_packed are not NULL (whole-K
 * panels: the kernel reads the same values in the same order). */
static int
gemm_block(const ampc_gemm_parts *P, const ampc_gemm_args *g,
           const float *bias, const float *a_packed, const float *b_packed,
           int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const int mr = P->mr, nr = P->nr;
    const int64_t k = g->k;
    const size_t es = ampc_dtype_size[g->dt], ces = ampc_dtype_size[g->cdt];
    const int64_t kc_max = k < P->kc ? (k > 0 ? k : 1) : P->kc;
    const int64_t mc_max = min64(P->mc, round_up(m1 - m0, mr));
    const int64_t nc_max = min64(P->nc, round_up(n1 - n0, nr));
    /* a float32 C sums K blocks in place; any other C needs a float32
     * buffer for them, over the thread's rows and one NC block */
    const int c_is_acc = g->cdt == AMPC_FLOAT32;
    const int use_buf = !c_is_acc && k > kc_max;
    const int64_t ldab = nc_max;

    float *apack = a_packed != NULL
                       ? NULL
                       : ampc_gemm_buffer(AMPC_BUF_PACK_A,
                                          (size_t)(mc_max * kc_max) *
                                              sizeof(float));
    float *bpack = b_packed != NULL
                       ? NULL
                       : ampc_gemm_buffer(AMPC_BUF_PACK_B,
                                          (size_t)(nc_max * kc_max) *
                                              sizeof(float));
    float *accbuf = use_buf ? ampc_gemm_buffer(
                                  AMPC_BUF_ACC,
                                  (size_t)((m1 - m0) * ldab) * sizeof(float))
                            : NULL;
    if ((apack == NULL && a_packed == NULL) ||
        (bpack == NULL && b_packed == NULL) ||
        (use_buf && accbuf == NULL)) {
        return AMPC_LINALG_NOMEM;
    }

    for (int64_t jc = n0; jc < n1; jc += nc_max) {
        int64_t nc = min64(nc_max, n1 - jc);
        int64_t pc = 0;
        do {
            int64_t kc = min64(kc_max, k - pc);
            int first = pc == 0, last = pc + kc >= k;
            if (b_packed == NULL) {
                P->pack(g->dt,
                        (const char *)g->b + (pc * g->rsb + jc * g->csb) * es,
                        g->csb, g->rsb, nc, kc, nr, bpack);
            }
            for (int64_t ic = m0; ic < m1; ic += mc_max) {
                int64_t mc = min64(mc_max, m1 - ic);
                if (a_packed == NULL) {
                    P->pack(g->dt,
                            (const char *)g->a +
                                (ic * g->rsa + pc * g->csa) * es,
                            g->rsa, g->csa, mc, kc, mr, apack);
                }
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        int64_t i = ic + ir, j = jc + jr;
                        ampc_gemm_tile t;
                        t.m = (int)min64(mr, mc - ir);
                        t.n = (int)min64(nr, nc - jr);
                        t.c = (char *)g->c + (i * g->ldc + j) * ces;
                        t.ldc = g->ldc;
                        t.cdt = g->cdt;
                        if (c_is_acc) {
                            t.acc = t.c;
                            t.ldacc = g->ldc;
                            t.acc_in = !first || g->beta;
                            t.beta = 0;
                        }
                        else {
                            t.acc = use_buf ? accbuf + (i - m0) * ldab +
                                                  (j - jc)
                                            : NULL;
                            t.ldacc = ldab;
                            t.acc_in = use_buf && !first;
                            t.beta = g->beta;
                        }
                        t.final = last;
                        t.bias_row = g->bias_mode == AMPC_BIAS_ROW
                                         ? bias + i : NULL;
                        t.bias_col = g->bias_mode == AMPC_BIAS_COL
                                         ? bias + j : NULL;
                        t.relu = g->relu;
                        const float *bp =
                            b_packed != NULL
                                ? b_packed + (jc + jr) * k + pc * nr
                                : bpack + jr * kc;
                        const float *ap =
                            a_packed != NULL
                                ? a_packed + (ic + ir) * k + pc * mr
                                : apack + ir * kc;
                        P->kernel(kc, ap, bp, &t);
                    }
                }
            }
            pc += kc;
        } while (pc < k);
    }
    return 0;
}

/* Splits C's tiles into a tm x tn grid for nt threads, choosing the grid
 * with the least work on its busiest thread: multiply-adds (padded tiles
 * included) plus the packing of its own A rows and B columns. */
static void
split_grid(const ampc_gemm_parts *P, const ampc_gemm_args *g, int nt,
           int *tm_out, int *tn_out)
{
    int64_t mt = (g->m + P->mr - 1) / P->mr, ntl = (g->n + P->nr - 1) / P->nr;
    double best = -1.0;
    *tm_out = 1;
    *tn_out = 1;
    for (int tm = 1; tm <= nt; tm++) {
        int tn = nt / tm;
        if (tm * tn != nt || tm > mt || tn > ntl) {
            continue;
        }
        double rows = (double)((mt + tm - 1) / tm * P->mr);
        double cols = (double)((ntl + tn - 1) / tn * P->nr);
        double k = (double)(g->k > 0 ? g->k : 1);
        double cost = rows * cols * k +
                      AMPC_GEMM_PACK_COST * k * (rows + cols);
        if (best < 0.0 || cost < best) {
            best = cost;
            *tm_out = tm;
            *tn_out = tn;
        }
    }
}

/* One product (g's batch fields ignored) on nt threads. */
static int
gemm_one(const ampc_gemm_parts *P, const ampc_gemm_args *g, const float *bias,
         const float *a_packed, const float *b_packed, int nt)
{
    int err = 0;
    if (nt == 1) {
        return gemm_block(P, g, bias, a_packed, b_packed, 0, g->m, 0, g->n);
    }
#pragma omp parallel num_threads(nt) reduction(| : err)
    {
        int tm, tn, me = omp_get_thread_num();
        split_grid(P, g, omp_get_num_threads(), &tm, &tn);
        if (me < tm * tn) {
            int64_t mt = (g->m + P->mr - 1) / P->mr;
            int64_t ntl = (g->n + P->nr - 1) / P->nr;
            int it = me / tn, jt = me % tn;
            int64_t m0 = min64(mt * it / tm * P->mr, g->m);
            int64_t m1 = min64(mt * (it + 1) / tm * P->mr, g->m);
            int64_t n0 = min64(ntl * jt / tn * P->nr, g->n);
            int64_t n1 = min64(ntl * (jt + 1) / tn * P->nr, g->n);
            if (m0 < m1 && n0 < n1) {
                err |= gemm_block(P, g, bias, a_packed, b_packed, m0, m1,
                                  n0, n1);
            }
        }
    }
    return err;
}

/* The b-th product of a batch as a single product. */
static ampc_gemm_args
batch_item(const ampc_gemm_args *g, int64_t b)
{
    ampc_gemm_args one = *g;
    one.a = (const char *)g->a + b * g->sba * (int64_t)ampc_dtype_size[g->dt];
    one.b = (const char *)g->b + b * g->sbb * (int64_t)ampc_dtype_size[g->dt];
    one.c = (char *)g->c + b * g->sbc * (int64_t)ampc_dtype_size[g->cdt];
    one.batch = 1;
    return one;
}

/* g's bias in float32 (so the epilogue never sees its dtype) in *out, or
 * NULL without one; -1 when memory is short. */
static int
bias_f32(const ampc_gemm_args *g, float **out)
{
    *out = NULL;
    if (g->bias_mode == AMPC_BIAS_NONE) {
        return 0;
    }
    int64_t n = g->bias_mode == AMPC_BIAS_ROW ? g->m : g->n;
    float *bias = malloc((size_t)n * sizeof(float));
    if (bias == NULL) {
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        bias[i] = ampc_gemm_load1(g->dt, g->bias, i);
    }
    *out = bias;
    return 0;
}

float *
ampc_gemm_pack_a(const ampc_gemm_parts *P, const ampc_gemm_args *g)
{
    int64_t k = g->k > 0 ? g->k : 1;
    size_t n = (size_t)(round_up(g->m > 0 ? g->m : 1, P->mr) * k);
    n = (n * sizeof(float) + AMPC_GEMM_ALIGN - 1) / AMPC_GEMM_ALIGN *
        AMPC_GEMM_ALIGN;
    float *a = aligned_alloc(AMPC_GEMM_ALIGN, n);
    if (a != NULL && g->m > 0 && g->k > 0) {
        P->pack(g->dt, g->a, g->rsa, g->csa, g->m, g->k, P->mr, a);
    }
    return a;
}

int
ampc_gemm_run_packed(const ampc_gemm_parts *P, const ampc_gemm_args *g,
                     const float *a_packed, const float *b_packed)
{
    float *bias;
    if (g->m <= 0 || g->n <= 0) {
        return 0;
    }
    if (bias_f32(g, &bias) < 0) {
        return AMPC_LINALG_NOMEM;
    }
    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    int err = gemm_one(P, g, bias, a_packed, b_packed,
                       ampc_gemm_threads(flops, g->nthreads));
    free(bias);
    return err;
}

int
ampc_gemm_run(const ampc_gemm_parts *P, const ampc_gemm_args *g)
{
    int64_t nb = g->batch > 1 ? g->batch : 1;
    float *bias;
    if (g->m <= 0 || g->n <= 0) {
        return 0;
    }
    if (bias_f32(g, &bias) < 0) {
        return AMPC_LINALG_NOMEM;
    }

    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    int nt = ampc_gemm_threads(flops * (double)nb, g->nthreads), err = 0;
    if (nb > 1 && nt > 1 && nb >= nt &&
        flops < AMPC_GEMM_PARALLEL_FLOPS * 16.0) {
        /* many small products: one thread each beats splitting each */
#pragma omp parallel for schedule(static) num_threads(nt) reduction(| : err)
        for (int64_t b = 0; b < nb; b++) {
            ampc_gemm_args one = batch_item(g, b);
            err |= gemm_one(P, &one, bias, NULL, NULL, 1);
        }
    }
    else {
        nt = ampc_gemm_threads(flops, g->nthreads);
        for (int64_t b = 0; b < nb && err == 0; b++) {
            ampc_gemm_args one = batch_item(g, b);
            err = gemm_one(P, &one, bias, NULL, NULL, nt);
        }
    }
    free(bias);
    return err;
}

// ----------------------------------------------------------------------------
// peak FLOP/s

/* The calling thread's CPU time in seconds. */
static double
thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each thread's rate is timed by its own CPU clock, so time-slicing by
 * other processes on a shared machine does not lower the figure: it is
 * what the cores can do, summed over the threads. */
double
ampc_peak_run(double (*chunk)(void), double seconds, int nthreads)
{
    int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
    double rate = 0.0;
#pragma omp parallel num_threads(nt) reduction(+ : rate)
    {
        chunk();                            /* warm up: clocks, caches */
        double flops = 0.0, t0 = thread_seconds(), t = 0.0;
        do {
            flops += chunk();
            t = thread_seconds() - t0;
        } while (t < seconds);
        rate = flops / t;
    }
    return rate;
}

// ----------------------------------------------------------------------------
// CPU reference

#define REF_MR 4
#define REF_NR 16

static void
pack_ref(ampc_dtype dt, const void *src, int64_t sl, int64_t sk,
         int64_t count, int64_t k, int w, float *dst)
{
    if (sl == 1) {
        ampc_gemm_pack_runs(&ampc_cvt_ref, dt, src, sk, count, k, w, dst);
    }
    else if (sk == 1) {
        ampc_gemm_pack_lines(&ampc_cvt_ref, dt, src, sl, count, k, w, dst);
    }
    else {
        ampc_gemm_pack_gather(dt, src, sl, sk, count, k, w, dst);
    }
}

/* a (k, 4) packed, b (k, 16) packed -> the 4 x 16 tile t */
static void
kernel_ref(int64_t k, const float *a, const float *b, const ampc_gemm_tile *t)
{
    float r[REF_MR][REF_NR];
    memset(r, 0, sizeof(r));
    for (int64_t p = 0; p < k; p++) {
        for (int i = 0; i < REF_MR; i++) {
            float ai = a[p * REF_MR + i];
            for (int j = 0; j < REF_NR; j++) {
                r[i][j] += ai * b[p * REF_NR + j];
            }
        }
    }
    ampc_gemm_epilogue(&ampc_cvt_ref, &r[0][0], REF_NR, t);
}

static void
im2col_ref(const ampc_conv2d_shape *s, size_t es, const void *x, void *col)
{
    if (es == 4) {
        ampc_im2col_loop(s, 4, x, col);
    }
    else {
        ampc_im2col_loop(s, 2, x, col);
    }
}

static void
col2im_ref(const ampc_conv2d_shape *s, const float *dcol, float *img)
{
    ampc_col2im_loop(s, dcol, img);
}

static void
im2col_panels_ref(const ampc_conv2d_shape *s, ampc_dtype dt, const void *xp,
                  int nr, float *dst)
{
    ampc_im2col_panels_loop(s, dt, xp, nr, dst, ampc_widen_strided);
}

static void
dw_fwd_ref(const ampc_conv2d_shape *s, const float *xp, const float *wk,
           float *out)
{
    ampc_dw_fwd_loop(s, xp, wk, out);
}

static void
dw_bwd_input_ref(const ampc_conv2d_shape *s, const float *dy,
                 const float *wk, float *dxp)
{
    ampc_dw_bwd_input_loop(s, dy, wk, dxp);
}

static void
dw_bwd_weight_ref(const ampc_conv2d_shape *s, const float *dy,
                  const float *xp, float *lanes, float *gw)
{
    ampc_dw_bwd_weight_loop(s, dy, xp, lanes, gw);
}

const ampc_gemm_parts ampc_gemm_parts_ref = {
    REF_MR, REF_NR, 128, 256, 2048, pack_ref, kernel_ref, &ampc_cvt_ref,
    im2col_ref, col2im_ref, im2col_panels_ref,
    dw_fwd_ref, dw_bwd_input_ref, dw_bwd_weight_ref,
};

int
ampc_gemm_ref(const ampc_gemm_args *g)
{
    return ampc_gemm_run(&ampc_gemm_parts_ref, g);
}

/* 8 independent multiply-add chains in portable C (a multiply and an add:
 * no FMA is assumed). */
static double
peak_chunk_ref(void)
{
    enum { ITERS = 1 << 20, LANES = 16 };
    float acc[LANES];
    volatile float seed = 1.0f;
    float x = seed * 0.999f, y = seed * 1e-7f;
    for (int l = 0; l < LANES; l++) {
        acc[l] = (float)l;
    }
    for (int it = 0; it < ITERS; it++) {
        for (int l = 0; l < LANES; l++) {
            acc[l] = acc[l] * x + y;
        }
    }
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) {
        s += acc[l];
    }
    seed = s;
    return 2.0 * ITERS * LANES;
}

double
ampc_peak_flops_ref(ampc_peak_kind kind, double seconds, int nthreads)
{
    if (kind != AMPC_PEAK_FMA) {
        return 0.0;
    }
    return ampc_peak_run(peak_chunk_ref, seconds, nthreads);
}
