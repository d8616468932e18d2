/* where.c - out = cond ? a : b over strided runs: a select, so elements are
 * moved by their byte size (1, 2, 4 or 8) whatever their dtype, bit for bit.
 * The OpenMP split is the iter runner's (csrc/iter.c), as for every
 * element-wise kernel.
 */
#include "cpu/cpu.h"

// ----------------------------------------------------------------------------
// CPU reference
//
// One function per element width (DEFINE_WHERE).  The dense case (out and cond contiguous,
// a and b each contiguous or one broadcast value, as in masked_fill) loads
// both sides unconditionally and blends them with a mask, so the compiler
// vectorises it; `sa ? a[i] : a0` is loop-invariant and the loop is
// unswitched into one vector loop per case.  Anything else (transposed or
// sliced operands) runs the plain strided loop.

static int
dense(int64_t sc, int64_t sa, int64_t sb, int64_t so)
{
    return sc == 1 && so == 1 && (sa == 0 || sa == 1) &&
           (sb == 0 || sb == 1);
}

/* where_<T>: the select for elements of unsigned integer type T (the
 * integer promotions make the mask arithmetic int-wide for the narrow
 * types; the casts bring it back). */
#define DEFINE_WHERE(T)                                                     \
    static void                                                             \
    where_##T(int64_t n, const uint8_t *c, int64_t sc, const T *a,          \
              int64_t sa, const T *b, int64_t sb, T *o, int64_t so)         \
    {                                                                       \
        if (dense(sc, sa, sb, so)) {                                        \
            const T a0 = a[0], b0 = b[0];                                   \
            for (int64_t i = 0; i < n; i++) {                               \
                T m = (T)(0u - (T)(c[i] != 0));                             \
                T x = sa ? a[i] : a0, y = sb ? b[i] : b0;                   \
                o[i] = (T)((x & m) | (y & (T)~m));                          \
            }                                                               \
            return;                                                         \
        }                                                                   \
        for (int64_t i = 0; i < n; i++) {                                   \
            o[i * so] = c[i * sc] ? a[i * sa] : b[i * sb];                  \
        }                                                                   \
    }

DEFINE_WHERE(uint8_t)
DEFINE_WHERE(uint16_t)
DEFINE_WHERE(uint32_t)
DEFINE_WHERE(uint64_t)

/* cond (n, bool) at stride sc, a and b (n) at sa and sb -> out (n) at so;
 * elements of es bytes */
void
ampc_where_ref(size_t es, int64_t n, const uint8_t *cond, int64_t sc,
               const void *a, int64_t sa, const void *b, int64_t sb,
               void *out, int64_t so)
{
    switch (es) {
    case 1:
        where_uint8_t(n, cond, sc, a, sa, b, sb, out, so);
        break;
    case 2:
        where_uint16_t(n, cond, sc, a, sa, b, sb, out, so);
        break;
    case 4:
        where_uint32_t(n, cond, sc, a, sa, b, sb, out, so);
        break;
    default:
        where_uint64_t(n, cond, sc, a, sa, b, sb, out, so);
        break;
    }
}
