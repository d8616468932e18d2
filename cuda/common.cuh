/* common.cuh - what every cuda/*.cu file shares: the CHECK macros, which
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

#include "ampc_cuda.h"

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

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
