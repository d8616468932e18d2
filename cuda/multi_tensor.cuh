/* multi_tensor.cuh - what the multi-tensor kernels (amp.cu, optim.cu)
 * share: a launch covers a list of tensors with one block per chunk of a
 * tensor, and each block finds its tensor from the blocks that the tensors
 * before it own.  The launch metadata travels in the kernel's parameters
 * (CUDA 12.1+ allows 32 KB on sm_70+): no host-to-device copy, and a CUDA
 * graph captures it by value.
 */
#ifndef AMPC_MULTI_TENSOR_CUH
#define AMPC_MULTI_TENSOR_CUH

#include <stdint.h>

/* The tensor that owns block b, given that tensor t of the n owns blocks
 * [first_block[t], first_block[t + 1]): the last t with first_block[t] <=
 * b (a binary search; the same answer for the whole block). */
__device__ __forceinline__ int
mt_block_tensor(const int32_t *first_block, int n, int32_t b)
{
    int lo = 0, hi = n;                 /* first_block[hi] > b */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (first_block[mid] <= b) {
            lo = mid;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

#endif /* AMPC_MULTI_TENSOR_CUH */
