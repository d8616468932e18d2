/* blas.cu - the gemm slot: the CPU's ampc_gemm_args on the GPU, through
 * cuBLASLt (the column bias fused as its BIAS epilogue, strided batches), or
 * cuBLAS where Lt finds no algorithm; relu and what Lt cannot fuse are
 * bias.cu's epilogue kernel.  One cuBLASLt and one cuBLAS handle
 * per device and host thread, every call queued on ampc_cuda_stream();
 * workspaces come from the caching allocator.
 *
 * ampc is row-major and cuBLAS column-major: a row-major C (M, N) with row
 * stride ldc is the column-major C^T (N, M) with leading dimension ldc, so
 * the slot computes C^T = B^T A^T.  The operands' strides map to op flags
 * and leading dimensions; only a stride pattern cuBLAS cannot express (both
 * strides non-unit) is gathered into a contiguous copy first.
 *
 * Accumulation is float32 (CUBLAS_COMPUTE_32F; split-K partial sums kept in
 * float32), or TF32 tensor cores for float32 operands only when allow_tf32.
 */
#include <array>
#include <map>
#include <mutex>

#include "linalg.cuh"

#if defined(AMPC_HAVE_CUBLAS) || defined(AMPC_HAVE_CUBLASLT)

#define BLAS_MAX_DEVICES 64
/* cuBLASLt workspace: what its Hopper kernels use at most (as PyTorch). */
#define BLAS_LT_WORKSPACE ((size_t)32 << 20)
/* cuBLAS (fallback) workspace, set per call so graph capture works. */
#define BLAS_WORKSPACE ((size_t)4 << 20)

/* Lt had no algorithm for the problem: try cuBLAS. */
#define BLAS_NO_ALGO (-1)

// ----------------------------------------------------------------------------
// operands

/* A column-major cuBLAS operand L (r, c): element (u, v) at
 * base[u*su + v*sv] (elements), as op(stored) with stored's leading
 * dimension ld; sb the batch stride (0 broadcasts). */
typedef struct {
    const void *p;
    int transposed;         /* stored is L^T (c, r) */
    int64_t ld, sb;
} blas_operand;

/* Maps L (r, c; su, sv) to an op flag and ld; 0 when cuBLAS cannot read it
 * in place.  A dimension of size 1 has no stride that matters, so it takes
 * whichever one makes the layout legal. */
static int
operand_map(int64_t r, int64_t c, int64_t su, int64_t sv, blas_operand *o)
{
    int64_t u = r == 1 ? 1 : su, v = c == 1 ? r : sv;
    if (u == 1 && v >= r) {
        o->transposed = 0;
        o->ld = v;
        return 1;
    }
    u = r == 1 ? c : su;
    v = c == 1 ? 1 : sv;
    if (v == 1 && u >= c) {
        o->transposed = 1;
        o->ld = u;
        return 1;
    }
    return 0;
}

/* L (r, c; su, sv; batch stride sb) as an operand, gathered into *hold
 * (scratch, column-major with ld r) when its strides are not expressible;
 * *hold stays NULL otherwise. */
static int
operand_prepare(const void *base, size_t es, int64_t batch, int64_t r,
                int64_t c, int64_t su, int64_t sv, int64_t sb,
                blas_operand *o, void **hold)
{
    *hold = NULL;
    o->p = base;
    o->sb = sb;
    if (operand_map(r, c, su, sv, o)) {
        return 0;
    }
    /* a broadcast batch (sb 0) is gathered once and stays broadcast */
    int64_t nb = sb == 0 ? 1 : batch;
    int rc = ampc_cuda_scratch_alloc((size_t)(nb * r * c) * es, hold);
    if (rc != 0) {
        return rc;
    }
    /* stored (c rows of r) row-major = L column-major with ld r */
    rc = ampc_pack_launch(es, nb, c, r, base, sb, sv, su, *hold);
    if (rc != 0) {
        return rc;
    }
    o->p = *hold;
    o->transposed = 0;
    o->ld = r;
    o->sb = sb == 0 ? 0 : r * c;
    return 0;
}

static cudaDataType_t
blas_type(ampc_dtype dt)
{
    switch (dt) {
    case AMPC_FLOAT16:
        return CUDA_R_16F;
    case AMPC_BFLOAT16:
        return CUDA_R_16BF;
    default:
        return CUDA_R_32F;
    }
}

static cublasOperation_t
blas_op(const blas_operand *o)
{
    return o->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
}

#ifdef AMPC_HAVE_CUBLASLT
/* The largest power of two (at most 256) dividing the address and the
 * byte batch stride: what Lt may assume of every batch's pointer. */
static uint32_t
alignment_of(const void *p, int64_t sb_bytes)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | (uint64_t)sb_bytes | 256u;
    return (uint32_t)(bits & (~bits + 1));
}
#endif /* AMPC_HAVE_CUBLASLT */

/* One product's shape as the column-major problem D (mm, nn) = op(X)
 * (mm, kk) op(Y) (kk, nn), D with ld ldd and batch stride sbd. */
typedef struct {
    int64_t mm, nn, kk, batch;
    blas_operand x, y;
    cudaDataType_t ab_type, d_type;
    size_t ab_es, d_es;
    void *d;
    int64_t ldd, sbd;
    int beta;
    cublasComputeType_t compute;
} blas_problem;

#endif /* AMPC_HAVE_CUBLAS || AMPC_HAVE_CUBLASLT */

// ----------------------------------------------------------------------------
// cuBLASLt

#ifdef AMPC_HAVE_CUBLASLT

static thread_local cublasLtHandle_t lt_handles[BLAS_MAX_DEVICES];

/* Lt's heuristic answer per problem (device, types, shapes, strides,
 * epilogue, alignments, bias alignment): asking costs tens of microseconds, more than a
 * small product, so each problem asks once.  found 0: Lt has none. */
typedef std::array<int64_t, 22> lt_key;
typedef struct {
    int found;
    cublasLtMatmulAlgo_t algo;
} lt_answer;

static std::mutex lt_lock;
static std::map<lt_key, lt_answer> lt_answers;

static int
lt_handle(cublasLtHandle_t *h)
{
    int dev = ampc_cuda_current_device();
    if (dev < 0 || dev >= BLAS_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "cuBLASLt device index",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    if (lt_handles[dev] == NULL) {
        AMPC_CUBLAS_CHECK(cublasLtCreate(&lt_handles[dev]));
    }
    *h = lt_handles[dev];
    return 0;
}

/* Owns the Lt descriptors of one call (the CHECK macros return early). */
struct lt_descs {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t x = NULL, y = NULL, d = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    ~lt_descs()
    {
        if (pref != NULL) {
            cublasLtMatmulPreferenceDestroy(pref);
        }
        if (d != NULL) {
            cublasLtMatrixLayoutDestroy(d);
        }
        if (y != NULL) {
            cublasLtMatrixLayoutDestroy(y);
        }
        if (x != NULL) {
            cublasLtMatrixLayoutDestroy(x);
        }
        if (op != NULL) {
            cublasLtMatmulDescDestroy(op);
        }
    }
};

static int
lt_layout(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows,
          uint64_t cols, int64_t ld, int64_t batch, int64_t sb)
{
    AMPC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, type, rows, cols, ld));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        AMPC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        AMPC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb,
            sizeof(sb)));
    }
    return 0;
}

/* D = op(X) op(Y) [+ D] [+ bias (mm,)] with one Lt call; 0, BLAS_NO_ALGO
 * when Lt has no algorithm for it, or an error code. */
static int
lt_matmul(const blas_problem *pb, const void *bias)
{
    cublasLtHandle_t h = NULL;
    int rc = lt_handle(&h);
    if (rc != 0) {
        return rc;
    }
    lt_descs ds;
    AMPC_CUBLAS_CHECK(
        cublasLtMatmulDescCreate(&ds.op, pb->compute, CUDA_R_32F));
    cublasOperation_t ta = blas_op(&pb->x), tb = blas_op(&pb->y);
    AMPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    AMPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (bias != NULL) {
        epi = CUBLASLT_EPILOGUE_BIAS;
        /* NOTE: the bias is one vector for every batch (stride 0, Lt's
         * default), as on the CPU */
        AMPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    AMPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));

    /* stored shapes: op N reads (rows, cols) as is, op T its transpose */
    int64_t xr = pb->x.transposed ? pb->kk : pb->mm;
    int64_t xc = pb->x.transposed ? pb->mm : pb->kk;
    int64_t yr = pb->y.transposed ? pb->nn : pb->kk;
    int64_t yc = pb->y.transposed ? pb->kk : pb->nn;
    if ((rc = lt_layout(&ds.x, pb->ab_type, xr, xc, pb->x.ld, pb->batch,
                        pb->x.sb)) != 0 ||
        (rc = lt_layout(&ds.y, pb->ab_type, yr, yc, pb->y.ld, pb->batch,
                        pb->y.sb)) != 0 ||
        (rc = lt_layout(&ds.d, pb->d_type, pb->mm, pb->nn, pb->ldd,
                        pb->batch, pb->sbd)) != 0) {
        return rc;
    }

    ampc_scratch ws;
    size_t ws_size = BLAS_LT_WORKSPACE;
    if (ampc_cuda_scratch_alloc(ws_size, &ws.p) != 0) {
        /* tight memory: Lt still has workspace-free algorithms */
        ws.p = NULL;
        ws_size = 0;
    }
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&ds.pref));
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
        sizeof(ws_size)));
    /* split-K partial sums in float32 only, never in a 16-bit output type,
     * so accumulation stays float32 as on the CPU */
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme,
        sizeof(scheme)));
    /* views and batch slices are not 256-byte aligned: say what is */
    uint32_t al[3] = {
        alignment_of(pb->x.p, pb->x.sb * (int64_t)pb->ab_es),
        alignment_of(pb->y.p, pb->y.sb * (int64_t)pb->ab_es),
        alignment_of(pb->d, pb->sbd * (int64_t)pb->d_es),
    };
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0],
        sizeof(al[0])));
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1],
        sizeof(al[1])));
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2],
        sizeof(al[2])));
    AMPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2],
        sizeof(al[2])));

    lt_key key = {ampc_cuda_current_device(), (int64_t)pb->compute,
                  (int64_t)pb->ab_type, (int64_t)pb->d_type,
                  pb->x.transposed, pb->y.transposed, pb->mm, pb->nn,
                  pb->kk, pb->x.ld, pb->y.ld, pb->ldd, pb->batch, pb->x.sb,
                  pb->y.sb, pb->sbd, (int64_t)epi, al[0], al[1], al[2],
                  (int64_t)ws_size,
                  bias != NULL ? (int64_t)alignment_of(bias, 0) : 0};
    lt_answer ans;
    int cached;
    {
        std::lock_guard<std::mutex> g(lt_lock);
        auto it = lt_answers.find(key);
        cached = it != lt_answers.end();
        if (cached) {
            ans = it->second;
        }
    }
    if (!cached) {
        cublasLtMatmulHeuristicResult_t res;
        int count = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
            h, ds.op, ds.x, ds.y, ds.d, ds.d, ds.pref, 1, &res, &count);
        /* Lt rejects some layouts that plain cuBLAS takes (it may answer
         * INVALID_VALUE rather than NOT_SUPPORTED, e.g. for a zero batch
         * stride): both mean "no Lt algorithm", and cuBLAS is tried. */
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED &&
            st != CUBLAS_STATUS_INVALID_VALUE) {
            rc = AMPC_CUBLAS_ERROR_BASE + (int)st;
            ampc_cuda_record_error(__FILE__, __LINE__,
                                   "cublasLtMatmulAlgoGetHeuristic", rc);
            return rc;
        }
        ans.found = st == CUBLAS_STATUS_SUCCESS && count > 0;
        if (ans.found) {
            ans.algo = res.algo;
        }
        std::lock_guard<std::mutex> g(lt_lock);
        lt_answers[key] = ans;
    }
    if (!ans.found) {
        return BLAS_NO_ALGO;
    }
    float alpha = 1.0f, beta = pb->beta ? 1.0f : 0.0f;
    AMPC_CUBLAS_CHECK(cublasLtMatmul(h, ds.op, &alpha, pb->x.p, ds.x,
                                     pb->y.p, ds.y, &beta, pb->d, ds.d,
                                     pb->d, ds.d, &ans.algo, ws.p, ws_size,
                                     ampc_cuda_stream()));
    return 0;
}

#endif /* AMPC_HAVE_CUBLASLT */

// ----------------------------------------------------------------------------
// cuBLAS (where Lt has no algorithm)

#ifdef AMPC_HAVE_CUBLAS

static thread_local cublasHandle_t blas_handles[BLAS_MAX_DEVICES];

static int
blas_handle(cublasHandle_t *h)
{
    int dev = ampc_cuda_current_device();
    if (dev < 0 || dev >= BLAS_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "cuBLAS device index",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    if (blas_handles[dev] == NULL) {
        AMPC_CUBLAS_CHECK(cublasCreate(&blas_handles[dev]));
        /* float32 accumulation for 16-bit operands, always */
        AMPC_CUBLAS_CHECK(cublasSetMathMode(
            blas_handles[dev],
            (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    }
    *h = blas_handles[dev];
    AMPC_CUBLAS_CHECK(cublasSetStream(*h, ampc_cuda_stream()));
    return 0;
}

/* D = op(X) op(Y) [+ D], no epilogue. */
static int
blas_matmul(const blas_problem *pb)
{
    cublasHandle_t h = NULL;
    int rc = blas_handle(&h);
    if (rc != 0) {
        return rc;
    }
    /* without the workspace (memory is short) cuBLAS still runs, with
     * fewer algorithms */
    void *ws = NULL;
    size_t ws_size = BLAS_WORKSPACE;
    if (ampc_cuda_scratch_alloc(ws_size, &ws) != 0) {
        ws = NULL;
        ws_size = 0;
    }
    float alpha = 1.0f, beta = pb->beta ? 1.0f : 0.0f;
    cublasStatus_t st = cublasSetWorkspace(h, ws, ws_size);
    if (st == CUBLAS_STATUS_SUCCESS) {
        st = cublasGemmStridedBatchedEx_64(
            h, blas_op(&pb->x), blas_op(&pb->y), pb->mm, pb->nn, pb->kk,
            &alpha, pb->x.p, pb->ab_type, pb->x.ld, pb->x.sb, pb->y.p,
            pb->ab_type, pb->y.ld, pb->y.sb, &beta, pb->d, pb->d_type,
            pb->ldd, pb->sbd, pb->batch, pb->compute, CUBLAS_GEMM_DEFAULT);
    }
    ampc_cuda_scratch_free(ws);
    if (st != CUBLAS_STATUS_SUCCESS) {
        rc = AMPC_CUBLAS_ERROR_BASE + (int)st;
        ampc_cuda_record_error(__FILE__, __LINE__,
                               "cublasGemmStridedBatchedEx_64", rc);
        return rc;
    }
    return 0;
}

#endif /* AMPC_HAVE_CUBLAS */

// ----------------------------------------------------------------------------
// the slot

#if defined(AMPC_HAVE_CUBLAS) || defined(AMPC_HAVE_CUBLASLT)

/* D = op(X) op(Y) [+ D] [+ bias]: Lt, with the bias fused when bias is
 * not NULL; without a bias, cuBLAS where Lt has no algorithm.  With a bias
 * that Lt cannot take, BLAS_NO_ALGO: the caller then computes the product
 * unrounded and adds the bias in the epilogue kernel. */
static int
run_product(const blas_problem *pb, const void *bias)
{
    int rc = BLAS_NO_ALGO;
#ifdef AMPC_HAVE_CUBLASLT
    if (pb->batch <= 0x7fffffffLL) {
        rc = lt_matmul(pb, bias);
    }
#endif /* AMPC_HAVE_CUBLASLT */
    if (rc != BLAS_NO_ALGO || bias != NULL) {
        return rc;
    }
#ifdef AMPC_HAVE_CUBLAS
    return blas_matmul(pb);
#else
    ampc_cuda_record_error(__FILE__, __LINE__,
                           "cublasLtMatmulAlgoGetHeuristic: no algorithm "
                           "(and cuBLAS was not found at build time)",
                           AMPC_CUBLAS_ERROR_BASE +
                               (int)CUBLAS_STATUS_NOT_SUPPORTED);
    return AMPC_CUBLAS_ERROR_BASE + (int)CUBLAS_STATUS_NOT_SUPPORTED;
#endif /* AMPC_HAVE_CUBLAS */
}

/* Where the product goes: C itself, or float32 scratch (acc, not NULL) for a
 * 16-bit C whose bias the epilogue kernel adds, so the sum is rounded once. */
static void
set_output(blas_problem *pb, const ampc_gemm_args *g, void *acc)
{
    int64_t m = g->m, n = g->n;
    pb->d = acc != NULL ? acc : g->c;
    pb->d_type = acc != NULL ? CUDA_R_32F : blas_type(g->cdt);
    pb->d_es = acc != NULL ? sizeof(float) : ampc_dtype_size[g->cdt];
    pb->ldd = acc != NULL ? n : (m == 1 ? n : g->ldc);
    pb->sbd = pb->batch == 1 ? 0 : (acc != NULL ? m * n : g->sbc);
    pb->beta = acc != NULL ? 0 : g->beta;
}

extern "C" int
ampc_gemm_cuda(const ampc_gemm_args *g, int allow_tf32)
{
    int64_t m = g->m, n = g->n, k = g->k;
    int64_t batch = g->batch > 1 ? g->batch : 1;
    const void *bias = g->bias_mode != AMPC_BIAS_NONE ? g->bias : NULL;
    if (m == 0 || n == 0) {
        return 0;
    }
    if (k == 0) {
        /* A B is all zeros: C = [C] + bias, relu */
        return ampc_gemm_epilogue_launch(batch, m, n, NULL, g->c, g->cdt,
                                         g->ldc, g->sbc, g->beta, bias,
                                         g->dt, g->bias_mode, g->relu);
    }
    if (m > 1 && g->ldc < n) {
        ampc_cuda_record_error(__FILE__, __LINE__, "gemm: ldc < n",
                               (int)cudaErrorInvalidValue);
        return (int)cudaErrorInvalidValue;
    }

    /* C^T (n, m) = B^T (n, k) A^T (k, m), column-major */
    size_t es = ampc_dtype_size[g->dt];
    blas_problem pb;
    pb.mm = n;
    pb.nn = m;
    pb.kk = k;
    pb.batch = batch;
    pb.ab_type = blas_type(g->dt);
    pb.ab_es = es;
    pb.compute = g->dt == AMPC_FLOAT32 && allow_tf32
                     ? CUBLAS_COMPUTE_32F_FAST_TF32
                     : CUBLAS_COMPUTE_32F;
    void *hold_x = NULL, *hold_y = NULL, *acc = NULL;
    int rc = operand_prepare(g->b, es, batch, n, k, g->csb, g->rsb,
                             batch > 1 ? g->sbb : 0, &pb.x, &hold_x);
    if (rc == 0) {
        rc = operand_prepare(g->a, es, batch, k, m, g->csa, g->rsa,
                             batch > 1 ? g->sba : 0, &pb.y, &hold_y);
    }

    /* Lt fuses a column bias only in C's own dtype; otherwise (or when Lt
     * has no algorithm with the bias) the product goes to float32 (C
     * itself, or scratch for a 16-bit C, so that the result is rounded
     * once) and the epilogue kernel finishes it.
     * NOTE: relu is never Lt's epilogue, which is not documented to keep
     * NaN (ampc's relu does); the kernel's relu after the rounding is exact
     * (RNE is monotone and keeps the sign, so relu(round(x)) ==
     * round(relu(x))). */
    /* NOTE: no Lt preference describes the bias pointer's alignment (the
     * heuristic assumes an aligned one; a misaligned bias has been seen to
     * fault in the BIAS epilogue, a sticky error), so a bias view at an odd
     * offset, e.g. a slice of a flat parameter buffer, takes the kernel
     * path instead. */
    int bias_done = 0;
    if (rc == 0 && bias != NULL && g->bias_mode == AMPC_BIAS_COL &&
        g->cdt == g->dt && ((uintptr_t)bias & 15) == 0) {
        set_output(&pb, g, NULL);
        rc = run_product(&pb, bias);
        bias_done = rc == 0;
        if (rc == BLAS_NO_ALGO) {
            rc = 0;
        }
    }
    const void *rest = bias_done ? NULL : bias;
    if (rc == 0 && !bias_done) {
        if (rest != NULL && g->cdt != AMPC_FLOAT32) {
            rc = ampc_cuda_scratch_alloc(
                (size_t)(batch * m * n) * sizeof(float), &acc);
        }
        if (rc == 0) {
            set_output(&pb, g, acc);
            rc = run_product(&pb, NULL);
        }
    }
    if (rc == 0 && (rest != NULL || g->relu)) {
        /* in place on C (its beta already summed), else from the float32
         * scratch with C's old values */
        rc = ampc_gemm_epilogue_launch(
            batch, m, n, (const float *)acc, g->c, g->cdt, g->ldc,
            batch == 1 ? 0 : g->sbc, acc != NULL ? g->beta : 1, rest, g->dt,
            rest != NULL ? g->bias_mode : AMPC_BIAS_NONE, g->relu);
    }
    /* NOTE: freed while queued work may still read them: the caching
     * allocator hands them only to later work on this stream */
    if (acc != NULL) {
        ampc_cuda_scratch_free(acc);
    }
    if (hold_y != NULL) {
        ampc_cuda_scratch_free(hold_y);
    }
    if (hold_x != NULL) {
        ampc_cuda_scratch_free(hold_x);
    }
    return rc;
}

#else /* neither cuBLAS nor cuBLASLt */

/* Parameters unnamed: none is read without cuBLAS. */
extern "C" int
ampc_gemm_cuda(const ampc_gemm_args *, int)
{
    ampc_cuda_record_error(__FILE__, __LINE__,
                           "gemm: cuBLAS was not found at build time",
                           (int)cudaErrorNotSupported);
    return (int)cudaErrorNotSupported;
}

#endif /* AMPC_HAVE_CUBLAS || AMPC_HAVE_CUBLASLT */
