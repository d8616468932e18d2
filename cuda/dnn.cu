/* dnn.cu - conv2d through cuDNN (the legacy cudnnConvolution* API, still in
 * cuDNN 9): the conv2d_fwd, conv2d_bwd_input and conv2d_bwd_weight slots,
 * one cuDNN handle per device and host thread bound to ampc_cuda_stream(),
 * and the per-shape algorithm cache (slot conv2d_algo_cache).
 *
 * NCHW, any groups (the convolution descriptor's group count, the filter
 * (OC, C/G, KH, KW)).  float32 computes in float32 (FMA math: no TF32 unless
 * ampc.backends.cudnn.allow_tf32); float16 and bfloat16 compute in float32
 * (CUDNN_DATA_FLOAT) on tensor cores.  An algorithm is chosen once per
 * (device, shape, groups, dtype, direction, flags): by timing every algorithm
 * (cudnnFind*Ex) when cudnn.benchmark is set, else by cuDNN's heuristics
 * (cudnnGet*_v7), keeping only deterministic ones when
 * cudnn.deterministic.  Workspaces come from the caching allocator.
 * Forward's bias + relu: cudnnConvolutionBiasActivationForward for float32,
 * else the bias_act kernel (bias.cu); the bias gradient is bias.cu's
 * deterministic reduction.  With ampc.backends.cudnn.enabled False, or
 * without cuDNN at build time, the slots run conv_gemm.cu instead.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <map>
#include <mutex>
#include <tuple>

#include "linalg.cuh"

#ifdef AMPC_HAVE_CUDNN

#define DNN_MAX_DEVICES 64
/* cudnn.benchmark: the largest workspace tried while timing algorithms
 * (halved until the allocator can give it). */
#define DNN_FIND_WORKSPACE ((size_t)1 << 30)
#define DNN_MAX_ALGOS 16

typedef enum { DIR_FWD = 0, DIR_BWD_DATA, DIR_BWD_FILTER } conv_dir;

// ----------------------------------------------------------------------------
// the algorithm cache

/* (device, direction, dtype, flags (benchmark, deterministic, TF32,
 * aligned), n, c, h, w, oc, kh, kw, groups, sh, sw, ph, pw, dh, dw) */
typedef std::tuple<int, int, int, int, int64_t, int64_t, int64_t, int64_t,
                   int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                   int64_t, int64_t, int64_t, int64_t>
    algo_key;

typedef struct {
    int algo;               /* a cudnnConvolution*Algo_t; NO_ALGO: none fits
                             * (the problem then takes the GEMM path) */
    cudnnMathType_t math;
    size_t workspace;
} algo_entry;

#define NO_ALGO (-1)

static std::mutex cache_lock;
static std::map<algo_key, algo_entry> algo_cache;
static int64_t cache_hits, cache_misses;

/* NOTE: some algorithms need 16-byte aligned buffers, so whether the
 * call's buffers are aligned is part of the key (as in PyTorch): a view at
 * an odd offset must not reuse the choice made for an aligned tensor. */
static algo_key
make_key(int dev, conv_dir dir, ampc_dtype dt, const ampc_cudnn_opts *o,
         const ampc_conv2d_shape *s, const void *in0, const void *in1,
         const void *out)
{
    uintptr_t addresses = (uintptr_t)in0 | (uintptr_t)in1 | (uintptr_t)out;
    int flags = (o->benchmark ? 1 : 0) | (o->deterministic ? 2 : 0) |
                (o->allow_tf32 && dt == AMPC_FLOAT32 ? 4 : 0) |
                ((addresses & 15) == 0 ? 8 : 0);
    return algo_key(dev, (int)dir, (int)dt, flags, s->n, s->c, s->h, s->w,
                    s->oc, s->kh, s->kw, s->groups, s->sh, s->sw, s->ph,
                    s->pw, s->dh, s->dw);
}

static int
cache_find(const algo_key &key, algo_entry *e)
{
    std::lock_guard<std::mutex> g(cache_lock);
    auto it = algo_cache.find(key);
    if (it == algo_cache.end()) {
        cache_misses++;
        return 0;
    }
    cache_hits++;
    *e = it->second;
    return 1;
}

static void
cache_store(const algo_key &key, const algo_entry &e)
{
    std::lock_guard<std::mutex> g(cache_lock);
    algo_cache[key] = e;
}

extern "C" int
ampc_conv2d_algo_cache_cuda(int clear, int64_t *entries, int64_t *hits,
                            int64_t *misses)
{
    std::lock_guard<std::mutex> g(cache_lock);
    if (clear) {
        algo_cache.clear();
        cache_hits = 0;
        cache_misses = 0;
    }
    *entries = (int64_t)algo_cache.size();
    *hits = cache_hits;
    *misses = cache_misses;
    return 0;
}

extern "C" int
ampc_cudnn_version_cuda(int64_t *version)
{
    *version = (int64_t)cudnnGetVersion();
    return 0;
}

// ----------------------------------------------------------------------------
// handles and descriptors

static thread_local cudnnHandle_t dnn_handles[DNN_MAX_DEVICES];

static int
dnn_handle(cudnnHandle_t *h, int *dev_out)
{
    int dev = ampc_cuda_current_device();
    if (dev < 0 || dev >= DNN_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "cuDNN device index",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    if (dnn_handles[dev] == NULL) {
        AMPC_CUDNN_CHECK(cudnnCreate(&dnn_handles[dev]));
    }
    *h = dnn_handles[dev];
    *dev_out = dev;
    AMPC_CUDNN_CHECK(cudnnSetStream(*h, ampc_cuda_stream()));
    return 0;
}

/* The descriptors of one call, destroyed on every return path. */
struct conv_descs {
    cudnnTensorDescriptor_t x = NULL, y = NULL, b = NULL;
    cudnnFilterDescriptor_t w = NULL;
    cudnnConvolutionDescriptor_t conv = NULL;
    cudnnActivationDescriptor_t act = NULL;
    ~conv_descs()
    {
        if (act != NULL) {
            cudnnDestroyActivationDescriptor(act);
        }
        if (conv != NULL) {
            cudnnDestroyConvolutionDescriptor(conv);
        }
        if (w != NULL) {
            cudnnDestroyFilterDescriptor(w);
        }
        if (b != NULL) {
            cudnnDestroyTensorDescriptor(b);
        }
        if (y != NULL) {
            cudnnDestroyTensorDescriptor(y);
        }
        if (x != NULL) {
            cudnnDestroyTensorDescriptor(x);
        }
    }
};

static cudnnDataType_t
dnn_type(ampc_dtype dt)
{
    switch (dt) {
    case AMPC_FLOAT16:
        return CUDNN_DATA_HALF;
    case AMPC_BFLOAT16:
        return CUDNN_DATA_BFLOAT16;
    default:
        return CUDNN_DATA_FLOAT;
    }
}

/* The math type the descriptor starts with: FMA only for float32 without
 * TF32, tensor cores for the 16-bit types. */
static cudnnMathType_t
base_math(ampc_dtype dt, const ampc_cudnn_opts *o)
{
    if (dt != AMPC_FLOAT32) {
        return CUDNN_TENSOR_OP_MATH;
    }
    return o->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* x (N, C, H, W), w (OC, C/G, KH, KW), y (N, OC, OH, OW), G groups,
 * float32 compute. */
static int
make_descs(const ampc_conv2d_shape *s, ampc_dtype dt,
           const ampc_cudnn_opts *o, conv_descs *d)
{
    const int64_t dims[] = {s->n, s->c, s->h, s->w, s->oc, s->kh, s->kw,
                            s->groups, s->oh, s->ow, s->sh, s->sw, s->ph,
                            s->pw, s->dh, s->dw};
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        if (dims[i] > INT_MAX) {
            ampc_cuda_record_error(__FILE__, __LINE__,
                                   "conv2d: a size over 2^31 - 1 (cuDNN "
                                   "takes int)",
                                   (int)cudaErrorInvalidValue);
            return (int)cudaErrorInvalidValue;
        }
    }
    cudnnDataType_t t = dnn_type(dt);
    AMPC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    AMPC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        d->x, CUDNN_TENSOR_NCHW, t, (int)s->n, (int)s->c, (int)s->h,
        (int)s->w));
    AMPC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y));
    AMPC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        d->y, CUDNN_TENSOR_NCHW, t, (int)s->n, (int)s->oc, (int)s->oh,
        (int)s->ow));
    AMPC_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d->w));
    AMPC_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        d->w, t, CUDNN_TENSOR_NCHW, (int)s->oc, (int)(s->c / s->groups),
        (int)s->kh, (int)s->kw));
    AMPC_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->conv));
    AMPC_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d->conv, (int)s->ph, (int)s->pw, (int)s->sh, (int)s->sw, (int)s->dh,
        (int)s->dw, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    AMPC_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d->conv, (int)s->groups));
    AMPC_CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv, base_math(dt, o)));
    return 0;
}

// ----------------------------------------------------------------------------
// choosing an algorithm

/* The first usable entry of perf[start, count) into *e: 1 + its index, or
 * 0 when none.  The perf structs of the three directions differ only in
 * the algo's enum type; this reads any of them. */
template <typename Perf>
static int
pick(const Perf *perf, int start, int count, ampc_dtype dt,
     const ampc_cudnn_opts *o, size_t max_workspace, algo_entry *e)
{
    for (int i = start; i < count; i++) {
        const Perf &p = perf[i];
        if (p.status != CUDNN_STATUS_SUCCESS || p.memory > max_workspace) {
            continue;
        }
        if (o->deterministic && p.determinism != CUDNN_DETERMINISTIC) {
            continue;
        }
        /* float32 without TF32: never a tensor-core algorithm */
        if (dt == AMPC_FLOAT32 && !o->allow_tf32 &&
            (p.mathType == CUDNN_TENSOR_OP_MATH ||
             p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) {
            continue;
        }
        e->algo = (int)p.algo;
        e->math = dt == AMPC_FLOAT32 && !o->allow_tf32 ? CUDNN_FMA_MATH
                                                       : p.mathType;
        e->workspace = p.memory;
        return i + 1;
    }
    return 0;
}

/* e->workspace = the bytes e->algo needs with math type e->math. */
static int
workspace_size(cudnnHandle_t h, conv_dir dir, const conv_descs *d,
               algo_entry *e)
{
    AMPC_CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv, e->math));
    if (dir == DIR_FWD) {
        AMPC_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
            h, d->x, d->w, d->conv, d->y,
            (cudnnConvolutionFwdAlgo_t)e->algo, &e->workspace));
    }
    else if (dir == DIR_BWD_DATA) {
        AMPC_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, d->w, d->y, d->conv, d->x,
            (cudnnConvolutionBwdDataAlgo_t)e->algo, &e->workspace));
    }
    else {
        AMPC_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, d->x, d->y, d->conv, d->w,
            (cudnnConvolutionBwdFilterAlgo_t)e->algo, &e->workspace));
    }
    return 0;
}

/* cuDNN cannot do this problem (cuDNN 9: a "not supported" category,
 * 3000, plus a reason, or a pointer it will not take unaligned): the
 * im2col + GEMM path does it instead.  Not the environment's failures in
 * that category (driver, runtime, architecture, a missing nvrtc or
 * sub-library): those are errors, raised, not hidden behind a slower path. */
static bool
dnn_not_supported(cudnnStatus_t st)
{
#ifdef CUDNN_STATUS_CATEGORY
    int code = (int)st;
    if (code == (int)CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER) {
        return true;
    }
    return CUDNN_STATUS_CATEGORY(code) == (int)CUDNN_STATUS_NOT_SUPPORTED &&
           (code < (int)CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER ||
            code > (int)CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE);
#else
    return st == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

/* rc from a dnn_* call says cuDNN cannot do this problem (no algorithm
 * fits the dtype / deterministic / TF32 / workspace constraints, or cuDNN
 * answered "not supported"): the im2col + GEMM path (deterministic, any
 * dtype) computes the same result instead, over the whole output. */
static bool
dnn_refused(int rc)
{
    return rc >= AMPC_CUDNN_ERROR_BASE &&
           dnn_not_supported((cudnnStatus_t)(rc - AMPC_CUDNN_ERROR_BASE));
}

/* The heuristics' best usable algorithm whose exact workspace the
 * allocator can give now (the next one when it cannot), into *e; 1, 0
 * when none is allowed, or an error code as -code (the allocator's
 * out-of-memory when every allowed one's workspace failed). */
template <typename Perf>
static int
pick_heuristic(cudnnHandle_t h, conv_dir dir, const conv_descs *d,
               const Perf *perf, int count, ampc_dtype dt,
               const ampc_cudnn_opts *o, algo_entry *e)
{
    int oom = 0;
    for (int next = 0; (next = pick(perf, next, count, dt, o, (size_t)-1,
                                    e)) > 0;) {
        /* the heuristics' memory field is an estimate: ask for the exact
         * workspace of the algorithm with its math type */
        int rc = workspace_size(h, dir, d, e);
        if (dnn_refused(rc)) {
            continue;       /* not this one after all: the next */
        }
        if (rc != 0) {
            return -rc;
        }
        ampc_scratch probe;
        if (e->workspace == 0) {
            return 1;
        }
        rc = ampc_cuda_scratch_alloc(e->workspace, &probe.p);
        if (rc == 0) {
            return 1;
        }
        probe.p = NULL;
        oom = rc;
    }
    /* every allowed algorithm wanted more workspace than could be had: an
     * out-of-memory error (OutOfMemoryError in Python), not "no algorithm" */
    return -oom;
}

/* The largest scratch block up to DNN_FIND_WORKSPACE the allocator gives
 * (halving down to 1 MiB), for timing algorithms; *size 0 when none. */
static void
find_workspace(ampc_scratch *ws, size_t *size)
{
    for (size_t sz = DNN_FIND_WORKSPACE; sz >= ((size_t)1 << 20); sz >>= 1) {
        if (ampc_cuda_scratch_alloc(sz, &ws->p) == 0) {
            *size = sz;
            return;
        }
        ws->p = NULL;
    }
    *size = 0;
}

static int
no_algo(void)
{
    int rc = AMPC_CUDNN_ERROR_BASE + (int)CUDNN_STATUS_NOT_SUPPORTED;
    ampc_cuda_record_error(__FILE__, __LINE__,
                           "conv2d: no cuDNN algorithm fits (deterministic "
                           "/ TF32 / workspace constraints)",
                           rc);
    return rc;
}

/* Chooses (or finds in the cache) the algorithm for dir.  The pointers are
 * the call's own buffers: cudnnFind*Ex runs the convolution on them (the
 * output is overwritten by the real call after). */
static int
choose(cudnnHandle_t h, int dev, conv_dir dir, const ampc_conv2d_shape *s,
       ampc_dtype dt, const ampc_cudnn_opts *o, const conv_descs *d,
       const void *in0, const void *in1, void *out, algo_entry *e)
{
    algo_key key = make_key(dev, dir, dt, o, s, in0, in1, out);
    if (cache_find(key, e)) {
        return e->algo == NO_ALGO ? no_algo() : 0;
    }
    int count = 0, found = 0;
    /* the search saw less workspace than it could have (memory was short
     * at this call): "none fits" may not hold at the next one */
    bool limited = false;
    if (o->benchmark) {
        /* NOTE: cudnnFind* waits for the GPU and cannot be captured in a
         * CUDA graph: run one eager step before capturing. */
        ampc_scratch ws;
        size_t size = 0;
        find_workspace(&ws, &size);
        limited = size < DNN_FIND_WORKSPACE;
        if (dir == DIR_FWD) {
            cudnnConvolutionFwdAlgoPerf_t perf[DNN_MAX_ALGOS];
            AMPC_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
                h, d->x, in0, d->w, in1, d->conv, d->y, out, DNN_MAX_ALGOS,
                &count, perf, ws.p, size));
            found = pick(perf, 0, count, dt, o, size, e);
        }
        else if (dir == DIR_BWD_DATA) {
            cudnnConvolutionBwdDataAlgoPerf_t perf[DNN_MAX_ALGOS];
            AMPC_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
                h, d->w, in1, d->y, in0, d->conv, d->x, out, DNN_MAX_ALGOS,
                &count, perf, ws.p, size));
            found = pick(perf, 0, count, dt, o, size, e);
        }
        else {
            cudnnConvolutionBwdFilterAlgoPerf_t perf[DNN_MAX_ALGOS];
            AMPC_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                h, d->x, in1, d->y, in0, d->conv, d->w, out, DNN_MAX_ALGOS,
                &count, perf, ws.p, size));
            found = pick(perf, 0, count, dt, o, size, e);
        }
    }
    else {
        /* heuristics, best first */
        if (dir == DIR_FWD) {
            cudnnConvolutionFwdAlgoPerf_t perf[DNN_MAX_ALGOS];
            AMPC_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
                h, d->x, d->w, d->conv, d->y, DNN_MAX_ALGOS, &count, perf));
            found = pick_heuristic(h, dir, d, perf, count, dt, o, e);
        }
        else if (dir == DIR_BWD_DATA) {
            cudnnConvolutionBwdDataAlgoPerf_t perf[DNN_MAX_ALGOS];
            AMPC_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                h, d->w, d->y, d->conv, d->x, DNN_MAX_ALGOS, &count, perf));
            found = pick_heuristic(h, dir, d, perf, count, dt, o, e);
        }
        else {
            cudnnConvolutionBwdFilterAlgoPerf_t perf[DNN_MAX_ALGOS];
            AMPC_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                h, d->x, d->y, d->conv, d->w, DNN_MAX_ALGOS, &count, perf));
            found = pick_heuristic(h, dir, d, perf, count, dt, o, e);
        }
        if (found < 0) {
            return -found;
        }
    }
    if (!found) {
        /* remembered, so that the search is not run again at every call;
         * not when it only lacked memory now (the GEMM path for good) */
        if (!limited) {
            cache_store(key, algo_entry{NO_ALGO, CUDNN_DEFAULT_MATH, 0});
        }
        return no_algo();
    }
    cache_store(key, *e);
    return 0;
}

/* Sets the chosen math type and allocates its workspace into ws. */
static int
prepare_run(const conv_descs *d, const algo_entry *e, ampc_scratch *ws)
{
    AMPC_CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv, e->math));
    if (e->workspace > 0) {
        int rc = ampc_cuda_scratch_alloc(e->workspace, &ws->p);
        if (rc != 0) {
            ws->p = NULL;
            return rc;
        }
    }
    return 0;
}

/* What one cuDNN call needs: the handle, the descriptors, the algorithm
 * for `dir` (chosen, or found in the cache) and its workspace in ws. */
static int
dnn_setup(conv_dir dir, const ampc_conv2d_shape *s, ampc_dtype dt,
          const ampc_cudnn_opts *o, const void *in0, const void *in1,
          void *out, cudnnHandle_t *h, conv_descs *d, algo_entry *e,
          ampc_scratch *ws)
{
    int dev = 0, rc = dnn_handle(h, &dev);
    if (rc != 0 || (rc = make_descs(s, dt, o, d)) != 0 ||
        (rc = choose(*h, dev, dir, s, dt, o, d, in0, in1, out, e)) != 0) {
        return rc;
    }
    return prepare_run(d, e, ws);
}

// ----------------------------------------------------------------------------
// the three directions through cuDNN (the slots below check the shapes)

/* x (N, C, H, W), w (OC, C/G, KH, KW), bias (OC) or NULL -> y (N, OC, OH,
 * OW) = conv(x, w) + bias [relu] */
static int
dnn_fwd(const ampc_conv2d_shape *s, ampc_dtype dt, const void *x,
        const void *w, const void *bias, int relu, void *y,
        const ampc_cudnn_opts *o)
{
    cudnnHandle_t h = NULL;
    conv_descs d;
    algo_entry e;
    ampc_scratch ws;
    int rc = dnn_setup(DIR_FWD, s, dt, o, x, w, y, &h, &d, &e, &ws);
    if (rc != 0) {
        return rc;
    }
    float one = 1.0f, zero = 0.0f;
    if (dt == AMPC_FLOAT32 && bias != NULL && relu) {
        /* y = relu(conv + 0 * y + bias) in one call; bias (1, OC, 1, 1).
         * NOTE: z is y itself, uninitialised, with alpha2 = 0 (the API
         * wants a z; torch's cudnn_convolution_relu passes its empty
         * output the same way) */
        AMPC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.b));
        AMPC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
            d.b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)s->oc, 1, 1));
        AMPC_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d.act));
        AMPC_CUDNN_CHECK(cudnnSetActivationDescriptor(
            d.act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
        cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
            h, &one, d.x, x, d.w, w, d.conv, (cudnnConvolutionFwdAlgo_t)e.algo,
            ws.p, e.workspace, &zero, d.y, y, d.b, bias, d.act, d.y, y);
        if (st == CUDNN_STATUS_SUCCESS) {
            return 0;
        }
        /* not for this algorithm (cuDNN fuses ReLU with few of them, and
         * answers "not supported" or "bad parameter"): the plain
         * convolution and the kernel, which raise if cuDNN really failed */
    }
    AMPC_CUDNN_CHECK(cudnnConvolutionForward(
        h, &one, d.x, x, d.w, w, d.conv, (cudnnConvolutionFwdAlgo_t)e.algo,
        ws.p, e.workspace, &zero, d.y, y));
    /* NOTE: a 16-bit y is rounded by cuDNN and again after the bias, as
     * torch's cuDNN path (convolution, then add_ of the bias); the CPU
     * rounds once: at most one extra half-ulp */
    return ampc_bias_act_launch(dt, s->n * s->oc, s->oc, s->oh * s->ow, bias,
                                relu, y);
}

/* dy (N, OC, OH, OW), w (OC, C/G, KH, KW) -> dx (N, C, H, W) */
static int
dnn_bwd_input(const ampc_conv2d_shape *s, ampc_dtype dt, const void *dy,
              const void *w, void *dx, const ampc_cudnn_opts *o)
{
    cudnnHandle_t h = NULL;
    conv_descs d;
    algo_entry e;
    ampc_scratch ws;
    int rc = dnn_setup(DIR_BWD_DATA, s, dt, o, dy, w, dx, &h, &d, &e, &ws);
    if (rc != 0) {
        return rc;
    }
    float one = 1.0f, zero = 0.0f;
    AMPC_CUDNN_CHECK(cudnnConvolutionBackwardData(
        h, &one, d.w, w, d.y, dy, d.conv,
        (cudnnConvolutionBwdDataAlgo_t)e.algo, ws.p, e.workspace, &zero, d.x,
        dx));
    return 0;
}

/* dy (N, OC, OH, OW), x (N, C, H, W) -> dw (OC, C/G, KH, KW) */
static int
dnn_bwd_weight(const ampc_conv2d_shape *s, ampc_dtype dt, const void *dy,
               const void *x, void *dw, const ampc_cudnn_opts *o)
{
    cudnnHandle_t h = NULL;
    conv_descs d;
    algo_entry e;
    ampc_scratch ws;
    int rc = dnn_setup(DIR_BWD_FILTER, s, dt, o, dy, x, dw, &h, &d, &e,
                       &ws);
    if (rc != 0) {
        return rc;
    }
    float one = 1.0f, zero = 0.0f;
    AMPC_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        h, &one, d.x, x, d.y, dy, d.conv,
        (cudnnConvolutionBwdFilterAlgo_t)e.algo, ws.p, e.workspace, &zero,
        d.w, dw));
    return 0;
}

/* cuDNN's legacy descriptors refuse a tensor of more than 2^31 - 1
 * elements (PyTorch splits the batch for it): such a problem takes the
 * GEMM path, whose indices are 64-bit, instead of failing. */
static bool
dnn_fits(const ampc_conv2d_shape *s)
{
    return s->n * s->c * s->h * s->w <= INT_MAX &&
           s->n * s->oc * s->oh * s->ow <= INT_MAX &&
           s->oc * (s->c / s->groups) * s->kh * s->kw <= INT_MAX;
}

#else /* no cuDNN */

extern "C" int
ampc_cudnn_version_cuda(int64_t *version)
{
    *version = 0;
    return 0;
}

extern "C" int
ampc_conv2d_algo_cache_cuda(int, int64_t *entries, int64_t *hits,
                            int64_t *misses)
{
    *entries = 0;
    *hits = 0;
    *misses = 0;
    return 0;
}

#endif /* AMPC_HAVE_CUDNN */

// ----------------------------------------------------------------------------
// the slots: cuDNN, or im2col + GEMM (conv_gemm.cu) when it is switched off
// or missing

/* x (N, C, H, W), w (OC, C/G, KH, KW), bias (OC) or NULL -> y (N, OC, OH,
 * OW) = conv(x, w) + bias [relu] */
extern "C" int
ampc_conv2d_fwd_cuda(const ampc_conv2d_shape *s, ampc_dtype dt,
                     const void *x, const void *w, const void *bias,
                     int relu, void *y, const ampc_cudnn_opts *o)
{
    if (s->n == 0 || s->oc == 0) {
        return 0;
    }
#ifdef AMPC_HAVE_CUDNN
    /* NOTE: cuDNN is never given a zero-sized dimension: with C == 0 the
     * sum is empty (y = bias [relu]), which the GEMM path's k == 0 writes */
    if (o->enabled && s->c > 0 && dnn_fits(s)) {
        int rc = dnn_fwd(s, dt, x, w, bias, relu, y, o);
        if (!dnn_refused(rc)) {
            return rc;
        }
    }
#endif /* AMPC_HAVE_CUDNN */
    (void)o;
    return ampc_conv2d_fwd_gemm(s, dt, x, w, bias, relu, y);
}

/* dy (N, OC, OH, OW), w (OC, C/G, KH, KW) -> dx (N, C, H, W) */
extern "C" int
ampc_conv2d_bwd_input_cuda(const ampc_conv2d_shape *s, ampc_dtype dt,
                           const void *dy, const void *w, void *dx,
                           const ampc_cudnn_opts *o)
{
    if (s->n == 0 || s->c == 0) {
        return 0;
    }
#ifdef AMPC_HAVE_CUDNN
    /* OC == 0: dx is all zeros, written by the GEMM path (k == 0) */
    if (o->enabled && s->oc > 0 && dnn_fits(s)) {
        int rc = dnn_bwd_input(s, dt, dy, w, dx, o);
        if (!dnn_refused(rc)) {
            return rc;
        }
    }
#endif /* AMPC_HAVE_CUDNN */
    (void)o;
    return ampc_conv2d_bwd_input_gemm(s, dt, dy, w, dx);
}

/* dy (N, OC, OH, OW), x (N, C, H, W) -> dw (OC, C/G, KH, KW) and db (OC),
 * each NULL when not wanted */
extern "C" int
ampc_conv2d_bwd_weight_cuda(const ampc_conv2d_shape *s, ampc_dtype dt,
                            const void *dy, const void *x, void *dw,
                            void *db, const ampc_cudnn_opts *o)
{
    size_t es = ampc_dtype_size[dt];
    int64_t nw = s->oc * (s->c / s->groups) * s->kh * s->kw;
    if (db != NULL) {
        int rc = ampc_bias_grad_cuda(dt, s->n, s->oc, s->oh * s->ow, dy, db);
        if (rc != 0) {
            return rc;
        }
    }
    if (dw == NULL || nw == 0) {
        return 0;
    }
    if (s->n == 0) {
        /* an empty batch contributes nothing: +0.0 in every dtype */
        AMPC_CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)nw * es,
                                        ampc_cuda_stream()));
        return 0;
    }
#ifdef AMPC_HAVE_CUDNN
    if (o->enabled && dnn_fits(s)) {
        int rc = dnn_bwd_weight(s, dt, dy, x, dw, o);
        if (!dnn_refused(rc)) {
            return rc;
        }
    }
#endif /* AMPC_HAVE_CUDNN */
    (void)o;
    return ampc_conv2d_bwd_weight_gemm(s, dt, dy, x, dw);
}
