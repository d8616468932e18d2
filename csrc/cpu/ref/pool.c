/* pool.c - max_pool2d forward (values and indices) and backward (the
 * gradients scattered to the indices): the bodies of cpu/nn_loops.h compiled
 * for the baseline ISA.
 */
#include "cpu/nn_loops.h"

// ----------------------------------------------------------------------------
// CPU reference

static void
max_pool2d_fwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_max_pool2d_fwd_range(&ampc_cvt_ref, ctx, b, e);
}

static void
max_pool2d_bwd_range(void *ctx, int64_t b, int64_t e)
{
    ampc_max_pool2d_bwd_range(&ampc_cvt_ref, ctx, b, e);
}

/* x (planes, H, W) -> y (planes, OH, OW), idx (planes, OH, OW) */
void
ampc_max_pool2d_fwd_ref(const ampc_pool2d_shape *s, ampc_dtype dt,
                        const void *x, void *y, int64_t *idx)
{
    ampc_max_pool2d_fwd_launch(max_pool2d_fwd_range, s, dt, x, y, idx);
}

typedef struct {
    const ampc_pool2d_shape *s;
    size_t es;
    const char *x;
    const int64_t *idx;
    char *out;
    int status;
} gather_ctx;

static void
max_pool2d_gather_range(void *ctx, int64_t b, int64_t e)
{
    gather_ctx *c = ctx;
    const ampc_pool2d_shape *s = c->s;
    int64_t hw = s->h * s->w, ohw = s->oh * s->ow;
    size_t es = c->es;
    int status = AMPC_NN_OK;
    for (int64_t p = b; p < e; p++) {
        const char *plane = c->x + (size_t)(p * hw) * es;
        const int64_t *ix = c->idx + p * ohw;
        char *o = c->out + (size_t)(p * ohw) * es;
        for (int64_t k = 0; k < ohw; k++) {
            int64_t at = ix[k];
            /* unsigned: a negative index is out of range too */
            if ((uint64_t)at < (uint64_t)hw) {
                memcpy(o + (size_t)k * es, plane + (size_t)at * es, es);
                continue;
            }
            memset(o + (size_t)k * es, 0, es);      /* +0 in every dtype */
            if (!ampc_pool_masked_ok(at, hw, s->relu_masked)) {
                status = AMPC_NN_BAD_INDEX;
            }
        }
    }
    if (status != AMPC_NN_OK) {
#pragma omp atomic write
        c->status = status;
    }
}

/* x (planes, H, W), idx (planes, OH, OW) -> out (planes, OH, OW) */
int
ampc_max_pool2d_gather_ref(const ampc_pool2d_shape *s, size_t es,
                           const void *x, const int64_t *idx, void *out)
{
    gather_ctx c = {s, es, x, idx, out, AMPC_NN_OK};
    ampc_parallel_for(s->planes, ampc_nn_grain(s->oh * s->ow),
                      max_pool2d_gather_range, &c);
    return c.status;
}

/* grad_out (planes, OH, OW), idx (planes, OH, OW) -> grad_in (planes, H, W) */
int
ampc_max_pool2d_bwd_ref(const ampc_pool2d_shape *s, ampc_dtype dt,
                        const void *grad_out, const int64_t *idx,
                        void *grad_in)
{
    return ampc_max_pool2d_bwd_launch(max_pool2d_bwd_range, s, dt, grad_out,
                                      idx, grad_in);
}
