/* random.c - uniform, normal, integer and Bernoulli draws from Philox4x32-10
 * on the CPU: the generator and the transforms are csrc/philox.h, shared
 * with cuda/random.cu, so element i is a function of (seed, offset + i)
 * alone, whatever the thread count and whatever the device.
 */
#include "cpu/loops.h"
#include "philox.h"

#define AMPC_RAND_CHUNK 4096        /* elements per thread task */
#define AMPC_RAND_PARALLEL 16384    /* fewer elements: one thread */

// ----------------------------------------------------------------------------
// CPU reference

/* out (n) contiguous */
void
ampc_random_ref(ampc_random_kind kind, ampc_dtype dt, int64_t n, void *out,
                uint64_t seed, uint64_t offset, double lo, double hi)
{
    size_t es = ampc_dtype_size[dt];
    int shift = ampc_philox_shift(kind);
    int64_t nchunks = (n + AMPC_RAND_CHUNK - 1) / AMPC_RAND_CHUNK;
    int64_t c;

#pragma omp parallel for schedule(static) if (n >= AMPC_RAND_PARALLEL)
    for (c = 0; c < nchunks; c++) {
        int64_t i1 = (c + 1) * AMPC_RAND_CHUNK < n ? (c + 1) * AMPC_RAND_CHUNK
                                                   : n;
        uint32_t w[4] = {0, 0, 0, 0};
        uint64_t have = 0;
        int valid = 0;
        double rad = 0.0;
        for (int64_t i = c * AMPC_RAND_CHUNK; i < i1; i++) {
            uint64_t g = offset + (uint64_t)i;
            uint64_t ctr = g >> shift;
            char *p = (char *)out + i * (int64_t)es;
            if (!valid || ctr != have) {
                ampc_philox_block(kind, seed, ctr, w);
                have = ctr;
                valid = 1;
            }
            if (kind != AMPC_RAND_NORMAL) {
                ampc_rand_draw(kind, dt, p, g, w, lo, hi);
                continue;
            }
            /* the pair's radius once: at its first element, or at the
             * chunk's first element when that is a pair's second */
            if ((g & 1) == 0 || i == c * AMPC_RAND_CHUNK) {
                rad = ampc_rand_radius(g, w);
            }
            ampc_rand_normal_store(dt, p, g, w, rad, lo, hi);
        }
    }
}
