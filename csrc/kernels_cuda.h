/* kernels_cuda.h - the CUDA kernel table: what csrc/ calls for tensors on a
 * GPU, through function pointers, so that no C file needs an #ifdef and a
 * CPU-only build still links (its table is all NULL, and no CUDA tensor can
 * exist there, so no slot is ever reached).  cuda/register.cu fills the
 * table from the slots listed in csrc/cuda_ops.def.
 *
 * Rules for every slot:
 * - Returns 0 or an error code (cuda/ampc_cuda.h: a cudaError_t, or a
 *   cuBLAS / cuDNN status offset by its base); ampc_cuda_raise() in
 *   csrc/dispatch.c turns a code into a RuntimeError naming the op.
 * - Runs on the current device (set_device) and is queued on that device's
 *   ampc stream (cuda/common.cuh ampc_cuda_stream()), so it returns before
 *   the GPU has finished, unless its comment says it waits.
 * - Pointers are device pointers unless named host_*.
 * - Float16 and bfloat16 are widened to float32 at load, computed in
 *   float32 and rounded once (RNE, amp_math.h) at store, as on the CPU.
 * - Where a slot reuses a CPU shape struct (kernels.h), its fields mean
 *   what they mean on the CPU.
 */
#ifndef AMPC_KERNELS_CUDA_H
#define AMPC_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// ----------------------------------------------------------------------------
// devices, memory and copies (cuda/device.cu, cuda/allocator.cu,
// cuda/pinned.cu, cuda/copy.cu)

typedef enum {
    AMPC_COPY_H2D = 0,      /* queued; host memory must stay valid until the
                             * stream reaches it (pinned) or is copied at once
                             * (pageable: the call returns after staging) */
    AMPC_COPY_D2H,          /* waits: the host buffer is filled on return */
    AMPC_COPY_D2D           /* queued */
} ampc_copy_kind;

/* cudaErrorMemoryAllocation: what malloc returns when the device is full
 * (the C side raises ampc.cuda.OutOfMemoryError for it). */
#define AMPC_CUDA_ERROR_OOM 2

/* Makes device `index` current for this host thread. */
typedef int (*ampc_cuda_set_device_fn)(int index);
/* The caching allocator: *ptr is a block of at least nbytes (256-byte
 * aligned) on the current device.  On out-of-memory it empties the cache,
 * retries once, and returns cudaErrorMemoryAllocation with *ptr NULL. */
typedef int (*ampc_cuda_malloc_fn)(size_t nbytes, void **ptr);
/* Returns a block to the cache.  Safe while queued work still uses it:
 * blocks are reused only by later work on the same stream. */
typedef int (*ampc_cuda_free_fn)(void *ptr);
/* Releases every cached block of every device to the driver. */
typedef int (*ampc_cuda_empty_cache_fn)(void);
/* Bytes the allocator holds from the driver on device `index` (in use plus
 * cached), and the driver's free and total bytes. */
typedef int (*ampc_cuda_memory_reserved_fn)(int index, int64_t *reserved);
typedef int (*ampc_cuda_mem_info_fn)(int index, size_t *free_bytes,
                                     size_t *total_bytes);
/* Pinned (page-locked) host memory, for DataLoader(pin_memory=True). */
typedef int (*ampc_cuda_host_alloc_fn)(size_t nbytes, void **host_ptr);
typedef int (*ampc_cuda_host_free_fn)(void *host_ptr);
/* nbytes from src to dst; see ampc_copy_kind for which calls wait. */
typedef int (*ampc_cuda_memcpy_fn)(void *dst, const void *src, size_t nbytes,
                                   ampc_copy_kind kind);
/* Strided device-to-device copy with a cast: it->data[0] (dtype ddt) =
 * it->data[1] (dtype sdt), every operand a device pointer. */
typedef int (*ampc_cuda_copy_fn)(ampc_dtype sdt, ampc_dtype ddt,
                                 const ampc_iter *it);
/* Every element of the one-operand iteration it (operand 0, dtype dt) =
 * the value whose bytes are the first ampc_dtype_size[dt] bytes of
 * value_bits in memory (memcpy them in, the rest zero).  The value
 * travels as a kernel argument, so a captured CUDA graph keeps it and no
 * host memory is read later. */
typedef int (*ampc_cuda_fill_fn)(ampc_dtype dt, const ampc_iter *it,
                                 uint64_t value_bits);
/* Waits for all work queued on device `index`. */
typedef int (*ampc_cuda_synchronize_fn)(int index);
/* "file:line: call: text" of this thread's last failed check. */
typedef const char *(*ampc_cuda_last_error_fn)(void);

// ----------------------------------------------------------------------------
// GEMM and convolution (cuda/blas.cu, cuda/dnn.cu, cuda/conv_gemm.cu,
// cuda/bias.cu)

/* The CPU gemm (kernels.h ampc_gemm_args, every field meaning what it means
 * there) through cuBLASLt, or cuBLAS where Lt has no algorithm.  Float32
 * operands use TF32 tensor cores only when allow_tf32 is nonzero
 * (ampc.backends.cuda.matmul.allow_tf32). */
typedef int (*ampc_cuda_gemm_fn)(const ampc_gemm_args *g, int allow_tf32);

/* ampc.backends.cudnn's flags, as the conv slots see them. */
typedef struct {
    int enabled;            /* 0: im2col + GEMM instead of cuDNN */
    int benchmark;          /* choose algorithms by timing them (cudnnFind) */
    int deterministic;      /* only algorithms with reproducible results */
    int allow_tf32;         /* float32 convolutions may use TF32 */
} ampc_cudnn_opts;

/* The CPU conv2d slots' meanings (kernels.h), through cuDNN (or, when
 * opts->enabled is 0 or the build has no cuDNN, im2col and the gemm slot);
 * every tensor contiguous NCHW.  cuDNN's algorithm is chosen once per
 * shape, dtype, direction and opts, then cached (see conv2d_algo_cache). */
typedef int (*ampc_cuda_conv2d_fwd_fn)(const ampc_conv2d_shape *s,
                                       ampc_dtype dt, const void *x,
                                       const void *w, const void *bias,
                                       int relu, void *y,
                                       const ampc_cudnn_opts *o);
typedef int (*ampc_cuda_conv2d_bwd_input_fn)(const ampc_conv2d_shape *s,
                                             ampc_dtype dt, const void *dy,
                                             const void *w, void *dx,
                                             const ampc_cudnn_opts *o);
typedef int (*ampc_cuda_conv2d_bwd_weight_fn)(const ampc_conv2d_shape *s,
                                              ampc_dtype dt, const void *dy,
                                              const void *x, void *dw,
                                              void *db,
                                              const ampc_cudnn_opts *o);
/* The conv algorithm cache of every device: entries, and lookups that
 * found (hits) or had to choose (misses) an algorithm; emptied first when
 * clear is nonzero.  Host only, never waits. */
typedef int (*ampc_cuda_conv2d_algo_cache_fn)(int clear, int64_t *entries,
                                              int64_t *hits,
                                              int64_t *misses);
/* cuDNN's run-time version (cudnnGetVersion(): 90100 is 9.1.0), 0 when
 * the build has no cuDNN.  Host only. */
typedef int (*ampc_cuda_cudnn_version_fn)(int64_t *version);
/* db (C) = the sums of dy (outer, C, inner) over outer and inner, in
 * float32 with a fixed order (deterministic), rounded once; zeros when
 * outer * inner == 0.  Conv: (N, OC, OH*OW); linear: (M, OUT, 1). */
typedef int (*ampc_cuda_bias_grad_fn)(ampc_dtype dt, int64_t outer,
                                      int64_t c, int64_t inner,
                                      const void *dy, void *db);

// ----------------------------------------------------------------------------
// CUDA graphs (cuda/graph.cu)

/* A captured graph: its executable graph, its private memory pool and the
 * device it was captured on (graph.cu owns the fields). */
typedef struct ampc_cuda_graph ampc_cuda_graph;
/* Starts capturing the work this thread queues on the current device's
 * ampc stream into a new graph *graph.  Until graph_capture_end, this
 * thread's allocations come from the graph's private memory pool: a new
 * pool when share_pool is NULL, else share_pool (another graph's, from
 * graph_pool), which the graphs then share.  On failure *graph is NULL and
 * nothing is left to free. */
typedef int (*ampc_cuda_graph_capture_begin_fn)(void *share_pool,
                                                ampc_cuda_graph **graph);
/* Ends the capture and instantiates the graph.  On failure the capture is
 * over all the same (graph_destroy still frees *graph). */
typedef int (*ampc_cuda_graph_capture_end_fn)(ampc_cuda_graph *graph);
/* Queues one replay of the graph on the ampc stream of its device. */
typedef int (*ampc_cuda_graph_replay_fn)(ampc_cuda_graph *graph);
/* Frees the graph (ending a capture still in progress); its pool goes back
 * to the cache once no graph shares it.  NULL is a no-op. */
typedef int (*ampc_cuda_graph_destroy_fn)(ampc_cuda_graph *graph);
/* The graph's memory pool (opaque), for graph_capture_begin(share_pool). */
typedef int (*ampc_cuda_graph_pool_fn)(const ampc_cuda_graph *graph,
                                       void **pool);
/* *capturing = 1 while the current device's ampc stream is being captured
 * (so a host read must be refused), else 0. */
typedef int (*ampc_cuda_graph_capturing_fn)(int *capturing);

// ----------------------------------------------------------------------------
// CUDA events (cuda/event.cu; Python side in csrc/cuda_event.c)

/* *event = a new event on the current device; timing 0 makes it a
 * synchronisation-only event (cheaper), blocking 1 makes a host wait on it
 * sleep instead of spin. */
typedef int (*ampc_cuda_event_create_fn)(int timing, int blocking,
                                         void **event);
/* Frees an event (pending work that records it still completes). */
typedef int (*ampc_cuda_event_destroy_fn)(void *event);
/* Records the event on the current device's ampc stream. */
typedef int (*ampc_cuda_event_record_fn)(void *event);
/* Makes the current device's ampc stream wait for the event's last record
 * (a device-side wait: the host does not block). */
typedef int (*ampc_cuda_event_wait_fn)(void *event);
/* *done = 1 when the work before the event's last record has finished. */
typedef int (*ampc_cuda_event_query_fn)(void *event, int *done);
/* Blocks the host until the work before the event's last record is done. */
typedef int (*ampc_cuda_event_synchronize_fn)(void *event);
/* *ms = the milliseconds between two completed timing events' records. */
typedef int (*ampc_cuda_event_elapsed_fn)(void *start, void *end,
                                          float *ms);

// ----------------------------------------------------------------------------
// element-wise ops, reductions and random numbers (cuda/elementwise.cu,
// cuda/where.cu, cuda/reduce.cu, cuda/random.cu; Python side in
// csrc/ops_elementwise.c, csrc/ops_where.c, csrc/ops_reduce.c and
// csrc/ops_random.c)

/* A Python number (or 0-d tensor) operand of a binary op or comparison,
 * passed BY VALUE: the CPU path's 0-d stand-in points at a host buffer,
 * which a kernel cannot read.  pos says which operand it is; the iteration
 * then has two operands (0 the output, 1 the tensor). */
typedef struct {
    int pos;            /* 0: none (three iterator operands); 1: the scalar
                         * is the first operand (scalar OP x); 2: the
                         * second (x OP scalar) */
    double f;           /* the value for a float compute dtype: already
                         * what the CPU computes with (rounded to the dtype,
                         * or float32 "opmath" for float16/bfloat16) */
    int64_t i;          /* the value for int64 and bool (0/1) */
    const float *dev_f32;   /* not NULL: a float32 value in device memory
                             * (a 0-d CUDA tensor in float16/bfloat16
                             * opmath), read by the kernel instead of f */
} ampc_cuda_scalar;

/* it->data[0] (dtype dt) = a OP b, the inputs it->data[1], it->data[2]
 * (dtype dt; stride 0 broadcasts), or one of them `scalar`.  Float16 and
 * bfloat16 compute in float32, int64 wraps, bool as the CPU's binary. */
typedef int (*ampc_cuda_binary_fn)(ampc_binary_op op, ampc_dtype dt,
                                   const ampc_iter *it,
                                   const ampc_cuda_scalar *scalar);
/* As binary, the output bool. */
typedef int (*ampc_cuda_compare_fn)(ampc_compare_op op, ampc_dtype dt,
                                    const ampc_iter *it,
                                    const ampc_cuda_scalar *scalar);
/* it->data[0] = OP(it->data[1]); output bool for AMPC_UN_ISFINITE, else
 * dtype dt. */
typedef int (*ampc_cuda_unary_fn)(ampc_unary_op op, ampc_dtype dt,
                                  const ampc_iter *it);
/* where's operands in host memory (a Python number, or a CPU 0-d tensor
 * beside CUDA ones), passed BY VALUE: bit k of `host` (0 condition, 1
 * input, 2 other) says that iterator operand k + 1 is not read and every
 * element of it is the value whose bytes start bits[k] (memcpy'd in, the
 * rest zero). */
typedef struct {
    unsigned host;
    uint64_t bits[3];
} ampc_cuda_where_values;

/* it->data[0] = it->data[1] (bool) ? it->data[2] : it->data[3], broadcast
 * (stride 0) as the iteration says, or host values (v): the CPU where slot
 * (kernels.h ampc_where_fn) over a whole iteration, elements of es bytes
 * copied bit for bit. */
typedef int (*ampc_cuda_where_fn)(size_t es, const ampc_iter *it,
                                  const ampc_cuda_where_values *v);

/* kernels.h ampc_lerp_fn over a whole iteration (cuda/lerp.cu): its
 * operands are out, start, end and, when it->nops == 4, weight, all of the
 * float dtype dt in device memory (broadcast ones at stride 0); with three
 * operands every element takes the weight `scalar`. */
typedef int (*ampc_cuda_lerp_fn)(ampc_dtype dt, const ampc_iter *it,
                                 float scalar);
/* The CPU's ampc_reduce_fn on device memory: x contiguous (outer, r, inner)
 * -> out (outer, inner), idx (outer, inner); deterministic (fixed
 * combining order, no atomics), NaN wins, first index on ties. */
typedef int (*ampc_cuda_reduce_fn)(ampc_reduce_op op, ampc_dtype dt,
                                   int64_t outer, int64_t r, int64_t inner,
                                   const void *x, void *out, int64_t *idx);
/* The CPU's ampc_random_fn on device memory: the same bits as the CPU for
 * the same (seed, offset) (csrc/philox.h).  offset_base is NULL, or (in a
 * CUDA graph being captured) the device pair {offset, seed}: when the
 * kernel runs, its offset is added to `offset` and its seed replaces
 * `seed`, so that each replay draws from the generator as it is then. */
typedef int (*ampc_cuda_random_fn)(ampc_random_kind kind, ampc_dtype dt,
                                   int64_t n, void *out, uint64_t seed,
                                   uint64_t offset,
                                   const uint64_t *offset_base, double lo,
                                   double hi);

/* kernels.h ampc_index_gather_fn / ampc_index_put_fn on device memory
 * (cuda/index.cu).  An index outside [-size, size) is skipped (gather
 * writes 0) and reported (ampc_nn_error); accumulation is atomic, so the
 * order of the adds to one element is unspecified. */
typedef int (*ampc_cuda_index_gather_fn)(const ampc_index_geom *g,
                                         size_t es, const void *t,
                                         const int64_t *idx, void *v);
typedef int (*ampc_cuda_index_put_fn)(const ampc_index_geom *g,
                                      ampc_dtype dt, int accumulate, void *t,
                                      const int64_t *idx, const void *v);
/* The deterministic forms (use_deterministic_algorithms): the writes
 * sorted by destination (CUB's stable radix sort), then each destination
 * element written by one thread in the original order, as the CPU: an
 * accumulation adds in order of j, a put keeps the last write; scatter's
 * float sum, mean and prod combine in index order (the CPU's bits).  Bad
 * indices are skipped and reported (ampc_nn_error). */
typedef int (*ampc_cuda_index_put_sorted_fn)(const ampc_index_geom *g,
                                             ampc_dtype dt, int accumulate,
                                             void *t, const int64_t *idx,
                                             const void *v);
typedef int (*ampc_cuda_scatter_reduce_sorted_fn)(const ampc_scatter_geom *g,
                                                  ampc_dtype dt,
                                                  ampc_scatter_op op,
                                                  void *t,
                                                  const int64_t *idx,
                                                  const void *src);
/* kernels.h ampc_scatter_reduce_fn on device memory (cuda/scatter.cu): the
 * values an element receives are combined by atomics (atomicAdd for sum
 * and mean, a compare-and-swap loop for prod, amax and amin), in no set
 * order; an index outside [0, dim_size) is skipped and reported
 * (ampc_nn_error). */
typedef int (*ampc_cuda_scatter_reduce_fn)(const ampc_scatter_geom *g,
                                           ampc_dtype dt, ampc_scatter_op op,
                                           void *t, const int64_t *idx,
                                           const void *src, int64_t *count);
/* kernels.h ampc_scan_fn on device memory (cuda/scan.cu): float32 runs
 * in double and float16/bfloat16 in float32 as on the CPU, but a long row
 * is scanned by a block in a tree order, so float sums may differ from
 * the CPU's in the last bits. */
typedef int (*ampc_cuda_scan_fn)(ampc_scan_op op, ampc_dtype dt,
                                 int64_t outer, int64_t n, int64_t inner,
                                 const void *x, void *out);
/* sort, argsort and topk on device memory (cuda/sort.cu): x (rows, n)
 * contiguous lines -> values (rows, k) of dt (NULL: argsort) and indices
 * (rows, k), the first k <= n of each line stably sorted in sort_math.h's
 * order (the CPU's), ascending or descending (topk's largest).  A
 * segmented radix sort of the whole lines; scratch from the caching
 * allocator. */
typedef int (*ampc_cuda_sort_fn)(ampc_dtype dt, int descending, int64_t rows,
                                 int64_t n, int64_t k, const void *x,
                                 void *values, int64_t *indices);
/* nonzero in two steps around the one host read of the count:
 * nonzero_count splits the n bools at mask into tiles of AMPC_NONZERO_TILE
 * and writes each tile's first output row to offsets[0, tiles) and the
 * total to offsets[tiles] (device memory); nonzero then writes the
 * coordinates (kernels.h ampc_nonzero_fn) from those offsets. */
#define AMPC_NONZERO_TILE 4096
typedef int (*ampc_cuda_nonzero_count_fn)(int64_t n, const uint8_t *mask,
                                          int64_t *offsets);
typedef int (*ampc_cuda_nonzero_fn)(int ndim, const int64_t *shape,
                                    int64_t n, const uint8_t *mask,
                                    const int64_t *offsets, int64_t *out);

// ----------------------------------------------------------------------------
// AMP: the fused multi-tensor unscale-and-check, the scale update, the
// gradient norm and the clip coefficient (cuda/amp.cu; Python side in
// csrc/amp_ops.c and csrc/grad_scaler.c).  Every scalar they read or write
// (the scale, inv_scale, found_inf, the tracker, the norm) stays in device
// memory, so none of them makes the host wait.

/* amp_unscale flags */
#define AMPC_AMP_RECIPROCAL 1   /* *inv_scale holds the scale s: multiply by
                                 * float(1 / double(s)), GradScaler's rule */
#define AMPC_AMP_ZERO_FOUND 2   /* *found_inf = 0 first (queued memset) */
#define AMPC_AMP_CHECK_ONLY 4   /* inv = 1 (inv_scale is not read and may be
                                 * NULL): the inf/NaN check alone */

/* l: float32/float16/bfloat16 tensors (the host arrays of ampc_tensor_list
 * hold device pointers), x <- x * inv in place as the CPU slot
 * ampc_amp_unscale_fn (amp_math.h ampc_amp_unscale_one; inv == 1 writes
 * nothing), inv = *inv_scale (a device float) or, with AMPC_AMP_RECIPROCAL,
 * float(1 / double(*inv_scale)), or 1 with AMPC_AMP_CHECK_ONLY;
 * *found_inf (device) = 1.0f when an input element is inf or NaN, never
 * cleared (unless AMPC_AMP_ZERO_FOUND);
 * counts (device, l->n entries) or NULL: zeroed, then filled.  The tensors
 * must not overlap one another (callers run aliasing ones a call each). */
typedef int (*ampc_cuda_amp_unscale_fn)(const ampc_tensor_list *l,
                                        const float *inv_scale, int flags,
                                        float *found_inf,
                                        ampc_amp_counts *counts);

/* The device-side telemetry of GradScaler.update() (int64 entries of the
 * stats array passed to amp_update_scale). */
#define AMPC_AMP_STAT_FUSED_SKIPPED 0   /* fused optimizer steps skipped */
#define AMPC_AMP_STAT_LAST_SKIPPED 1    /* the last update saw found != 0 */
#define AMPC_AMP_STAT_CONSECUTIVE 2     /* update()s in a row with found */
#define AMPC_AMP_NUM_STATS 3

/* _amp_update_scale_ on the device (one thread): found = the sum of the
 * n_found >= 1 device floats *found_infs[i] (found_infs: a host array of
 * device pointers), written into *found_infs[0] (PyTorch sums into its
 * first found_inf); then amp_math.h ampc_amp_update_scale_one(scale,
 * tracker, found, ...).  stats (device, AMPC_AMP_NUM_STATS int64) or NULL:
 * when found != 0, fused_steps is added to FUSED_SKIPPED; LAST_SKIPPED and
 * CONSECUTIVE follow found.
 * NOTE: found is the sum over every optimizer, so with several fused
 * optimizers one overflow counts all of their steps as skipped. */
typedef int (*ampc_cuda_amp_update_scale_fn)(float *scale, int64_t *tracker,
                                             float *const *found_infs,
                                             int n_found,
                                             double growth_factor,
                                             double backoff_factor,
                                             int64_t growth_interval,
                                             int64_t *stats,
                                             int64_t fused_steps);

/* clip_grad_norm_'s total norm of l (device pointers; every tensor n > 0
 * elements unless p is finite), as csrc/grad_norm_ops.c computes it on the
 * CPU (PyTorch's _get_total_norm): per-tensor accumulators in double from
 * fixed pieces folded in order (deterministic), each tensor's norm rounded
 * to its dtype, the norm of those written to *total (device, one element
 * of the float dtype out_dt).  scale (one device float, or NULL): the
 * tensors are scaled gradients and each tensor's norm is unscaled before
 * it is rounded (GradScaler.clip_grad_norm_).  amp_reduce.h has the
 * per-value math. */
typedef int (*ampc_cuda_grad_norm_fn)(const ampc_tensor_list *l, double p,
                                      const float *scale, ampc_dtype out_dt,
                                      void *total);

/* *coef (device float) = amp_reduce.h ampc_clip_coef(norm_dt, *total_norm,
 * max_norm), total_norm one device element of the float dtype norm_dt;
 * with scale (one device float, or NULL) ampc_clip_multiplier's unscale-
 * and-clip multiplier instead. */
typedef int (*ampc_cuda_clip_coef_fn)(const void *total_norm,
                                      ampc_dtype norm_dt, double max_norm,
                                      const float *scale, float *coef);

// ----------------------------------------------------------------------------
// NN kernels and fused optimizer steps (cuda/relu.cu, cuda/pool.cu,
// cuda/softmax.cu, cuda/loss.cu, cuda/dropout.cu, cuda/optim.cu; Python side
// in csrc/nn_ops.c and csrc/optim_ops.c).  Every tensor is contiguous; the
// per-element math is csrc/nn_math.h's, as on the CPU.

/* The deferred error report of the NN kernels: one mapped, pinned host
 * record (shared by every device) that a kernel fills, instead of reading
 * out of bounds, when it meets a class target outside [0, C) or a pooling
 * index outside its plane.  The kernel writes value, bound and kind, then
 * (after a system fence) state = 1; csrc/nn_ops.c reads state without a
 * sync at its next CUDA NN op and raises then (and clears it), so a
 * training step never waits for the GPU to validate its targets. */
typedef enum {
    AMPC_NN_ERR_TARGET = 1,     /* a class target out of range */
    AMPC_NN_ERR_POOL_INDEX = 2, /* a max_pool2d index outside its plane */
    AMPC_NN_ERR_INDEX = 3       /* an advanced index outside its dim */
} ampc_nn_error_kind;

typedef struct {
    volatile int64_t state;     /* 0, or 1 once the fields below are set */
    int64_t value;              /* the bad target or index */
    int64_t bound;              /* C, H * W, or the indexed dim's size */
    int64_t kind;               /* ampc_nn_error_kind */
    int64_t claim;              /* 1 once a thread owns the fields above */
} ampc_nn_error;

/* *host = the record (allocated on first use). */
typedef int (*ampc_cuda_nn_error_fn)(ampc_nn_error **host);

/* kernels.h ampc_relu_bwd_fn on device memory */
typedef int (*ampc_cuda_relu_bwd_fn)(ampc_dtype dt, int64_t n,
                                     const void *grad_out, const void *out,
                                     void *grad_in);
/* kernels.h ampc_masked_scale_fn on device memory (mask: bool) */
typedef int (*ampc_cuda_masked_scale_fn)(ampc_dtype dt, int64_t n,
                                         const void *x, const uint8_t *mask,
                                         float scale, void *y);
/* kernels.h ampc_max_pool2d_fwd_fn on device memory */
typedef int (*ampc_cuda_max_pool2d_fwd_fn)(const ampc_pool2d_shape *s,
                                           ampc_dtype dt, const void *x,
                                           void *y, int64_t *idx);
/* grad_out (planes, OH, OW), idx -> grad_in (planes, H, W), each input
 * element the float32 sum, in output order, of the gradients whose index
 * points at it (the CPU's order, so float32 gives the CPU's bits).  With the
 * forward's geometry (s->kh > 0) each input element gathers from the
 * outputs whose window can hold it; without it (s->kh == 0), or when some
 * window holds no element (ceil_mode: its index lies outside it), one
 * thread per plane scans the plane's outputs.  No atomics: deterministic.
 * An index outside its plane is skipped (and reported: ampc_nn_error),
 * unless it is a relu_masked one (kernels.h ampc_pool2d_shape). */
typedef int (*ampc_cuda_max_pool2d_bwd_fn)(const ampc_pool2d_shape *s,
                                           ampc_dtype dt,
                                           const void *grad_out,
                                           const int64_t *idx,
                                           void *grad_in);
/* kernels.h ampc_avg_pool2d_fwd_fn / ampc_avg_pool2d_bwd_fn on device
 * memory, in the CPU's order of sums (so float32 gives the CPU's bits) */
typedef int (*ampc_cuda_avg_pool2d_fwd_fn)(const ampc_avg_pool2d_shape *s,
                                           ampc_dtype dt, const void *x,
                                           void *y);
typedef int (*ampc_cuda_avg_pool2d_bwd_fn)(const ampc_avg_pool2d_shape *s,
                                           ampc_dtype dt,
                                           const void *grad_out,
                                           void *grad_in);
/* interp.h ampc_interp_fwd_fn / ampc_interp_bwd_fn on device memory, in
 * the CPU's order of sums (so float32 gives the CPU's bits); the backward
 * gathers each input's outputs (no atomics: deterministic) */
typedef int (*ampc_cuda_interp_fwd_fn)(const ampc_interp_shape *s,
                                       ampc_dtype dt, const void *x,
                                       void *y);
typedef int (*ampc_cuda_interp_bwd_fn)(const ampc_interp_shape *s,
                                       ampc_dtype dt, const void *grad_out,
                                       void *grad_in);
/* kernels.h ampc_max_pool2d_gather_fn on device memory; an index outside
 * its plane gives 0 and is reported (ampc_nn_error). */
typedef int (*ampc_cuda_max_pool2d_gather_fn)(const ampc_pool2d_shape *s,
                                              size_t es, const void *x,
                                              const int64_t *idx, void *out);
/* kernels.h ampc_softmax_fwd_fn / ampc_softmax_bwd_fn on device memory */
typedef int (*ampc_cuda_softmax_fwd_fn)(int log, ampc_dtype xdt,
                                        ampc_dtype ydt, int64_t outer,
                                        int64_t r, int64_t inner,
                                        const void *x, void *y);
typedef int (*ampc_cuda_softmax_bwd_fn)(int log, ampc_dtype dt,
                                        int64_t outer, int64_t r,
                                        int64_t inner, const void *grad_y,
                                        const void *y, void *grad_x);

/* The class-index losses (nll_loss, cross_entropy), forward and backward,
 * reduced on the device: rows in double, summed by one block in a fixed
 * order (deterministic), no host round trip.  A row whose target is
 * neither ignore_index nor in [0, C) gets a NaN loss (a zero gradient) and
 * is reported through ampc_nn_error. */
typedef struct {
    ampc_class_loss_shape s;    /* N, C, ignore_index, label_smoothing */
    int reduction;              /* 0 'none', 1 'mean', 2 'sum' */
    ampc_dtype dt;              /* input, logp, weight, loss and grad */
    const void *input;          /* (N, C): nll and xent backward the log-
                                 * probabilities, xent forward the logits */
    const int64_t *target;      /* (N) */
    const void *weight;         /* (C), or NULL for ones */
    /* forward */
    void *logp;                 /* xent: (N, C) log_softmax of the logits */
    void *loss;                 /* (N) for 'none', else one element */
    float *total_weight;        /* one element: the sum of w[t] over the
                                 * rows not ignored (0 for 'none') */
    /* backward */
    const void *grad_out;       /* of gdt: (N) at grad_stride for 'none',
                                 * else one element */
    ampc_dtype gdt;
    int64_t grad_stride;
    const void *total_in;       /* 'mean': one element of tdt (device), or
                                 * NULL: then total_host, or recomputed
                                 * from target and weight when
                                 * total_recompute */
    ampc_dtype tdt;
    int total_recompute;
    double total_host;
    void *grad;                 /* (N, C) */
} ampc_cuda_class_loss_args;

typedef int (*ampc_cuda_class_loss_fn)(const ampc_cuda_class_loss_args *a);

/* mse_loss: x, t (n) -> out, (n) for reduction 0 ('none'), else one
 * element: the sum of (x - t)^2 in double (fixed order), divided by n for
 * 'mean' (0 / 0 = NaN when n == 0, as torch). */
typedef int (*ampc_cuda_mse_fwd_fn)(ampc_dtype dt, int64_t n, int reduction,
                                    const void *x, const void *t, void *out);
/* grad_x (n) = (scale * (x - t)) * g: for 'none' grad (n) of dt and scale
 * 2; else grad is one element of gdt and scale = 2 * grad (/ n for 'mean'),
 * formed on the device in double. */
typedef int (*ampc_cuda_mse_bwd_fn)(ampc_dtype dt, int64_t n, int reduction,
                                    const void *x, const void *t,
                                    const void *grad, ampc_dtype gdt,
                                    void *grad_x);

/* kernels.h ampc_sgd_step_fn / ampc_adam_step_fn on every parameter of
 * l, in one launch (Adam's step counters: one more before it): SGD's
 * state[0] is the momentum buffers (or NULL); Adam's state[0..2] are
 * exp_avg, exp_avg_sq and max_exp_avg_sq (NULL unless amsgrad), and its
 * counters are l->step (a->step is not read).  The args' grad_scale and
 * found_inf and the counters are device pointers (or NULL), so a step
 * needs no host sync and can be captured in a CUDA graph. */
typedef int (*ampc_cuda_sgd_step_fn)(const ampc_sgd_args *a, ampc_dtype dt,
                                     const ampc_optim_list *l);
typedef int (*ampc_cuda_adam_step_fn)(const ampc_adam_args *a,
                                      ampc_dtype dt,
                                      const ampc_optim_list *l);
/* kernels_optim.h ampc_rmsprop_step_fn / ampc_adagrad_step_fn likewise:
 * RMSprop's state[0..2] are square_avg, momentum_buffer and grad_avg (the
 * last two NULL where not kept), Adagrad's state[0] is sum; l->step the
 * counters (or NULL; a->step is not read), advanced by a launch before the
 * step's, from which Adagrad's kernel then forms -clr. */
typedef int (*ampc_cuda_rmsprop_step_fn)(const ampc_rmsprop_args *a,
                                         ampc_dtype dt,
                                         const ampc_optim_list *l);
typedef int (*ampc_cuda_adagrad_step_fn)(const ampc_adagrad_args *a,
                                         ampc_dtype dt,
                                         const ampc_optim_list *l);

// ----------------------------------------------------------------------------
// normalisation layers (cuda/norm.cu; Python side in csrc/nn_norm.c): the
// kernels.h batch norm and layer norm slots on device memory.  Batch norm
// runs a block per channel, which also updates that channel's running
// statistics on the device (no host sync); layer norm a warp per row, its
// weight and bias gradients summed per chunk of rows and folded in double
// in a fixed order (deterministic).

typedef int (*ampc_cuda_batch_norm_fwd_fn)(const ampc_batch_norm_shape *s,
                                           ampc_dtype xdt, ampc_dtype pdt,
                                           const void *x, const void *weight,
                                           const void *bias,
                                           void *running_mean,
                                           void *running_var, float *mean,
                                           float *invstd, void *y);
typedef int (*ampc_cuda_batch_norm_bwd_fn)(const ampc_batch_norm_shape *s,
                                           ampc_dtype xdt, ampc_dtype pdt,
                                           const void *grad_y, const void *x,
                                           const void *weight,
                                           const float *mean,
                                           const float *invstd, void *grad_x,
                                           void *grad_weight,
                                           void *grad_bias);
typedef int (*ampc_cuda_layer_norm_fwd_fn)(const ampc_layer_norm_shape *s,
                                           ampc_dtype xdt, ampc_dtype pdt,
                                           const void *x, const void *weight,
                                           const void *bias, float *mean,
                                           float *rstd, void *y);
typedef int (*ampc_cuda_layer_norm_bwd_fn)(const ampc_layer_norm_shape *s,
                                           ampc_dtype xdt, ampc_dtype pdt,
                                           const void *grad_y, const void *x,
                                           const void *weight,
                                           const float *mean,
                                           const float *rstd, void *grad_x,
                                           void *grad_weight,
                                           void *grad_bias);
/* group norm (cuda/group_norm.cu): a block per (sample, group); the
 * weight and bias gradients from per-(sample, channel) sums in scratch,
 * folded over the samples in order in double (deterministic). */
typedef int (*ampc_cuda_group_norm_fwd_fn)(const ampc_group_norm_shape *s,
                                           ampc_dtype xdt, ampc_dtype pdt,
                                           const void *x, const void *weight,
                                           const void *bias, float *mean,
                                           float *rstd, void *y);
typedef int (*ampc_cuda_group_norm_bwd_fn)(const ampc_group_norm_shape *s,
                                           ampc_dtype xdt, ampc_dtype pdt,
                                           const void *grad_y, const void *x,
                                           const void *weight,
                                           const float *mean,
                                           const float *rstd, void *grad_x,
                                           void *grad_weight,
                                           void *grad_bias);

// ----------------------------------------------------------------------------
// kernels_extra.h's kernels on device memory (cuda/scan.cu, cuda/histc.cu,
// cuda/adaptive_max_pool.cu, cuda/embedding_bag.cu), by stats_math.h's and
// avg_pool_math.h's rules, as on the CPU

/* cummax / cummin: a thread per line, or a block per long row scanning
 * (value, position) pairs with cub::BlockScan (the rule is associative) */
typedef int (*ampc_cuda_scan_minmax_fn)(int is_min, ampc_dtype dt,
                                        int64_t outer, int64_t n,
                                        int64_t inner, const void *x,
                                        void *values, int64_t *indices);
/* histc: per-block counts in shared memory (global ones for many bins),
 * added atomically into int64 counts, then rounded once */
typedef int (*ampc_cuda_histc_fn)(const ampc_histc_shape *s, ampc_dtype dt,
                                  const void *x, void *out);
/* adaptive_max_pool2d's forward: a thread per output */
typedef int (*ampc_cuda_adaptive_max_pool2d_fn)(const ampc_pool2d_shape *s,
                                                ampc_dtype dt, const void *x,
                                                void *y, int64_t *idx);
/* embedding_bag: a block per bag, threads over D.  An index outside
 * [0, num) is skipped and reported (ampc_nn_error); offsets are clamped to
 * [0, n].  The backward adds with float32 atomics (16-bit: into scratch,
 * rounded once), so its sums come in no set order. */
typedef int (*ampc_cuda_embedding_bag_fwd_fn)(const ampc_bag_shape *s,
                                              ampc_dtype dt,
                                              const void *weight,
                                              const int64_t *indices,
                                              const int64_t *offsets,
                                              const void *psw, void *out,
                                              int64_t *bag_size,
                                              int64_t *max_idx);
typedef int (*ampc_cuda_embedding_bag_bwd_fn)(const ampc_bag_shape *s,
                                              ampc_dtype dt,
                                              const void *grad,
                                              const int64_t *indices,
                                              const int64_t *offsets,
                                              const float *scale,
                                              const int64_t *bag_size,
                                              const int64_t *max_idx,
                                              void *grad_weight);

// ----------------------------------------------------------------------------
// the table: one slot per line of cuda_ops.def

typedef struct {
#define AMPC_CUDA_OP(name, fn_type) fn_type name;
#include "cuda_ops.def"
#undef AMPC_CUDA_OP
} ampc_cuda_table;

/* cuda/register.cu: fills every slot (CUDA builds only). */
void ampc_register_cuda(ampc_cuda_table *t);

#ifdef __cplusplus
}
#endif

#endif /* AMPC_KERNELS_CUDA_H */
