/* cpu.h - what the CPU kernel levels (ref, avx2, avx512) share: the target
 * attributes, the float16/bfloat16 converters each level brings, the parts
 * of the reduction that each level compiles for its ISA, and a prototype for
 * every CPU kernel variant, so that definitions and register.c agree.
 */
#ifndef AMPC_CPU_CPU_H
#define AMPC_CPU_CPU_H

#include <stdint.h>

#include "kernels.h"

// ----------------------------------------------------------------------------
// target attributes
//
// SIMD code is compiled per function, never per file and never with
// -march=native: the attribute works in gcc and clang alike, whereas clang
// ignores #pragma GCC target.  Untagged static inline helpers (loops.h) may be
// inlined into a tagged function and are then vectorised for its ISA.

#define AMPC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define AMPC_TARGET_AVX512 \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define AMPC_ALWAYS_INLINE inline __attribute__((always_inline))

// ----------------------------------------------------------------------------
// float16 / bfloat16 converters
//
// Contiguous runs of any length n >= 0.  Every level must agree bit for bit
// with amp_math.h (only a NaN's payload may differ; a NaN stays a NaN).

typedef struct {
    void (*f16_to_f32)(int64_t n, const uint16_t *src, float *dst);
    void (*f32_to_f16)(int64_t n, const float *src, uint16_t *dst);
    void (*bf16_to_f32)(int64_t n, const uint16_t *src, float *dst);
    void (*f32_to_bf16)(int64_t n, const float *src, uint16_t *dst);
} ampc_converters;

extern const ampc_converters ampc_cvt_ref;
extern const ampc_converters ampc_cvt_avx2;
extern const ampc_converters ampc_cvt_avx512;

// ----------------------------------------------------------------------------
// reduction parts
//
// cpu/ref/reduce.c owns the OpenMP split (an OpenMP region must be written
// inside the function whose ISA its body should get, so it cannot live in an
// inline helper) and calls these per-level parts on pieces of the work.

/* The partial result of reducing one contiguous run. */
typedef struct {
    double sum;         /* float SUM/MEAN */
    uint64_t isum;      /* int64/bool SUM, wrapping */
    int64_t idx;        /* MAX/MIN family: first best position in the run */
} ampc_red_partial;

typedef struct {
    /* x: n > 0 contiguous elements -> *p */
    void (*run)(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t n,
                ampc_red_partial *p);
    /* x (r, inner) with row stride inner: reduces ncols <= AMPC_RED_TILE
     * columns over r and writes out[0:ncols] and idx[0:ncols] (when not
     * NULL), as the kernel itself does. */
    void (*cols)(ampc_reduce_op op, ampc_dtype dt, const void *x, int64_t r,
                 int64_t inner, int64_t ncols, void *out, int64_t *idx);
} ampc_reduce_parts;

/* The reduce kernel of every level: the split over threads, with `parts`
 * doing the work.  Results do not depend on the thread count. */
void ampc_reduce_run(const ampc_reduce_parts *parts, ampc_reduce_op op,
                     ampc_dtype dt, int64_t outer, int64_t r, int64_t inner,
                     const void *x, void *out, int64_t *idx);

// ----------------------------------------------------------------------------
// kernel variants (types: kernels.h); levels reuse the names with their suffix

void ampc_cast_ref(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                   ampc_dtype ddt, void *dst, int64_t ds);
void ampc_binary_ref(ampc_binary_op op, ampc_dtype dt, int64_t n,
                     const void *a, int64_t sa, const void *b, int64_t sb,
                     void *out, int64_t so);
void ampc_lerp_ref(ampc_dtype dt, int64_t n, const void *start,
                   int64_t ss, const void *end, int64_t se,
                   const void *weight, int64_t sw, float scalar,
                   void *out, int64_t so);
void ampc_compare_ref(ampc_compare_op op, ampc_dtype dt, int64_t n,
                      const void *a, int64_t sa, const void *b, int64_t sb,
                      void *out, int64_t so);
void ampc_unary_ref(ampc_unary_op op, ampc_dtype dt, int64_t n, const void *a,
                    int64_t sa, void *out, int64_t so);
void ampc_reduce_ref(ampc_reduce_op op, ampc_dtype dt, int64_t outer,
                     int64_t r, int64_t inner, const void *x, void *out,
                     int64_t *idx);

void ampc_cast_avx2(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                    ampc_dtype ddt, void *dst, int64_t ds);
void ampc_binary_avx2(ampc_binary_op op, ampc_dtype dt, int64_t n,
                      const void *a, int64_t sa, const void *b, int64_t sb,
                      void *out, int64_t so);
void ampc_lerp_avx2(ampc_dtype dt, int64_t n, const void *start,
                    int64_t ss, const void *end, int64_t se,
                    const void *weight, int64_t sw, float scalar,
                    void *out, int64_t so);
void ampc_compare_avx2(ampc_compare_op op, ampc_dtype dt, int64_t n,
                       const void *a, int64_t sa, const void *b, int64_t sb,
                       void *out, int64_t so);
void ampc_unary_avx2(ampc_unary_op op, ampc_dtype dt, int64_t n, const void *a,
                     int64_t sa, void *out, int64_t so);
void ampc_reduce_avx2(ampc_reduce_op op, ampc_dtype dt, int64_t outer,
                      int64_t r, int64_t inner, const void *x, void *out,
                      int64_t *idx);

void ampc_cast_avx512(int64_t n, ampc_dtype sdt, const void *src, int64_t ss,
                      ampc_dtype ddt, void *dst, int64_t ds);
void ampc_binary_avx512(ampc_binary_op op, ampc_dtype dt, int64_t n,
                        const void *a, int64_t sa, const void *b, int64_t sb,
                        void *out, int64_t so);
void ampc_lerp_avx512(ampc_dtype dt, int64_t n, const void *start,
                      int64_t ss, const void *end, int64_t se,
                      const void *weight, int64_t sw, float scalar,
                      void *out, int64_t so);
void ampc_compare_avx512(ampc_compare_op op, ampc_dtype dt, int64_t n,
                         const void *a, int64_t sa, const void *b, int64_t sb,
                         void *out, int64_t so);
void ampc_unary_avx512(ampc_unary_op op, ampc_dtype dt, int64_t n,
                       const void *a, int64_t sa, void *out, int64_t so);
void ampc_reduce_avx512(ampc_reduce_op op, ampc_dtype dt, int64_t outer,
                        int64_t r, int64_t inner, const void *x, void *out,
                        int64_t *idx);

/* ref's draws; the AVX-512 level vectorises normal draws only (the same
 * bits), the other levels keep ref's. */
void ampc_random_ref(ampc_random_kind kind, ampc_dtype dt, int64_t n,
                     void *out, uint64_t seed, uint64_t offset, double lo,
                     double hi);
void ampc_random_avx512(ampc_random_kind kind, ampc_dtype dt, int64_t n,
                        void *out, uint64_t seed, uint64_t offset, double lo,
                        double hi);

/* Only ref implements these; no SIMD level overrides them. */
void ampc_arange_ref(ampc_dtype dt, int64_t n, void *out, double start,
                     double step);
int ampc_index_gather_ref(const ampc_index_geom *g, size_t es, const void *t,
                          const int64_t *idx, void *v);
int ampc_index_put_ref(const ampc_index_geom *g, ampc_dtype dt,
                       int accumulate, void *t, const int64_t *idx,
                       const void *v);
void ampc_scatter_reduce_ref(const ampc_scatter_geom *g, ampc_dtype dt,
                             ampc_scatter_op op, void *t,
                             const int64_t *idx, const void *src,
                             int64_t *count);
void ampc_scan_ref(ampc_scan_op op, ampc_dtype dt, int64_t outer, int64_t n,
                   int64_t inner, const void *x, void *out);
int ampc_sort_ref(ampc_dtype dt, int descending, int64_t outer, int64_t n,
                  int64_t inner, const void *x, void *values,
                  int64_t *indices);
int ampc_topk_ref(ampc_dtype dt, int largest, int64_t outer, int64_t n,
                  int64_t inner, int64_t k, const void *x, void *values,
                  int64_t *indices);
int64_t ampc_count_true_ref(int64_t n, const uint8_t *mask);
int ampc_nonzero_ref(int ndim, const int64_t *shape, int64_t n,
                     const uint8_t *mask, int64_t *out);
/* A select moves bytes: the compiler's baseline vectorisation of its
 * dense loops is as fast as memory allows (cpu/ref/where.c). */
void ampc_where_ref(size_t es, int64_t n, const uint8_t *cond, int64_t sc,
                    const void *a, int64_t sa, const void *b, int64_t sb,
                    void *out, int64_t so);

// ----------------------------------------------------------------------------
// AMP parts
//
// cpu/ref/amp.c owns the OpenMP split of a tensor list (the combined element
// range for the unscale, fixed-size pieces for the norm, so that its sums do
// not depend on the thread count) and calls these per-level parts on runs.

typedef struct {
    /* x: n contiguous elements of dt, x <- x * inv_scale unless inv_scale
     * is 1; returns nonzero when an input element is inf or NaN; adds to
     * *c when c is not NULL. */
    int (*unscale)(ampc_dtype dt, void *x, int64_t n, float inv_scale,
                   ampc_amp_counts *c);
    /* x: n > 0 contiguous elements of dt -> their accumulator for norm p
     * (as ampc_grad_norm_fn), in double. */
    double (*norm)(ampc_dtype dt, const void *x, int64_t n, double p);
} ampc_amp_parts;

void ampc_amp_unscale_run(const ampc_amp_parts *parts,
                          const ampc_tensor_list *l, float inv_scale,
                          float *found_inf, ampc_amp_counts *counts);
void ampc_grad_norm_run(const ampc_amp_parts *parts,
                        const ampc_tensor_list *l, double p, double *acc);
/* Folds two accumulators of norm p (ref/amp.c, shared by the levels). */
double ampc_norm_fold(double p, double a, double b);
/* The portable parts (ref/amp.c); the SIMD levels run their tails and
 * their less common norms through them. */
int ampc_amp_unscale_scalar(ampc_dtype dt, void *x, int64_t n,
                            float inv_scale, ampc_amp_counts *c);
double ampc_norm_scalar(ampc_dtype dt, const void *x, int64_t n, double p);

void ampc_amp_unscale_ref(const ampc_tensor_list *l, float inv_scale,
                          float *found_inf, ampc_amp_counts *counts);
void ampc_amp_unscale_avx2(const ampc_tensor_list *l, float inv_scale,
                           float *found_inf, ampc_amp_counts *counts);
void ampc_amp_unscale_avx512(const ampc_tensor_list *l, float inv_scale,
                             float *found_inf, ampc_amp_counts *counts);
void ampc_grad_norm_ref(const ampc_tensor_list *l, double p, double *acc);
void ampc_grad_norm_avx2(const ampc_tensor_list *l, double p, double *acc);
void ampc_grad_norm_avx512(const ampc_tensor_list *l, double p,
                           double *acc);
/* Only ref implements it: one scalar, no SIMD to gain. */
void ampc_amp_update_scale_ref(float *scale, int64_t *tracker,
                               const float *found_inf, double growth_factor,
                               double backoff_factor,
                               int64_t growth_interval);

// ----------------------------------------------------------------------------
// linear algebra: GEMM, conv2d and the peak-FLOP loops (cpu/*/gemm.c,
// cpu/ref/conv2d.c; the shared driver and parts are in cpu/gemm.h)

int ampc_gemm_ref(const ampc_gemm_args *g);
int ampc_gemm_avx2(const ampc_gemm_args *g);
int ampc_gemm_avx512(const ampc_gemm_args *g);
int ampc_conv2d_fwd_ref(const ampc_conv2d_shape *s, ampc_dtype dt,
                        const void *x, const void *w, const void *bias,
                        int relu, void *y);
int ampc_conv2d_fwd_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                         const void *x, const void *w, const void *bias,
                         int relu, void *y);
int ampc_conv2d_fwd_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                           const void *x, const void *w, const void *bias,
                           int relu, void *y);
int ampc_conv2d_bwd_input_ref(const ampc_conv2d_shape *s, ampc_dtype dt,
                              const void *dy, const void *w, void *dx);
int ampc_conv2d_bwd_input_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                               const void *dy, const void *w, void *dx);
int ampc_conv2d_bwd_input_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                                 const void *dy, const void *w, void *dx);
int ampc_conv2d_bwd_weight_ref(const ampc_conv2d_shape *s, ampc_dtype dt,
                               const void *dy, const void *x, void *dw,
                               void *db);
int ampc_conv2d_bwd_weight_avx2(const ampc_conv2d_shape *s, ampc_dtype dt,
                                const void *dy, const void *x, void *dw,
                                void *db);
int ampc_conv2d_bwd_weight_avx512(const ampc_conv2d_shape *s, ampc_dtype dt,
                                  const void *dy, const void *x, void *dw,
                                  void *db);
double ampc_peak_flops_ref(ampc_peak_kind kind, double seconds,
                           int nthreads);
double ampc_peak_flops_avx2(ampc_peak_kind kind, double seconds,
                            int nthreads);
double ampc_peak_flops_avx512(ampc_peak_kind kind, double seconds,
                              int nthreads);

// ----------------------------------------------------------------------------
// NN kernels and optimizer steps (bodies: cpu/nn_loops.h)

/* Computes the items [begin, end) of a kernel's work. */
typedef void (*ampc_range_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs fn on [0, n) split into contiguous ranges of at least `grain` items,
 * one per thread, in parallel when there is more than one (ref/parallel.c).
 * Inside a parallel region it runs fn once on everything (no nesting). */
void ampc_parallel_for(int64_t n, int64_t grain, ampc_range_fn fn,
                       void *ctx);

/* kernels_extra.h's kernels (ref only) */
void ampc_scan_minmax_ref(int is_min, ampc_dtype dt, int64_t outer,
                          int64_t n, int64_t inner, const void *x,
                          void *values, int64_t *indices);
int ampc_histc_ref(const ampc_histc_shape *s, ampc_dtype dt, const void *x,
                   void *out);
void ampc_adaptive_max_pool2d_ref(const ampc_pool2d_shape *s, ampc_dtype dt,
                                  const void *x, void *y, int64_t *idx);
int ampc_embedding_bag_fwd_ref(const ampc_bag_shape *s, ampc_dtype dt,
                               const void *weight, const int64_t *indices,
                               const int64_t *offsets, const void *psw,
                               void *out, int64_t *bag_size,
                               int64_t *max_idx);
int ampc_embedding_bag_bwd_ref(const ampc_bag_shape *s, ampc_dtype dt,
                               const void *grad, const int64_t *indices,
                               const int64_t *offsets, const float *scale,
                               const int64_t *bag_size,
                               const int64_t *max_idx, void *grad_weight);
void ampc_relu_bwd_ref(ampc_dtype dt, int64_t n, const void *grad_out,
                       const void *out, void *grad_in);
void ampc_max_pool2d_fwd_ref(const ampc_pool2d_shape *s, ampc_dtype dt,
                             const void *x, void *y, int64_t *idx);
int ampc_max_pool2d_bwd_ref(const ampc_pool2d_shape *s, ampc_dtype dt,
                            const void *grad_out, const int64_t *idx,
                            void *grad_in);
int ampc_max_pool2d_gather_ref(const ampc_pool2d_shape *s, size_t es,
                               const void *x, const int64_t *idx, void *out);
int ampc_avg_pool2d_fwd_ref(const ampc_avg_pool2d_shape *s,
                            ampc_dtype dt, const void *x, void *y);
int ampc_avg_pool2d_bwd_ref(const ampc_avg_pool2d_shape *s,
                            ampc_dtype dt, const void *grad_out,
                            void *grad_in);
int ampc_interp_fwd_ref(const ampc_interp_shape *s, ampc_dtype dt,
                        const void *x, void *y);
int ampc_interp_bwd_ref(const ampc_interp_shape *s, ampc_dtype dt,
                        const void *grad_out, void *grad_in);
void ampc_softmax_fwd_ref(int log, ampc_dtype xdt, ampc_dtype ydt,
                          int64_t outer, int64_t r, int64_t inner,
                          const void *x, void *y);
void ampc_softmax_bwd_ref(int log, ampc_dtype dt, int64_t outer, int64_t r,
                          int64_t inner, const void *grad_y, const void *y,
                          void *grad_x);
void ampc_cross_entropy_fwd_ref(const ampc_class_loss_shape *s,
                                ampc_dtype dt, const void *logits,
                                const int64_t *target, const float *weight,
                                void *logp, double *row_loss,
                                double *row_weight);
void ampc_cross_entropy_bwd_ref(const ampc_class_loss_shape *s,
                                ampc_dtype dt, const void *logp,
                                const int64_t *target, const float *weight,
                                const float *row_scale, void *grad);
void ampc_mse_loss_fwd_ref(ampc_dtype dt, int64_t n, const void *x,
                           const void *t, void *out, double *partial);
void ampc_mse_loss_bwd_ref(ampc_dtype dt, int64_t n, const void *x,
                           const void *t, const void *grad, float scale,
                           void *grad_x);
void ampc_masked_scale_ref(ampc_dtype dt, int64_t n, const void *x,
                           const uint8_t *mask, float scale, void *y);
void ampc_sgd_step_ref(const ampc_sgd_args *a, ampc_dtype dt, int64_t n,
                       void *param, void *grad, void *momentum_buffer);
void ampc_adam_step_ref(const ampc_adam_args *a, ampc_dtype dt, int64_t n,
                        void *param, void *grad, void *exp_avg,
                        void *exp_avg_sq, void *max_exp_avg_sq);
void ampc_rmsprop_step_ref(const ampc_rmsprop_args *a, ampc_dtype dt,
                           int64_t n, void *param, void *grad,
                           void *square_avg, void *momentum_buffer,
                           void *grad_avg);
void ampc_adagrad_step_ref(const ampc_adagrad_args *a, ampc_dtype dt,
                           int64_t n, void *param, void *grad, void *sum);
/* Only ref implements these: they touch one element per row. */
void ampc_nll_loss_fwd_ref(const ampc_class_loss_shape *s, ampc_dtype dt,
                           const void *logp, const int64_t *target,
                           const float *weight, double *row_loss,
                           double *row_weight);
void ampc_nll_loss_bwd_ref(const ampc_class_loss_shape *s, ampc_dtype dt,
                           const int64_t *target, const float *weight,
                           const float *row_scale, void *grad);

void ampc_relu_bwd_avx2(ampc_dtype dt, int64_t n, const void *grad_out,
                        const void *out, void *grad_in);
void ampc_max_pool2d_fwd_avx2(const ampc_pool2d_shape *s, ampc_dtype dt,
                              const void *x, void *y, int64_t *idx);
int ampc_max_pool2d_bwd_avx2(const ampc_pool2d_shape *s, ampc_dtype dt,
                             const void *grad_out, const int64_t *idx,
                             void *grad_in);
int ampc_avg_pool2d_fwd_avx2(const ampc_avg_pool2d_shape *s,
                             ampc_dtype dt, const void *x, void *y);
int ampc_avg_pool2d_bwd_avx2(const ampc_avg_pool2d_shape *s,
                             ampc_dtype dt, const void *grad_out,
                             void *grad_in);
int ampc_interp_fwd_avx2(const ampc_interp_shape *s, ampc_dtype dt,
                         const void *x, void *y);
int ampc_interp_bwd_avx2(const ampc_interp_shape *s, ampc_dtype dt,
                         const void *grad_out, void *grad_in);
void ampc_softmax_fwd_avx2(int log, ampc_dtype xdt, ampc_dtype ydt,
                           int64_t outer, int64_t r, int64_t inner,
                           const void *x, void *y);
void ampc_softmax_bwd_avx2(int log, ampc_dtype dt, int64_t outer, int64_t r,
                           int64_t inner, const void *grad_y, const void *y,
                           void *grad_x);
void ampc_cross_entropy_fwd_avx2(const ampc_class_loss_shape *s, ampc_dtype dt,
                                 const void *logits, const int64_t *target,
                                 const float *weight, void *logp,
                                 double *row_loss, double *row_weight);
void ampc_cross_entropy_bwd_avx2(const ampc_class_loss_shape *s, ampc_dtype dt,
                                 const void *logp, const int64_t *target,
                                 const float *weight, const float *row_scale,
                                 void *grad);
void ampc_mse_loss_fwd_avx2(ampc_dtype dt, int64_t n, const void *x,
                            const void *t, void *out, double *partial);
void ampc_mse_loss_bwd_avx2(ampc_dtype dt, int64_t n, const void *x,
                            const void *t, const void *grad, float scale,
                            void *grad_x);
void ampc_masked_scale_avx2(ampc_dtype dt, int64_t n, const void *x,
                            const uint8_t *mask, float scale, void *y);
void ampc_sgd_step_avx2(const ampc_sgd_args *a, ampc_dtype dt, int64_t n,
                        void *param, void *grad, void *momentum_buffer);
void ampc_adam_step_avx2(const ampc_adam_args *a, ampc_dtype dt, int64_t n,
                         void *param, void *grad, void *exp_avg,
                         void *exp_avg_sq, void *max_exp_avg_sq);
void ampc_rmsprop_step_avx2(const ampc_rmsprop_args *a, ampc_dtype dt,
                            int64_t n, void *param, void *grad,
                            void *square_avg, void *momentum_buffer,
                            void *grad_avg);
void ampc_adagrad_step_avx2(const ampc_adagrad_args *a, ampc_dtype dt,
                            int64_t n, void *param, void *grad, void *sum);

void ampc_relu_bwd_avx512(ampc_dtype dt, int64_t n, const void *grad_out,
                          const void *out, void *grad_in);
void ampc_max_pool2d_fwd_avx512(const ampc_pool2d_shape *s, ampc_dtype dt,
                                const void *x, void *y, int64_t *idx);
int ampc_max_pool2d_bwd_avx512(const ampc_pool2d_shape *s, ampc_dtype dt,
                               const void *grad_out, const int64_t *idx,
                               void *grad_in);
int ampc_avg_pool2d_fwd_avx512(const ampc_avg_pool2d_shape *s,
                               ampc_dtype dt, const void *x, void *y);
int ampc_avg_pool2d_bwd_avx512(const ampc_avg_pool2d_shape *s,
                               ampc_dtype dt, const void *grad_out,
                               void *grad_in);
int ampc_interp_fwd_avx512(const ampc_interp_shape *s, ampc_dtype dt,
                           const void *x, void *y);
int ampc_interp_bwd_avx512(const ampc_interp_shape *s, ampc_dtype dt,
                           const void *grad_out, void *grad_in);
void ampc_softmax_fwd_avx512(int log, ampc_dtype xdt, ampc_dtype ydt,
                             int64_t outer, int64_t r, int64_t inner,
                             const void *x, void *y);
void ampc_softmax_bwd_avx512(int log, ampc_dtype dt, int64_t outer, int64_t r,
                             int64_t inner, const void *grad_y, const void *y,
                             void *grad_x);
void ampc_cross_entropy_fwd_avx512(const ampc_class_loss_shape *s,
                                   ampc_dtype dt, const void *logits,
                                   const int64_t *target, const float *weight,
                                   void *logp, double *row_loss,
                                   double *row_weight);
void ampc_cross_entropy_bwd_avx512(const ampc_class_loss_shape *s,
                                   ampc_dtype dt, const void *logp,
                                   const int64_t *target, const float *weight,
                                   const float *row_scale, void *grad);
void ampc_mse_loss_fwd_avx512(ampc_dtype dt, int64_t n, const void *x,
                              const void *t, void *out, double *partial);
void ampc_mse_loss_bwd_avx512(ampc_dtype dt, int64_t n, const void *x,
                              const void *t, const void *grad, float scale,
                              void *grad_x);
void ampc_masked_scale_avx512(ampc_dtype dt, int64_t n, const void *x,
                              const uint8_t *mask, float scale, void *y);
void ampc_sgd_step_avx512(const ampc_sgd_args *a, ampc_dtype dt, int64_t n,
                          void *param, void *grad,
                          void *momentum_buffer);
void ampc_adam_step_avx512(const ampc_adam_args *a, ampc_dtype dt, int64_t n,
                           void *param, void *grad, void *exp_avg,
                           void *exp_avg_sq, void *max_exp_avg_sq);
void ampc_rmsprop_step_avx512(const ampc_rmsprop_args *a, ampc_dtype dt,
                              int64_t n, void *param, void *grad,
                              void *square_avg, void *momentum_buffer,
                              void *grad_avg);
void ampc_adagrad_step_avx512(const ampc_adagrad_args *a, ampc_dtype dt,
                              int64_t n, void *param, void *grad,
                              void *sum);

// ----------------------------------------------------------------------------
// normalisation layers (bodies: cpu/norm_loops.h)

int ampc_batch_norm_fwd_ref(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                            ampc_dtype pdt, const void *x, const void *weight,
                            const void *bias, void *running_mean,
                            void *running_var, float *mean, float *invstd,
                            void *y);
int ampc_batch_norm_bwd_ref(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                            ampc_dtype pdt, const void *grad_y, const void *x,
                            const void *weight, const float *mean,
                            const float *invstd, void *grad_x,
                            void *grad_weight, void *grad_bias);
int ampc_layer_norm_fwd_ref(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                            ampc_dtype pdt, const void *x, const void *weight,
                            const void *bias, float *mean, float *rstd,
                            void *y);
int ampc_layer_norm_bwd_ref(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                            ampc_dtype pdt, const void *grad_y, const void *x,
                            const void *weight, const float *mean,
                            const float *rstd, void *grad_x, void *grad_weight,
                            void *grad_bias);

int ampc_batch_norm_fwd_avx2(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                             ampc_dtype pdt, const void *x, const void *weight,
                             const void *bias, void *running_mean,
                             void *running_var, float *mean, float *invstd,
                             void *y);
int ampc_batch_norm_bwd_avx2(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                             ampc_dtype pdt, const void *grad_y, const void *x,
                             const void *weight, const float *mean,
                             const float *invstd, void *grad_x,
                             void *grad_weight, void *grad_bias);
int ampc_layer_norm_fwd_avx2(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                             ampc_dtype pdt, const void *x, const void *weight,
                             const void *bias, float *mean, float *rstd,
                             void *y);
int ampc_layer_norm_bwd_avx2(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                             ampc_dtype pdt, const void *grad_y, const void *x,
                             const void *weight, const float *mean,
                             const float *rstd, void *grad_x,
                             void *grad_weight, void *grad_bias);

int ampc_batch_norm_fwd_avx512(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                               ampc_dtype pdt, const void *x,
                               const void *weight, const void *bias,
                               void *running_mean, void *running_var,
                               float *mean, float *invstd, void *y);
int ampc_batch_norm_bwd_avx512(const ampc_batch_norm_shape *s, ampc_dtype xdt,
                               ampc_dtype pdt, const void *grad_y,
                               const void *x, const void *weight,
                               const float *mean, const float *invstd,
                               void *grad_x, void *grad_weight,
                               void *grad_bias);
int ampc_layer_norm_fwd_avx512(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                               ampc_dtype pdt, const void *x,
                               const void *weight, const void *bias,
                               float *mean, float *rstd, void *y);
int ampc_layer_norm_bwd_avx512(const ampc_layer_norm_shape *s, ampc_dtype xdt,
                               ampc_dtype pdt, const void *grad_y,
                               const void *x, const void *weight,
                               const float *mean, const float *rstd,
                               void *grad_x, void *grad_weight,
                               void *grad_bias);

/* group norm (bodies: cpu/group_norm_loops.h) */
int ampc_group_norm_fwd_ref(const ampc_group_norm_shape *s,
        ampc_dtype xdt, ampc_dtype pdt, const void *x, const void *weight,
        const void *bias, float *mean, float *rstd, void *y);
int ampc_group_norm_bwd_ref(const ampc_group_norm_shape *s,
        ampc_dtype xdt, ampc_dtype pdt, const void *grad_y, const void *x,
        const void *weight, const float *mean, const float *rstd,
        void *grad_x, void *grad_weight, void *grad_bias);
int ampc_group_norm_fwd_avx2(const ampc_group_norm_shape *s,
        ampc_dtype xdt, ampc_dtype pdt, const void *x, const void *weight,
        const void *bias, float *mean, float *rstd, void *y);
int ampc_group_norm_bwd_avx2(const ampc_group_norm_shape *s,
        ampc_dtype xdt, ampc_dtype pdt, const void *grad_y, const void *x,
        const void *weight, const float *mean, const float *rstd,
        void *grad_x, void *grad_weight, void *grad_bias);
int ampc_group_norm_fwd_avx512(const ampc_group_norm_shape *s,
        ampc_dtype xdt, ampc_dtype pdt, const void *x, const void *weight,
        const void *bias, float *mean, float *rstd, void *y);
int ampc_group_norm_bwd_avx512(const ampc_group_norm_shape *s,
        ampc_dtype xdt, ampc_dtype pdt, const void *grad_y, const void *x,
        const void *weight, const float *mean, const float *rstd,
        void *grad_x, void *grad_weight, void *grad_bias);
#endif /* AMPC_CPU_CPU_H */
