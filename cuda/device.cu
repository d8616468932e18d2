/* device.cu - device queries and error reporting for the C side
 * (ampc_cuda.h).  Everything here must work on a machine with no GPU and no
 * driver: a CUDA build then imports and runs as CPU-only.
 */
#include <stdio.h>

#include "common.cuh"

// ----------------------------------------------------------------------------
// errors

/* Per thread, as cudaGetLastError() is: one thread's failure never shows up
 * in another's message. */
static thread_local char last_error[512];

void
ampc_cuda_record_error(const char *file, int line, const char *expr,
                       int code)
{
    snprintf(last_error, sizeof(last_error), "%s:%d: %s: %s", file, line,
             expr, ampc_cuda_error_string(code));
}

extern "C" const char *
ampc_cuda_last_error(void)
{
    return last_error;
}

extern "C" const char *
ampc_cuda_error_string(int code)
{
    if (code >= AMPC_CUDNN_ERROR_BASE) {
#ifdef AMPC_HAVE_CUDNN
        return cudnnGetErrorString(
            (cudnnStatus_t)(code - AMPC_CUDNN_ERROR_BASE));
#else
        return "cuDNN error (cuDNN was not found at build time)";
#endif /* AMPC_HAVE_CUDNN */
    }
    if (code >= AMPC_CUBLAS_ERROR_BASE) {
#if defined(AMPC_HAVE_CUBLAS)
        return cublasGetStatusString(
            (cublasStatus_t)(code - AMPC_CUBLAS_ERROR_BASE));
#elif defined(AMPC_HAVE_CUBLASLT)
        return cublasLtGetStatusString(
            (cublasStatus_t)(code - AMPC_CUBLAS_ERROR_BASE));
#else
        return "cuBLAS error (cuBLAS was not found at build time)";
#endif /* AMPC_HAVE_CUBLAS */
    }
    return cudaGetErrorString((cudaError_t)code);
}

// ----------------------------------------------------------------------------
// device queries

extern "C" int
ampc_cuda_device_count(void)
{
    int count = 0;
    /* No GPU (cudaErrorNoDevice) and no driver (cudaErrorInsufficientDriver)
     * both mean "no CUDA devices", not an error. */
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" int
ampc_cuda_runtime_version(void)
{
    int version = 0;
    if (cudaRuntimeGetVersion(&version) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return version;
}

extern "C" int
ampc_cuda_driver_version(void)
{
    int version = 0;
    if (cudaDriverGetVersion(&version) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return version;
}

extern "C" int
ampc_cuda_device_name(int index, char *buf, size_t size)
{
    cudaDeviceProp prop;
    AMPC_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    snprintf(buf, size, "%s", prop.name);
    return 0;
}
