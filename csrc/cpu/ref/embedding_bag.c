/* embedding_bag.c - embedding_bag's forward and backward on the CPU
 * (kernels_extra.h ampc_embedding_bag_fwd_fn / _bwd_fn).
 *
 * The forward splits the bags over threads; a bag sums (or takes the max
 * of) its weight rows into a float32 row, then rounds it once.  The
 * backward splits the rows of grad_weight over threads: each thread walks
 * every bag in order and adds only into its own rows, so no two threads
 * write one element and the sums do not depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/nn_loops.h"
#include "stats_math.h"

// ----------------------------------------------------------------------------
// CPU reference

typedef struct {
    const ampc_bag_shape *s;
    ampc_dtype dt;
    const void *weight;         /* backward: grad (bags, D) */
    const int64_t *indices, *offsets;
    const void *psw;
    const float *scale;
    void *out;                  /* backward: grad_weight */
    int64_t *bag_size;
    const int64_t *bag_size_in;
    int64_t *max_idx;
    const int64_t *max_idx_in;
    float *acc;                 /* backward, 16-bit: float32 grad_weight */
    int status;
} bag_ctx;

/* d elements of dt at p widened into f */
static AMPC_ALWAYS_INLINE void
bag_load_row(ampc_dtype dt, const char *p, int64_t d, float *f)
{
    if (dt == AMPC_FLOAT32) {
        memcpy(f, p, (size_t)d * sizeof(float));
    }
    else if (dt == AMPC_FLOAT16) {
        ampc_cvt_ref.f16_to_f32(d, (const uint16_t *)p, f);
    }
    else {
        ampc_cvt_ref.bf16_to_f32(d, (const uint16_t *)p, f);
    }
}

/* f (d) rounded once into d elements of dt at p */
static AMPC_ALWAYS_INLINE void
bag_store_row(ampc_dtype dt, const float *f, int64_t d, char *p)
{
    if (dt == AMPC_FLOAT32) {
        memcpy(p, f, (size_t)d * sizeof(float));
    }
    else if (dt == AMPC_FLOAT16) {
        ampc_cvt_ref.f32_to_f16(d, f, (uint16_t *)p);
    }
    else {
        ampc_cvt_ref.f32_to_bf16(d, f, (uint16_t *)p);
    }
}

/* rows looked up ahead: their loads overlap the current row's adds (a
 * big table's rows are cache misses) */
#define BAG_PREFETCH 16

/* Starts loading the weight row of index k (when k < end, in range) */
static AMPC_ALWAYS_INLINE void
bag_prefetch(const bag_ctx *c, int64_t k, int64_t end)
{
    if (k >= end) {
        return;
    }
    int64_t r = c->indices[k];
    if ((uint64_t)r >= (uint64_t)c->s->num) {
        return;
    }
    size_t bytes = (size_t)c->s->d * ampc_dtype_size[c->dt];
    const char *p = (const char *)c->weight + (size_t)r * bytes;
    for (size_t off = 0; off < bytes; off += 64) {
        __builtin_prefetch(p + off);
    }
}

/* items: bags */
static void
bag_fwd_range(void *ctx, int64_t b0, int64_t b1)
{
    bag_ctx *c = ctx;
    const ampc_bag_shape *s = c->s;
    int64_t d = s->d;
    size_t es = ampc_dtype_size[c->dt];
    float *buf = malloc(2 * (size_t)d * sizeof(float));
    if (buf == NULL) {
#pragma omp atomic update
        c->status |= AMPC_NN_NO_MEMORY;
        return;
    }
    float *acc = buf, *row = buf + d;
    int status = AMPC_NN_OK;
    for (int64_t b = b0; b < b1; b++) {
        int64_t count = 0;
        int64_t *mi = c->max_idx != NULL ? c->max_idx + b * d : NULL;
        memset(acc, 0, (size_t)d * sizeof(float));
        if (mi != NULL) {
            for (int64_t k = 0; k < d; k++) {
                mi[k] = -1;
            }
        }
        for (int64_t k = c->offsets[b]; k < c->offsets[b + 1]; k++) {
            int64_t r = c->indices[k];
            if ((uint64_t)r >= (uint64_t)s->num) {
                status |= AMPC_NN_BAD_INDEX;
                continue;
            }
            if (r == s->padding_idx) {
                continue;
            }
            bag_prefetch(c, k + BAG_PREFETCH, c->offsets[b1]);
            const float *src = row;
            if (c->dt == AMPC_FLOAT32) {
                src = (const float *)c->weight + r * d;
            }
            else {
                bag_load_row(c->dt, (const char *)c->weight + r * d * es, d,
                             row);
            }
            if (mi != NULL) {
                int first = count == 0;
                for (int64_t e = 0; e < d; e++) {
                    int take = ampc_bag_max_takes(first, src[e], acc[e]);
                    acc[e] = take ? src[e] : acc[e];
                    mi[e] = take ? r : mi[e];
                }
            }
            else {
                float w = c->psw == NULL
                              ? 1.0f
                              : ampc_load_f32(c->dt, (const char *)c->psw +
                                                         k * es);
                for (int64_t e = 0; e < d; e++) {
                    acc[e] += w * src[e];
                }
            }
            count++;
        }
        if (s->mode == AMPC_BAG_MEAN && count > 0) {
            float n = (float)count;
            for (int64_t e = 0; e < d; e++) {
                acc[e] /= n;
            }
        }
        c->bag_size[b] = count;
        bag_store_row(c->dt, acc, d, (char *)c->out + b * d * es);
    }
    free(buf);
    if (status != AMPC_NN_OK) {
#pragma omp atomic update
        c->status |= status;
    }
}

/* weight (num, D), indices (n), offsets (bags + 1) -> out (bags, D) */
int
ampc_embedding_bag_fwd_ref(const ampc_bag_shape *s, ampc_dtype dt,
                           const void *weight, const int64_t *indices,
                           const int64_t *offsets, const void *psw,
                           void *out, int64_t *bag_size, int64_t *max_idx)
{
    bag_ctx c = {.s = s, .dt = dt, .weight = weight, .indices = indices,
                 .offsets = offsets, .psw = psw, .out = out,
                 .bag_size = bag_size, .max_idx = max_idx,
                 .status = AMPC_NN_OK};
    int64_t per_bag = (s->bags > 0 ? s->n / s->bags + 1 : 1) * s->d;
    ampc_parallel_for(s->bags, ampc_nn_grain(per_bag), bag_fwd_range, &c);
    if (c.status & AMPC_NN_NO_MEMORY) {
        return AMPC_NN_NO_MEMORY;
    }
    return c.status ? AMPC_NN_BAD_INDEX : AMPC_NN_OK;
}

/* items: rows [r0, r1) of grad_weight; g (D) of dt widened per bag */
static void
bag_bwd_range(void *ctx, int64_t r0, int64_t r1)
{
    bag_ctx *c = ctx;
    const ampc_bag_shape *s = c->s;
    int64_t d = s->d;
    size_t es = ampc_dtype_size[c->dt];
    float *gw = c->acc != NULL ? c->acc : (float *)c->out;
    float *g = malloc((size_t)d * sizeof(float));
    if (g == NULL) {
#pragma omp atomic update
        c->status |= AMPC_NN_NO_MEMORY;
        return;
    }
    memset(gw + r0 * d, 0, (size_t)((r1 - r0) * d) * sizeof(float));
    const char *grad = c->weight;
    for (int64_t b = 0; b < s->bags; b++) {
        const int64_t *mi = c->max_idx_in;
        if (mi != NULL) {
            const char *gb = grad + b * d * (int64_t)es;
            for (int64_t e = 0; e < d; e++) {
                int64_t r = mi[b * d + e];
                if (r >= r0 && r < r1) {
                    gw[r * d + e] += ampc_load_f32(c->dt, gb + e * es);
                }
            }
            continue;
        }
        int loaded = 0;
        const float *gb = g;
        for (int64_t k = c->offsets[b]; k < c->offsets[b + 1]; k++) {
            int64_t r = c->indices[k];
            if (k + BAG_PREFETCH < s->n) {
                int64_t ahead = c->indices[k + BAG_PREFETCH];
                if (ahead >= r0 && ahead < r1) {
                    for (int64_t e = 0; e < d; e += 16) {
                        __builtin_prefetch(gw + ahead * d + e, 1);
                    }
                }
            }
            if (r < r0 || r >= r1 || r == s->padding_idx) {
                continue;
            }
            if (!loaded && c->dt == AMPC_FLOAT32) {
                gb = (const float *)grad + b * d;
                loaded = 1;
            }
            else if (!loaded) {
                bag_load_row(c->dt, grad + b * d * (int64_t)es, d, g);
                loaded = 1;
            }
            float f = c->scale != NULL ? c->scale[k] : 1.0f;
            if (s->mode == AMPC_BAG_MEAN) {
                f /= (float)c->bag_size_in[b];
            }
            float *dst = gw + r * d;
            for (int64_t e = 0; e < d; e++) {
                dst[e] += f * gb[e];
            }
        }
    }
    if (c->acc != NULL) {
        bag_store_row(c->dt, gw + r0 * d, (r1 - r0) * d,
                      (char *)c->out + r0 * d * (int64_t)es);
    }
    free(g);
}

/* grad (bags, D) -> grad_weight (num, D) */
int
ampc_embedding_bag_bwd_ref(const ampc_bag_shape *s, ampc_dtype dt,
                           const void *grad, const int64_t *indices,
                           const int64_t *offsets, const float *scale,
                           const int64_t *bag_size, const int64_t *max_idx,
                           void *grad_weight)
{
    bag_ctx c = {.s = s, .dt = dt, .weight = grad, .indices = indices,
                 .offsets = offsets, .scale = scale, .out = grad_weight,
                 .bag_size_in = bag_size, .max_idx_in = max_idx,
                 .status = AMPC_NN_OK};
    if (dt != AMPC_FLOAT32) {
        c.acc = malloc((size_t)(s->num * s->d) * sizeof(float));
        if (c.acc == NULL && s->num * s->d > 0) {
            return AMPC_NN_NO_MEMORY;
        }
    }
    /* each thread scans every bag for its rows: one range per thread when
     * that is worth it, else one range */
    int64_t work = s->d * (s->n + s->bags);
    int64_t grain = work >= AMPC_NN_GRAIN || s->num < 1 ? 1 : s->num;
    ampc_parallel_for(s->num, grain, bag_bwd_range, &c);
    free(c.acc);
    return c.status & AMPC_NN_NO_MEMORY ? AMPC_NN_NO_MEMORY : AMPC_NN_OK;
}
