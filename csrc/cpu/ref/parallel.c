/* parallel.c - the split over threads of the NN kernels and optimizer
 * steps: ampc_parallel_for hands each thread one contiguous range of items,
 * and every level's range function computes its items the same way, so the
 * split never changes a result.
 */
#include <omp.h>

#include "cpu/cpu.h"

// ----------------------------------------------------------------------------
// CPU reference

/* items [0, n), ranges of at least `grain` items */
void
ampc_parallel_for(int64_t n, int64_t grain, ampc_range_fn fn, void *ctx)
{
    if (n <= 0) {
        return;
    }
    if (grain < 1) {
        grain = 1;
    }
    int64_t parts = (n + grain - 1) / grain;
    /* no nested regions: inside one, this thread does it all */
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (parts > threads) {
        parts = threads;
    }
    if (parts <= 1) {
        fn(ctx, 0, n);
        return;
    }
#pragma omp parallel for num_threads((int)parts) schedule(static, 1)
    for (int64_t p = 0; p < parts; p++) {
        fn(ctx, n * p / parts, n * (p + 1) / parts);
    }
}
