/* device.cu - device queries and error reporting for the C side
 * (ampc_cuda.h), the current device of each host thread (slot set_device),
 * the one ampc stream per device that all work is queued on, and the slots
 * synchronize, mem_info and last_error.  The queries must work on a machine
 * with no GPU and no driver: a CUDA build then imports and runs as
 * CPU-only.
 */
#include <stdio.h>

#include <atomic>
#include <mutex>

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

extern "C" int
ampc_mem_info_cuda(int index, size_t *free_bytes, size_t *total_bytes)
{
    int prev = ampc_cuda_current_device();
    int rc = ampc_set_device_cuda(index);
    if (rc != 0) {
        return rc;
    }
    cudaError_t err = cudaMemGetInfo(free_bytes, total_bytes);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        ampc_cuda_record_error(__FILE__, __LINE__, "cudaMemGetInfo",
                               (int)err);
    }
    rc = ampc_set_device_cuda(prev);
    return err != cudaSuccess ? (int)err : rc;
}

// ----------------------------------------------------------------------------
// the current device and the ampc stream of each device

/* NOTE: a cache of cudaGetDevice(): code outside ampc that calls
 * cudaSetDevice on this thread is not seen; ampc always goes through
 * ampc_set_device_cuda (ampc_cuda_enter), which sets the runtime's device
 * too, so the two agree for everything ampc queues. */
static thread_local int current_device = -1;
/* the device the user chose (ampc_cuda_get_device); -1 until set_device(),
 * the first ampc_cuda_get_device() or the first switch by an op */
static thread_local int user_device = -1;

static std::once_flag stream_once[AMPC_CUDA_MAX_DEVICES];
/* atomic: ampc_cuda_stream_if_created() reads them without the once_flag */
static std::atomic<cudaStream_t> streams[AMPC_CUDA_MAX_DEVICES];

int
ampc_cuda_current_device(void)
{
    if (current_device < 0) {
        int d = 0;
        if (cudaGetDevice(&d) != cudaSuccess) {
            (void)cudaGetLastError();
            d = 0;
        }
        current_device = d;
    }
    return current_device;
}

extern "C" int
ampc_set_device_cuda(int index)
{
    /* checked first: on a thread that has not asked yet, current_device
     * is still -1, which must not pass for a valid index */
    if (index < 0 || index >= AMPC_CUDA_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "set_device(index)",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    if (index == current_device) {
        return 0;
    }
    if (user_device < 0) {
        /* before an op moves the runtime's device: what "cuda" meant */
        user_device = ampc_cuda_current_device();
    }
    AMPC_CUDA_CHECK(cudaSetDevice(index));
    current_device = index;
    return 0;
}

cudaStream_t
ampc_cuda_stream(void)
{
    int d = ampc_cuda_current_device();
    /* Non-blocking: it never waits for the legacy default stream (which
     * would also make graph capture fail).  Created once per device, by
     * whichever thread gets there first; the device is current here. */
    std::call_once(stream_once[d], [d]() {
        cudaStream_t s = nullptr;
        cudaError_t err = cudaStreamCreateWithFlags(&s,
                                                    cudaStreamNonBlocking);
        if (err != cudaSuccess) {
            /* NOTE: falls back to the legacy default stream, which is
             * correct (it orders everything) but cannot be captured; the
             * failure is kept for the next error message. */
            (void)cudaGetLastError();
            ampc_cuda_record_error(__FILE__, __LINE__,
                                   "cudaStreamCreateWithFlags", (int)err);
            s = nullptr;
        }
        streams[d].store(s, std::memory_order_release);
    });
    return streams[d].load(std::memory_order_relaxed);
}

cudaStream_t
ampc_cuda_stream_if_created(int index)
{
    if (index < 0 || index >= AMPC_CUDA_MAX_DEVICES) {
        return nullptr;
    }
    /* NULL when no thread has created it yet: then nothing of ampc's can
     * be queued there */
    return streams[index].load(std::memory_order_acquire);
}

extern "C" int
ampc_synchronize_cuda(int index)
{
    int count = ampc_cuda_device_count();
    if (index < 0 || index >= count || index >= AMPC_CUDA_MAX_DEVICES) {
        ampc_cuda_record_error(__FILE__, __LINE__, "synchronize(index)",
                               (int)cudaErrorInvalidDevice);
        return (int)cudaErrorInvalidDevice;
    }
    int prev = ampc_cuda_current_device();
    int rc = ampc_set_device_cuda(index);
    if (rc != 0) {
        return rc;
    }
    /* The device's ampc stream, created if need be, so that a sticky error
     * of this device is reported here too. */
    cudaError_t err = cudaStreamSynchronize(ampc_cuda_stream());
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        ampc_cuda_record_error(__FILE__, __LINE__, "cudaStreamSynchronize",
                               (int)err);
    }
    rc = ampc_set_device_cuda(prev);
    return err != cudaSuccess ? (int)err : rc;
}

extern "C" const char *
ampc_last_error_cuda(void)
{
    return ampc_cuda_last_error();
}

extern "C" int
ampc_cuda_device_capability(int index, int *major, int *minor)
{
    AMPC_CUDA_CHECK(cudaDeviceGetAttribute(
        major, cudaDevAttrComputeCapabilityMajor, index));
    AMPC_CUDA_CHECK(cudaDeviceGetAttribute(
        minor, cudaDevAttrComputeCapabilityMinor, index));
    return 0;
}

extern "C" int
ampc_cuda_device_memory(int index, size_t *total, int *sms)
{
    /* the device's property, as torch reads it: no context is needed,
     * where cudaMemGetInfo would create one on that device */
    cudaDeviceProp prop;
    AMPC_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    *total = prop.totalGlobalMem;
    *sms = prop.multiProcessorCount;
    return 0;
}

extern "C" int
ampc_cuda_get_device(void)
{
    if (user_device < 0) {
        user_device = ampc_cuda_current_device();
    }
    return user_device;
}

extern "C" void
ampc_cuda_select_device(int index)
{
    user_device = index;
}
