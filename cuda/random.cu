/* random.cu - uniform, normal, integer and Bernoulli draws on the GPU from
 * the counter-based generator of csrc/philox.h: element i is a function of
 * (seed, offset + i) alone, computed with the very code the CPU runs, so a
 * CUDA tensor equals a CPU tensor drawn with the same seed, bit for bit.
 */
#include "common.cuh"
#include "philox.h"

#define RAND_THREADS 256
#define RAND_MAX_BLOCKS 8192

// ----------------------------------------------------------------------------
// CUDA kernels

/* out (n) contiguous.  One thread per Philox block: counter c (from
 * offset >> shift on) yields the 4 (or, for INT, 2) elements g = (c <<
 * shift) + j, of which those with i = g - offset < n are stored at out[i].
 * offset_base (NULL, or the device pair {offset, seed} set before each
 * graph replay) adds its offset to `offset` and replaces `seed`, so each
 * replay draws from the generator's state at replay time.
 * NOTE: unsigned arithmetic throughout, so an offset near 2^64 wraps as on
 * the CPU. */
__global__ void
random_kernel(ampc_random_kind kind, ampc_dtype dt, size_t es, uint64_t n,
              char *__restrict__ out, uint64_t seed, uint64_t offset,
              const uint64_t *__restrict__ offset_base, double lo,
              double hi, uint64_t ncounters)
{
    if (offset_base != nullptr) {
        offset += offset_base[0];
        seed = offset_base[1];
    }
    const int shift = ampc_philox_shift(kind);
    const uint64_t c0 = offset >> shift;
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
         t < ncounters; t += step) {
        /* the CPU's counter is g >> shift of the wrapped g: keep c to
         * 64 - shift bits, so c << shift below loses nothing */
        uint64_t c = (c0 + t) & (~(uint64_t)0 >> shift);
        uint32_t w[4];
        ampc_philox_block(kind, seed, c, w);
        for (int j = 0; j < (1 << shift); j++) {
            uint64_t g = (c << shift) + (uint64_t)j;
            uint64_t i = g - offset;
            if (i < n) {
                ampc_rand_draw(kind, dt, out + i * es, g, w, lo, hi);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// the slot

/* out (n) contiguous, dtype dt */
extern "C" int
ampc_random_cuda(ampc_random_kind kind, ampc_dtype dt, int64_t n, void *out,
                 uint64_t seed, uint64_t offset, const uint64_t *offset_base,
                 double lo, double hi)
{
    if (n <= 0) {
        return 0;
    }
    int shift = ampc_philox_shift(kind);
    uint64_t mask = ((uint64_t)1 << shift) - 1;
    /* the counters that cover n elements from the offset; with a base
     * unknown here, from the worst-aligned start */
    uint64_t lead = offset_base != nullptr ? mask : (offset & mask);
    uint64_t ncounters = (lead + (uint64_t)n + mask) >> shift;
    uint64_t blocks = CEIL_DIV(ncounters, (uint64_t)RAND_THREADS);
    blocks = blocks > RAND_MAX_BLOCKS ? RAND_MAX_BLOCKS : blocks;
    random_kernel<<<(unsigned)blocks, RAND_THREADS, 0, ampc_cuda_stream()>>>(
        kind, dt, ampc_dtype_size[dt], (uint64_t)n, (char *)out, seed, offset,
        offset_base, lo, hi, ncounters);
    AMPC_CUDA_CHECK_LAUNCH();
    return 0;
}
