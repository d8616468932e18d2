/* reduce.c - sum, mean, max, min, argmax and argmin: the parts of
 * cpu/reduce_loops.h compiled for AVX-512 F/BW/VL; ampc_reduce_run splits
 * the work.
 */
#if defined(__x86_64__)

#include "cpu/reduce_loops.h"

// ----------------------------------------------------------------------------
// AVX-512

static AMPC_TARGET_AVX512 void
reduce_run_avx512(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t n,
                  ampc_red_partial *p)
{
    ampc_reduce_run_loop(&ampc_cvt_avx512, op, dt, x, n, p);
}

static AMPC_TARGET_AVX512 void
reduce_cols_avx512(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t r,
                   int64_t inner, int64_t ncols, void *out, int64_t *idx)
{
    ampc_reduce_cols_loop(&ampc_cvt_avx512, op, dt, x, r, inner, ncols, out,
                          idx);
}

static const ampc_reduce_parts reduce_parts_avx512 = {
    reduce_run_avx512, reduce_cols_avx512,
};

/* x (outer, r, inner) -> out (outer, inner), idx (outer, inner) */
void
ampc_reduce_avx512(ampc_reduce_op op, ampc_dtype dt, int64_t outer, int64_t r,
                   int64_t inner, const void *x, void *out, int64_t *idx)
{
    ampc_reduce_run(&reduce_parts_avx512, op, dt, outer, r, inner, x, out,
                    idx);
}

#endif /* __x86_64__ */
