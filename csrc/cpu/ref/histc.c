/* histc.c - torch.histc on the CPU (kernels_extra.h ampc_histc_fn): each
 * thread counts its chunk of the elements into its own int64 bins
 * (stats_math.h's bin rule, shared with cuda/histc.cu), the chunks' counts
 * are added up, and each count is rounded once to the output's dtype.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "elementwise_math.h"
#include "stats_math.h"

// ----------------------------------------------------------------------------
// CPU reference

/* elements worth a thread */
#define HISTC_GRAIN 32768

typedef struct {
    const ampc_histc_shape *s;
    ampc_dtype dt;
    const char *x;
    int64_t *counts;
    int failed;
} histc_ctx;

/* The bins of x[b:e] into counts, T the storage type, LOAD(v) its float. */
#define HISTC_LOOP(T, LOAD)                                                   \
    do {                                                                      \
        const T *xp = (const T *)c->x;                                        \
        for (int64_t i = b; i < e; i++) {                                     \
            int64_t pos = ampc_histc_bin(c->dt, LOAD(xp[i]), s->lo, s->hi,    \
                                         s->bins);                            \
            if (pos >= 0) {                                                   \
                local[pos]++;                                                 \
            }                                                                 \
        }                                                                     \
    } while (0)

static void
histc_range(void *ctx, int64_t b, int64_t e)
{
    histc_ctx *c = ctx;
    const ampc_histc_shape *s = c->s;
    int64_t *local = calloc((size_t)s->bins, sizeof(int64_t));
    if (local == NULL) {
#pragma omp atomic write
        c->failed = 1;
        return;
    }
    switch (c->dt) {
    case AMPC_FLOAT32:
        HISTC_LOOP(float, (float));
        break;
    case AMPC_FLOAT16:
        HISTC_LOOP(uint16_t, ampc_f16_to_f32);
        break;
    default:
        HISTC_LOOP(uint16_t, ampc_bf16_to_f32);
        break;
    }
    for (int64_t k = 0; k < s->bins; k++) {
        if (local[k] != 0) {
#pragma omp atomic update
            c->counts[k] += local[k];
        }
    }
    free(local);
}

int
ampc_histc_ref(const ampc_histc_shape *s, ampc_dtype dt, const void *x,
               void *out)
{
    int64_t *counts = calloc((size_t)s->bins, sizeof(int64_t));
    if (counts == NULL) {
        return -1;
    }
    histc_ctx c = {s, dt, (const char *)x, counts, 0};
    ampc_parallel_for(s->n, HISTC_GRAIN, histc_range, &c);
    size_t es = ampc_dtype_size[dt];
    for (int64_t k = 0; k < s->bins; k++) {
        ampc_store_f64(dt, (char *)out + k * es, (double)counts[k]);
    }
    free(counts);
    return c.failed ? -1 : 0;
}
