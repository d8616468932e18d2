/* ampc_cuda.h - the entry points that the C side (csrc/) may call in the
 * CUDA part of ampc._C.  Plain C: no CUDA header is included here, so C files
 * can include this one without nvcc.  Only compiled in when setup.py defines
 * AMPC_WITH_CUDA.
 *
 * Error codes: functions return 0 or an error code, which is one of
 *   - a cudaError_t value (1 .. 0xFFFF),
 *   - AMPC_CUBLAS_ERROR_BASE + a cublasStatus_t value,
 *   - AMPC_CUDNN_ERROR_BASE + a cudnnStatus_t value,
 * so that one int carries all three libraries' codes without overlap.
 * ampc_cuda_error_string() names any of them; ampc_cuda_last_error() adds the
 * file:line of the check that failed.
 */
#ifndef AMPC_CUDA_H
#define AMPC_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AMPC_CUBLAS_ERROR_BASE 0x10000
#define AMPC_CUDNN_ERROR_BASE 0x20000

// ----------------------------------------------------------------------------
// device queries (device.cu)

/* Number of usable CUDA devices; 0 when there is no GPU or no driver (the
 * failure is cleared, so a CUDA build runs as CPU-only on such a machine). */
int ampc_cuda_device_count(void);

/* CUDA versions as 1000 * major + 10 * minor (13000 is 13.0); the driver's
 * is 0 when no driver is installed. */
int ampc_cuda_runtime_version(void);
int ampc_cuda_driver_version(void);

/* Writes device `index`'s name (NUL-terminated, truncated to `size`) into
 * buf; returns 0 or an error code. */
int ampc_cuda_device_name(int index, char *buf, size_t size);

/* Device `index`'s compute capability (9, 0 for an H200); 0 or an error
 * code. */
int ampc_cuda_device_capability(int index, int *major, int *minor);

/* Device `index`'s memory in bytes and its number of multiprocessors (132
 * on an H200); 0 or an error code. */
int ampc_cuda_device_memory(int index, size_t *total, int *sms);

/* This thread's current device as the user sees it: what
 * ampc.cuda.set_device() chose (ampc_cuda_select_device), else the
 * runtime's device when first asked (0).  Ops on a cuda:N tensor make N the
 * runtime's device for their kernels (ampc_cuda_enter) but do not change
 * this, so plain "cuda" keeps meaning the chosen device, as in PyTorch,
 * whose ops restore the device after them. */
int ampc_cuda_get_device(void);
/* Records `index` (already made current) as the user's device. */
void ampc_cuda_select_device(int index);

// ----------------------------------------------------------------------------
// allocator statistics (allocator.cu)

/* The peak of memory_reserved on device `index` since the last reset, and
 * the reset (to the current reserved bytes); 0 or an error code. */
int ampc_cuda_max_memory_reserved(int index, long long *peak);
int ampc_cuda_reset_peak_reserved(int index);

// ----------------------------------------------------------------------------
// errors (device.cu)

/* The text for an error code from any of the libraries above. */
const char *ampc_cuda_error_string(int code);

/* "file:line: call: text" for the most recent failed check in this thread,
 * or "" when none has failed.  Valid until the next failure in this thread. */
const char *ampc_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* AMPC_CUDA_H */
