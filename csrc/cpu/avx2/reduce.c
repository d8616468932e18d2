/* reduce.c - sum, mean, max, min, argmax and argmin: the parts of
 * cpu/reduce_loops.h compiled for AVX2 + FMA + F16C; ampc_reduce_run splits
 * the work.
 */
#if defined(__x86_64__)

#include "cpu/reduce_loops.h"

// ----------------------------------------------------------------------------
// AVX2

static AMPC_TARGET_AVX2 void
reduce_run_avx2(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t n,
                ampc_red_partial *p)
{
    ampc_reduce_run_loop(&ampc_cvt_avx2, op, dt, x, n, p);
}

static AMPC_TARGET_AVX2 void
reduce_cols_avx2(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t r,
                 int64_t inner, int64_t ncols, void *out, int64_t *idx)
{
    ampc_reduce_cols_loop(&ampc_cvt_avx2, op, dt, x, r, inner, ncols, out,
                          idx);
}

static const ampc_reduce_parts reduce_parts_avx2 = {
    reduce_run_avx2, reduce_cols_avx2,
};

/* x (outer, r, inner) -> out (outer, inner), idx (outer, inner) */
void
ampc_reduce_avx2(ampc_reduce_op op, ampc_dtype dt, int64_t outer, int64_t r,
                 int64_t inner, const void *x, void *out, int64_t *idx)
{
    ampc_reduce_run(&reduce_parts_avx2, op, dt, outer, r, inner, x, out,
                    idx);
}

#endif /* __x86_64__ */
