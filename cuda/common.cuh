/* common.cuh - what every .cu file in cuda/ shares: the CHECK macros, which
 * record where a call failed and *return* its error code (never exit), and
 * small helpers.  The cuBLAS(Lt) and cuDNN parts exist only when setup.py
 * found those libraries and defined AMPC_HAVE_CUBLAS / AMPC_HAVE_CUBLASLT /
 * AMPC_HAVE_CUDNN.
 */
#ifndef AMPC_COMMON_CUH
#define AMPC_COMMON_CUH

#include <cuda_runtime.h>

#ifdef AMPC_HAVE_CUBLAS
#include <cublas_v2.h>
#endif /* AMPC_HAVE_CUBLAS */
#ifdef AMPC_HAVE_CUBLASLT
#include <cublasLt.h>
#endif /* AMPC_HAVE_CUBLASLT */
#ifdef AMPC_HAVE_CUDNN
#include <cudnn.h>
#endif /* AMPC_HAVE_CUDNN */

#include <type_traits>

#include "ampc_cuda.h"
#include "kernels_cuda.h"

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

/* Every slot's implementation, ampc_<name>_cuda, declared with its slot's
 * type (register.cu fills the table with them). */
#define AMPC_CUDA_OP(name, fn_type) \
    extern "C" std::remove_pointer_t<fn_type> ampc_##name##_cuda;
#include "cuda_ops.def"
#undef AMPC_CUDA_OP

// ----------------------------------------------------------------------------
// what the .cu files share (device.cu, allocator.cu)

/* The ampc stream of the current device, created on first use: every
 * kernel, copy, cuBLAS and cuDNN call is queued on it.  A non-default
 * stream, so that a whole training step can be captured in a CUDA graph. */
cudaStream_t ampc_cuda_stream(void);
/* The current device's index (cached per host thread). */
int ampc_cuda_current_device(void);
/* Scratch memory (cuDNN and cuBLASLt workspaces, partial sums) from the
 * caching allocator, counted as reserved but not as tensor memory. */
int ampc_cuda_scratch_alloc(size_t nbytes, void **ptr);
int ampc_cuda_scratch_free(void *ptr);
/* Private memory pools for CUDA graphs (allocator.cu).  Between pool_begin
 * and pool_end, this thread's allocations come from the pool `*pool` (a
 * new one when *pool is NULL on entry, else that one: graphs sharing memory)
 * and every block freed (whatever pool it came from) is kept by that pool,
 * so a captured graph's memory is never handed to other work; pool_release
 * (when the graph is destroyed) returns the pool's blocks to the cache. */
int ampc_cuda_pool_begin(void **pool);
int ampc_cuda_pool_end(void);
int ampc_cuda_pool_release(void *pool);
/* Device indices ampc handles (allocator and stream tables). */
#define AMPC_CUDA_MAX_DEVICES 64
/* Device `index`'s ampc stream if it has been created, else NULL (nothing
 * of ampc's was queued there); creates nothing (device.cu). */
cudaStream_t ampc_cuda_stream_if_created(int index);
/* Frees the idle cached pinned host blocks (pinned.cu; empty_cache). */
int ampc_cuda_host_empty_cache(void);
/* Whether [p, p + n) lies inside one of ampc's pinned blocks (pinned.cu). */
bool ampc_cuda_host_is_pinned(const void *p, size_t n);

/* Remembers "file:line: expr: text" of a failed call for
 * ampc_cuda_last_error() (device.cu). */
void ampc_cuda_record_error(const char *file, int line, const char *expr,
                            int code);

// ----------------------------------------------------------------------------
// CHECK macros: use them in functions that return int (0 or an error code)

/* NOTE: cudaGetLastError() after a failure clears the runtime's last-error
 * slot, so a later, unrelated check does not report this error again.  Sticky
 * errors (a kernel fault) stay: every later call fails, as it must. */
#define AMPC_CUDA_CHECK(call)                                            \
    do {                                                                 \
        cudaError_t ampc_err_ = (call);                                  \
        if (ampc_err_ != cudaSuccess) {                                  \
            (void)cudaGetLastError();                                    \
            ampc_cuda_record_error(__FILE__, __LINE__, #call,            \
                                   (int)ampc_err_);                      \
            return (int)ampc_err_;                                       \
        }                                                                \
    } while (0)

/* After a kernel launch: a bad launch configuration is reported at once;
 * faults inside the kernel surface at the next synchronising call. */
#define AMPC_CUDA_CHECK_LAUNCH() AMPC_CUDA_CHECK(cudaGetLastError())

/* cuBLAS and cuBLASLt share cublasStatus_t. */
#if defined(AMPC_HAVE_CUBLAS) || defined(AMPC_HAVE_CUBLASLT)
#define AMPC_CUBLAS_CHECK(call)                                          \
    do {                                                                 \
        cublasStatus_t ampc_st_ = (call);                                \
        if (ampc_st_ != CUBLAS_STATUS_SUCCESS) {                         \
            int ampc_code_ = AMPC_CUBLAS_ERROR_BASE + (int)ampc_st_;     \
            ampc_cuda_record_error(__FILE__, __LINE__, #call,            \
                                   ampc_code_);                          \
            return ampc_code_;                                           \
        }                                                                \
    } while (0)
#endif /* AMPC_HAVE_CUBLAS || AMPC_HAVE_CUBLASLT */

#ifdef AMPC_HAVE_CUDNN
#define AMPC_CUDNN_CHECK(call)                                           \
    do {                                                                 \
        cudnnStatus_t ampc_st_ = (call);                                 \
        if (ampc_st_ != CUDNN_STATUS_SUCCESS) {                          \
            int ampc_code_ = AMPC_CUDNN_ERROR_BASE + (int)ampc_st_;      \
            ampc_cuda_record_error(__FILE__, __LINE__, #call,            \
                                   ampc_code_);                          \
            return ampc_code_;                                           \
        }                                                                \
    } while (0)
#endif /* AMPC_HAVE_CUDNN */

#endif /* AMPC_COMMON_CUH */
