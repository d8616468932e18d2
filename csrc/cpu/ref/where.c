/* where.c - out = cond ? a : b over strided runs: a select, so elements are
 * moved by their byte size (1, 2, 4 or 8) whatever their dtype, bit for bit.
 * The OpenMP split is the iter runner's (csrc/iter.c), as for every
 * element-wise kernel.
 */
#include "cpu/cpu.h"

// ----------------------------------------------------------------------------
// CPU reference
//
// One function per element width.  The dense case (out and cond contiguous,
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

static void
where_u8(int64_t n, const uint8_t *c, int64_t sc, const uint8_t *a,
         int64_t sa, const uint8_t *b, int64_t sb, uint8_t *o, int64_t so)
{
    if (dense(sc, sa, sb, so)) {
        const uint8_t a0 = a[0], b0 = b[0];
        for (int64_t i = 0; i < n; i++) {
            uint8_t m = (uint8_t)(0u - (c[i] != 0));
            uint8_t x = sa ? a[i] : a0, y = sb ? b[i] : b0;
            o[i] = (uint8_t)((x & m) | (y & ~m));
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        o[i * so] = c[i * sc] ? a[i * sa] : b[i * sb];
    }
}

static void
where_u16(int64_t n, const uint8_t *c, int64_t sc, const uint16_t *a,
          int64_t sa, const uint16_t *b, int64_t sb, uint16_t *o, int64_t so)
{
    if (dense(sc, sa, sb, so)) {
        const uint16_t a0 = a[0], b0 = b[0];
        for (int64_t i = 0; i < n; i++) {
            uint16_t m = (uint16_t)(0u - (c[i] != 0));
            uint16_t x = sa ? a[i] : a0, y = sb ? b[i] : b0;
            o[i] = (uint16_t)((x & m) | (y & ~m));
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        o[i * so] = c[i * sc] ? a[i * sa] : b[i * sb];
    }
}

static void
where_u32(int64_t n, const uint8_t *c, int64_t sc, const uint32_t *a,
          int64_t sa, const uint32_t *b, int64_t sb, uint32_t *o, int64_t so)
{
    if (dense(sc, sa, sb, so)) {
        const uint32_t a0 = a[0], b0 = b[0];
        for (int64_t i = 0; i < n; i++) {
            uint32_t m = 0u - (uint32_t)(c[i] != 0);
            uint32_t x = sa ? a[i] : a0, y = sb ? b[i] : b0;
            o[i] = (x & m) | (y & ~m);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        o[i * so] = c[i * sc] ? a[i * sa] : b[i * sb];
    }
}

static void
where_u64(int64_t n, const uint8_t *c, int64_t sc, const uint64_t *a,
          int64_t sa, const uint64_t *b, int64_t sb, uint64_t *o, int64_t so)
{
    if (dense(sc, sa, sb, so)) {
        const uint64_t a0 = a[0], b0 = b[0];
        for (int64_t i = 0; i < n; i++) {
            uint64_t m = 0u - (uint64_t)(c[i] != 0);
            uint64_t x = sa ? a[i] : a0, y = sb ? b[i] : b0;
            o[i] = (x & m) | (y & ~m);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        o[i * so] = c[i * sc] ? a[i * sa] : b[i * sb];
    }
}

/* cond (n, bool) at stride sc, a and b (n) at sa and sb -> out (n) at so;
 * elements of es bytes */
void
ampc_where_ref(size_t es, int64_t n, const uint8_t *cond, int64_t sc,
               const void *a, int64_t sa, const void *b, int64_t sb,
               void *out, int64_t so)
{
    switch (es) {
    case 1:
        where_u8(n, cond, sc, a, sa, b, sb, out, so);
        break;
    case 2:
        where_u16(n, cond, sc, a, sa, b, sb, out, so);
        break;
    case 4:
        where_u32(n, cond, sc, a, sa, b, sb, out, so);
        break;
    default:
        where_u64(n, cond, sc, a, sa, b, sb, out, so);
        break;
    }
}
