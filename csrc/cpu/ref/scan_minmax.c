/* scan_minmax.c - cummax and cummin on the CPU (kernels_extra.h
 * ampc_scan_minmax_fn): the running max or min along the middle axis of a
 * contiguous (outer, n, inner) array, with the position it came from, by
 * stats_math.h's rule (shared with cuda/scan.cu).
 *
 * As scan.c: the work is cut into tiles of one value of outer and up to
 * MINMAX_TILE neighbouring columns of inner, each walking down the dim with
 * one running value per column, so the inner loop runs over contiguous
 * columns; a row (inner == 1) keeps its running value in locals.  Values
 * are copied, never converted back, so every dtype keeps its bits; float16
 * and bfloat16 compare exactly in float32.
 */
#include "cpu/cpu.h"
#include "elementwise_math.h"
#include "stats_math.h"

// ----------------------------------------------------------------------------
// CPU reference

#define MINMAX_TILE 256
/* elements of work worth a thread */
#define MINMAX_GRAIN 32768

typedef struct {
    int is_min;
    ampc_dtype dt;
    int64_t n, inner, tiles_per_outer;
    const char *x;
    char *values;
    int64_t *indices;
} minmax_ctx;

/* The tile's columns [i0, i0 + w) from element offset base: T the storage
 * type, V the compared type, LOAD(p) a V from a T, TAKES(x, best). */
#define MINMAX_TILE_LOOP(T, V, LOAD, TAKES)                                   \
    do {                                                                      \
        const T *xp = (const T *)c->x + base;                                 \
        T *vp = (T *)c->values + base;                                        \
        int64_t *ip = c->indices + base;                                      \
        V best[MINMAX_TILE];                                                  \
        T best_raw[MINMAX_TILE];                                              \
        int64_t at[MINMAX_TILE];                                              \
        for (int64_t k = 0; k < w; k++) {                                     \
            best_raw[k] = xp[k];                                              \
            best[k] = LOAD(xp[k]);                                            \
            at[k] = 0;                                                        \
        }                                                                     \
        for (int64_t j = 0; j < c->n; j++) {                                  \
            const T *xr = xp + j * c->inner;                                  \
            for (int64_t k = 0; k < w; k++) {                                 \
                V v = LOAD(xr[k]);                                            \
                if (TAKES(v, best[k])) {                                      \
                    best[k] = v;                                              \
                    best_raw[k] = xr[k];                                      \
                    at[k] = j;                                                \
                }                                                             \
                vp[j * c->inner + k] = best_raw[k];                           \
                ip[j * c->inner + k] = at[k];                                 \
            }                                                                 \
        }                                                                     \
    } while (0)

/* One row (inner == 1) at element offset base: the running value in
 * locals, taken over without branches (the chain of compares is the only
 * dependence). */
#define MINMAX_ROW_LOOP(T, V, LOAD, TAKES)                                    \
    do {                                                                      \
        const T *xr = (const T *)c->x + base;                                 \
        T *vr = (T *)c->values + base;                                        \
        int64_t *ir = c->indices + base;                                      \
        T raw = xr[0];                                                        \
        V best = LOAD(raw);                                                   \
        int64_t at = 0;                                                       \
        for (int64_t j = 0; j < c->n; j++) {                                  \
            V v = LOAD(xr[j]);                                                \
            int take = TAKES(v, best);                                        \
            best = take ? v : best;                                           \
            raw = take ? xr[j] : raw;                                         \
            at = take ? j : at;                                               \
            vr[j] = raw;                                                      \
            ir[j] = at;                                                       \
        }                                                                     \
    } while (0)

#define LOAD_F32(v) (v)
#define LOAD_F16(v) ampc_f16_to_f32(v)
#define LOAD_BF16(v) ampc_bf16_to_f32(v)
#define LOAD_INT(v) ((int64_t)(v))
#define TAKES_F(v, b) ampc_cummax_takes(c->is_min, (v), (b))
#define TAKES_I(v, b) ampc_cummax_takes_i64(c->is_min, (v), (b))

static void
minmax_rows(const minmax_ctx *c, int64_t begin, int64_t end)
{
    for (int64_t base = begin * c->n; base < end * c->n; base += c->n) {
        switch (c->dt) {
        case AMPC_FLOAT32:
            MINMAX_ROW_LOOP(float, float, LOAD_F32, TAKES_F);
            break;
        case AMPC_FLOAT16:
            MINMAX_ROW_LOOP(uint16_t, float, LOAD_F16, TAKES_F);
            break;
        case AMPC_BFLOAT16:
            MINMAX_ROW_LOOP(uint16_t, float, LOAD_BF16, TAKES_F);
            break;
        case AMPC_INT64:
            MINMAX_ROW_LOOP(int64_t, int64_t, LOAD_INT, TAKES_I);
            break;
        default:
            MINMAX_ROW_LOOP(uint8_t, int64_t, LOAD_INT, TAKES_I);
            break;
        }
    }
}

static void
minmax_range(void *ctx, int64_t begin, int64_t end)
{
    const minmax_ctx *c = ctx;
    if (c->inner == 1) {            /* a tile is a row */
        minmax_rows(c, begin, end);
        return;
    }
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / c->tiles_per_outer;
        int64_t i0 = (t % c->tiles_per_outer) * MINMAX_TILE;
        int64_t w = c->inner - i0 < MINMAX_TILE ? c->inner - i0
                                                : MINMAX_TILE;
        int64_t base = o * c->n * c->inner + i0;
        switch (c->dt) {
        case AMPC_FLOAT32:
            MINMAX_TILE_LOOP(float, float, LOAD_F32, TAKES_F);
            break;
        case AMPC_FLOAT16:
            MINMAX_TILE_LOOP(uint16_t, float, LOAD_F16, TAKES_F);
            break;
        case AMPC_BFLOAT16:
            MINMAX_TILE_LOOP(uint16_t, float, LOAD_BF16, TAKES_F);
            break;
        case AMPC_INT64:
            MINMAX_TILE_LOOP(int64_t, int64_t, LOAD_INT, TAKES_I);
            break;
        default:
            MINMAX_TILE_LOOP(uint8_t, int64_t, LOAD_INT, TAKES_I);
            break;
        }
    }
}

void
ampc_scan_minmax_ref(int is_min, ampc_dtype dt, int64_t outer, int64_t n,
                     int64_t inner, const void *x, void *values,
                     int64_t *indices)
{
    if (outer == 0 || n == 0 || inner == 0) {
        return;
    }
    int64_t tiles = (inner + MINMAX_TILE - 1) / MINMAX_TILE;
    minmax_ctx c = {is_min, dt, n, inner, tiles, (const char *)x,
                    (char *)values, indices};
    int64_t per_tile = n * (inner < MINMAX_TILE ? inner : MINMAX_TILE);
    int64_t grain = MINMAX_GRAIN / per_tile > 1 ? MINMAX_GRAIN / per_tile
                                                : 1;
    ampc_parallel_for(outer * tiles, grain, minmax_range, &c);
}
