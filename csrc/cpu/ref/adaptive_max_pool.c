/* adaptive_max_pool.c - adaptive_max_pool2d's forward on the CPU
 * (kernels_extra.h ampc_adaptive_max_pool2d_fn): each output the max of
 * its adaptive window (avg_pool_math.h ampc_avg_window, the rule adaptive
 * average pooling uses too) by max_pool2d's rule (nn_math.h
 * ampc_pool_takes), both shared with cuda/adaptive_max_pool.cu.  The
 * backward is max_pool2d_bwd at the indices this stores.
 */
#include "avg_pool_math.h"
#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

typedef struct {
    const ampc_pool2d_shape *s;
    ampc_dtype dt;
    const char *x;
    char *y;
    int64_t *idx;
} adaptive_ctx;

/* Output row i of plane x: torch's CPU order (max from -inf, the first
 * element's index; row by row, a later element wins when greater or NaN).
 * dt is a constant at each call, so each dtype gets its own loop. */
static AMPC_ALWAYS_INLINE void
adaptive_row(ampc_dtype dt, const ampc_pool2d_shape *s, const char *x,
             int64_t i, char *y, int64_t *idx)
{
    size_t es = ampc_dtype_size[dt];
    ampc_avg_axis ah = {s->h, s->oh, 1, 1, 0};
    ampc_avg_axis aw = {s->w, s->ow, 1, 1, 0};
    int64_t h0, h1;
    ampc_avg_window(&ah, 1, 0, i, &h0, &h1);
    for (int64_t j = 0; j < s->ow; j++) {
        int64_t w0, w1;
        ampc_avg_window(&aw, 1, 0, j, &w0, &w1);
        int64_t best_i = h0 * s->w + w0;
        float best = -INFINITY;
        for (int64_t ih = h0; ih < h1; ih++) {
            const char *row = x + ih * s->w * (int64_t)es;
            for (int64_t iw = w0; iw < w1; iw++) {
                float v = ampc_load_f32(dt, row + iw * (int64_t)es);
                if (ampc_pool_takes(v, best)) {
                    best = v;
                    best_i = ih * s->w + iw;
                }
            }
        }
        ampc_store_f64(dt, y + j * (int64_t)es, best);
        idx[j] = best_i;
    }
}

/* items: planes * OH output rows */
static void
adaptive_range(void *ctx, int64_t b, int64_t e)
{
    const adaptive_ctx *c = ctx;
    const ampc_pool2d_shape *s = c->s;
    size_t es = ampc_dtype_size[c->dt];
    for (int64_t item = b; item < e; item++) {
        int64_t p = item / s->oh, i = item % s->oh;
        const char *x = c->x + p * s->h * s->w * (int64_t)es;
        char *y = c->y + item * s->ow * (int64_t)es;
        int64_t *idx = c->idx + item * s->ow;
        if (c->dt == AMPC_FLOAT32) {
            adaptive_row(AMPC_FLOAT32, s, x, i, y, idx);
        }
        else if (c->dt == AMPC_FLOAT16) {
            adaptive_row(AMPC_FLOAT16, s, x, i, y, idx);
        }
        else {
            adaptive_row(AMPC_BFLOAT16, s, x, i, y, idx);
        }
    }
}

/* x (planes, H, W) -> y, idx (planes, OH, OW) */
void
ampc_adaptive_max_pool2d_ref(const ampc_pool2d_shape *s, ampc_dtype dt,
                             const void *x, void *y, int64_t *idx)
{
    adaptive_ctx c = {s, dt, x, y, idx};
    /* a window spans about ceil(H / OH) x ceil(W / OW) elements */
    int64_t work = s->ow * ((s->h + s->oh - 1) / s->oh + 1) *
                   ((s->w + s->ow - 1) / s->ow + 1);
    ampc_parallel_for(s->planes * s->oh, ampc_nn_grain(work),
                      adaptive_range, &c);
}
