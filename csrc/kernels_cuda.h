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
// cuda/copy.cu)

typedef enum {
    AMPC_COPY_H2D = 0,      /* queued; host memory must stay valid until the
                             * stream reaches it (pinned) or is copied at once
                             * (pageable: the call returns after staging) */
    AMPC_COPY_D2H,          /* waits: the host buffer is filled on return */
    AMPC_COPY_D2D           /* queued */
} ampc_copy_kind;

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
/* Waits for all work queued on device `index`. */
typedef int (*ampc_cuda_synchronize_fn)(int index);
/* "file:line: call: text" of this thread's last failed check. */
typedef const char *(*ampc_cuda_last_error_fn)(void);

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
