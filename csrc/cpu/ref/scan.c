/* scan.c - cumsum and cumprod on the CPU (kernels.h ampc_scan_fn): the
 * running sum or product along the middle axis of a contiguous
 * (outer, n, inner) array.
 *
 * The work is cut into tiles: one value of outer and up to SCAN_TILE
 * neighbouring columns of inner.  A tile walks down the dim keeping one
 * running value per column, so the inner loop runs over contiguous
 * columns (a scan along a leading dim vectorises), and a row scan
 * (inner == 1) is a tile of one column.  Each output is the same sequence
 * of operations whatever the thread count.
 */
#include "amp_math.h"
#include "cpu/cpu.h"

// ----------------------------------------------------------------------------
// CPU reference

#define SCAN_TILE 256
/* elements of work worth a thread */
#define SCAN_GRAIN 32768

typedef struct {
    ampc_scan_op op;
    ampc_dtype dt;
    int64_t n, inner, tiles_per_outer;
    const char *x;
    char *out;
} scan_ctx;

/* The tile's columns [i0, i0 + w) of outer index o, each running value in
 * acc (ACC) from the loaded element (LOAD(p, k)), stored by STORE(p, k, v). */
#define SCAN_TILE_LOOP(T, ACC, LOAD, STORE)                                   \
    do {                                                                      \
        const T *xp = (const T *)c->x + base;                                 \
        T *op_ = (T *)c->out + base;                                          \
        ACC acc[SCAN_TILE];                                                   \
        for (int64_t k = 0; k < w; k++) {                                     \
            acc[k] = sum ? (ACC)0 : (ACC)1;                                   \
        }                                                                     \
        for (int64_t j = 0; j < c->n; j++) {                                  \
            const T *xr = xp + j * c->inner;                                  \
            T *orow = op_ + j * c->inner;                                     \
            if (sum) {                                                        \
                for (int64_t k = 0; k < w; k++) {                             \
                    acc[k] = acc[k] + (ACC)LOAD(xr, k);                       \
                    STORE(orow, k, acc[k]);                                   \
                }                                                             \
            }                                                                 \
            else {                                                            \
                for (int64_t k = 0; k < w; k++) {                             \
                    acc[k] = acc[k] * (ACC)LOAD(xr, k);                       \
                    STORE(orow, k, acc[k]);                                   \
                }                                                             \
            }                                                                 \
        }                                                                     \
    } while (0)

#define LOAD_PLAIN(p, k) ((p)[k])
#define STORE_F32(p, k, v) ((p)[k] = (float)(v))
#define LOAD_F16(p, k) ampc_f16_to_f32((p)[k])
#define STORE_F16(p, k, v) ((p)[k] = ampc_f32_to_f16(v))
#define LOAD_BF16(p, k) ampc_bf16_to_f32((p)[k])
#define STORE_BF16(p, k, v) ((p)[k] = ampc_f32_to_bf16(v))
/* int64 wraps, as PyTorch's: computed in uint64_t, where overflow is
 * defined */
#define LOAD_I64(p, k) ((uint64_t)(p)[k])
#define STORE_I64(p, k, v) ((p)[k] = (int64_t)(v))

/* Rows (inner == 1) [r0, r0 + g), g <= SCAN_ROWS, side by side: the
 * running values of g rows are independent chains, so their adds overlap
 * where one row's chain would wait for each add in turn. */
#define SCAN_ROWS 8
#define SCAN_ROWS_LOOP(T, ACC, LOAD, STORE)                                   \
    do {                                                                      \
        const T *xp = (const T *)c->x + r0 * c->n;                            \
        T *op_ = (T *)c->out + r0 * c->n;                                     \
        ACC acc[SCAN_ROWS];                                                   \
        for (int64_t k = 0; k < SCAN_ROWS; k++) {                             \
            acc[k] = sum ? (ACC)0 : (ACC)1;                                   \
        }                                                                     \
        for (int64_t j = 0; j < c->n; j++) {                                  \
            for (int64_t k = 0; k < g; k++) {                                 \
                acc[k] = sum ? acc[k] + (ACC)LOAD(xp + k * c->n, j)           \
                             : acc[k] * (ACC)LOAD(xp + k * c->n, j);          \
                STORE(op_ + k * c->n, j, acc[k]);                             \
            }                                                                 \
        }                                                                     \
    } while (0)

static void
scan_rows(const scan_ctx *c, int64_t r0, int64_t g)
{
    int sum = c->op == AMPC_SCAN_SUM;
    switch (c->dt) {
    case AMPC_FLOAT32:
        SCAN_ROWS_LOOP(float, double, LOAD_PLAIN, STORE_F32);
        break;
    case AMPC_FLOAT16:
        SCAN_ROWS_LOOP(uint16_t, float, LOAD_F16, STORE_F16);
        break;
    case AMPC_BFLOAT16:
        SCAN_ROWS_LOOP(uint16_t, float, LOAD_BF16, STORE_BF16);
        break;
    default:
        SCAN_ROWS_LOOP(int64_t, uint64_t, LOAD_I64, STORE_I64);
        break;
    }
}

static void
scan_range(void *ctx, int64_t begin, int64_t end)
{
    const scan_ctx *c = ctx;
    int sum = c->op == AMPC_SCAN_SUM;
    if (c->inner == 1) {
        for (int64_t r = begin; r < end; r += SCAN_ROWS) {
            scan_rows(c, r, end - r < SCAN_ROWS ? end - r : SCAN_ROWS);
        }
        return;
    }
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / c->tiles_per_outer;
        int64_t i0 = (t % c->tiles_per_outer) * SCAN_TILE;
        int64_t w = c->inner - i0 < SCAN_TILE ? c->inner - i0 : SCAN_TILE;
        int64_t base = o * c->n * c->inner + i0;
        switch (c->dt) {
        case AMPC_FLOAT32:
            SCAN_TILE_LOOP(float, double, LOAD_PLAIN, STORE_F32);
            break;
        case AMPC_FLOAT16:
            SCAN_TILE_LOOP(uint16_t, float, LOAD_F16, STORE_F16);
            break;
        case AMPC_BFLOAT16:
            SCAN_TILE_LOOP(uint16_t, float, LOAD_BF16, STORE_BF16);
            break;
        default:
            SCAN_TILE_LOOP(int64_t, uint64_t, LOAD_I64, STORE_I64);
            break;
        }
    }
}

void
ampc_scan_ref(ampc_scan_op op, ampc_dtype dt, int64_t outer, int64_t n,
              int64_t inner, const void *x, void *out)
{
    if (outer == 0 || n == 0 || inner == 0) {
        return;
    }
    int64_t tiles = (inner + SCAN_TILE - 1) / SCAN_TILE;
    scan_ctx c = {op, dt, n, inner, tiles, (const char *)x, (char *)out};
    int64_t per_tile = n * (inner < SCAN_TILE ? inner : SCAN_TILE);
    int64_t grain = SCAN_GRAIN / per_tile > 1 ? SCAN_GRAIN / per_tile : 1;
    ampc_parallel_for(outer * tiles, grain, scan_range, &c);
}
