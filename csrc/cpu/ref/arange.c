/* arange.c - out[i] = start + i * step, computed in double and rounded once
 * to the dtype.
 */
#include "cpu/loops.h"

#define AMPC_ARANGE_PARALLEL 65536  /* fewer elements: one thread */

// ----------------------------------------------------------------------------
// CPU reference

/* out (n) contiguous */
void
ampc_arange_ref(ampc_dtype dt, int64_t n, void *out, double start,
                double step)
{
    int64_t es = (int64_t)ampc_dtype_size[dt];
    int64_t i;

#pragma omp parallel for schedule(static) if (n >= AMPC_ARANGE_PARALLEL)
    for (i = 0; i < n; i++) {
        ampc_store_f64(dt, (char *)out + i * es, start + (double)i * step);
    }
}
