/* features.c - what this CPU and its OS support, asked once with cpuid and
 * xgetbv: the bits behind ampc_cpu_has() and the best kernel level.
 *
 * Levels: AVX2 needs avx2 + fma + f16c; AVX512 needs those and avx512f,
 * avx512bw and avx512vl.  avx512bf16 is reported but not required: no slot
 * uses it yet (vcvtneps2bf16 flushes subnormals, so the converters cannot),
 * and a future bf16 kernel can ask ampc_cpu_has("avx512bf16") when it
 * registers.  A feature counts only when the OS also saves its registers
 * (XCR0), as a VM or a kernel may turn AVX-512 off.
 */
#include <stddef.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif /* __x86_64__ || __i386__ */

enum {
    FEAT_AVX2 = 1u << 0,
    FEAT_FMA = 1u << 1,
    FEAT_F16C = 1u << 2,
    FEAT_AVX512F = 1u << 3,
    FEAT_AVX512BW = 1u << 4,
    FEAT_AVX512VL = 1u << 5,
    FEAT_AVX512BF16 = 1u << 6,
};

static const struct {
    const char *name;
    unsigned bit;
} feature_names[] = {
    {"avx2", FEAT_AVX2},
    {"fma", FEAT_FMA},
    {"f16c", FEAT_F16C},
    {"avx512f", FEAT_AVX512F},
    {"avx512bw", FEAT_AVX512BW},
    {"avx512vl", FEAT_AVX512VL},
    {"avx512bf16", FEAT_AVX512BF16},
};

#define LEVEL_AVX2 (FEAT_AVX2 | FEAT_FMA | FEAT_F16C)
#define LEVEL_AVX512 \
    (LEVEL_AVX2 | FEAT_AVX512F | FEAT_AVX512BW | FEAT_AVX512VL)

// ----------------------------------------------------------------------------
// x86: cpuid and xgetbv

#if defined(__x86_64__) || defined(__i386__)

/* cpuid bits (Intel SDM vol. 2A, "CPUID") */
#define CPUID1_ECX_FMA (1u << 12)
#define CPUID1_ECX_OSXSAVE (1u << 27)
#define CPUID1_ECX_AVX (1u << 28)
#define CPUID1_ECX_F16C (1u << 29)
#define CPUID7_EBX_AVX2 (1u << 5)
#define CPUID7_EBX_AVX512F (1u << 16)
#define CPUID7_EBX_AVX512BW (1u << 30)
#define CPUID7_EBX_AVX512VL (1u << 31)
#define CPUID7_1_EAX_AVX512BF16 (1u << 5)

/* XCR0 state components: SSE + AVX for ymm; opmask, ZMM_Hi256 and Hi16_ZMM
 * for AVX-512 */
#define XCR0_YMM 0x06u
#define XCR0_ZMM 0xe0u

static uint64_t
xgetbv0(void)
{
    uint32_t eax, edx;
    __asm__ __volatile__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (uint64_t)edx << 32 | eax;
}

static unsigned
detect_features(void)
{
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        return 0;
    }
    /* xgetbv exists only with OSXSAVE; everything here needs ymm state */
    if (!(c & CPUID1_ECX_OSXSAVE) || !(c & CPUID1_ECX_AVX)) {
        return 0;
    }
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & XCR0_YMM) != XCR0_YMM) {
        return 0;
    }
    int zmm = (xcr0 & XCR0_ZMM) == XCR0_ZMM;
    f |= (c & CPUID1_ECX_FMA) ? FEAT_FMA : 0;
    f |= (c & CPUID1_ECX_F16C) ? FEAT_F16C : 0;

    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        return f;
    }
    unsigned max_subleaf = a;
    f |= (b & CPUID7_EBX_AVX2) ? FEAT_AVX2 : 0;
    if (!zmm) {
        return f;
    }
    f |= (b & CPUID7_EBX_AVX512F) ? FEAT_AVX512F : 0;
    f |= (b & CPUID7_EBX_AVX512BW) ? FEAT_AVX512BW : 0;
    f |= (b & CPUID7_EBX_AVX512VL) ? FEAT_AVX512VL : 0;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        f |= (a & CPUID7_1_EAX_AVX512BF16) ? FEAT_AVX512BF16 : 0;
    }
    return f;
}

#else

static unsigned
detect_features(void)
{
    return 0;
}

#endif /* __x86_64__ || __i386__ */

// ----------------------------------------------------------------------------
// the answers

/* Asked once; the first call comes from module init, under the GIL, and any
 * later racing call would store the same value. */
static unsigned
features(void)
{
    static int detected = 0;
    static unsigned bits = 0;
    if (!detected) {
        bits = detect_features();
        detected = 1;
    }
    return bits;
}

ampc_cpu_level
ampc_cpu_detect(void)
{
#if defined(__x86_64__)
    unsigned f = features();
    if ((f & LEVEL_AVX512) == LEVEL_AVX512) {
        return AMPC_CPU_AVX512;
    }
    if ((f & LEVEL_AVX2) == LEVEL_AVX2) {
        return AMPC_CPU_AVX2;
    }
#endif /* __x86_64__ */
    /* 32-bit x86 reports its features, but the SIMD variants are built for
     * x86-64 only */
    return AMPC_CPU_REF;
}

int
ampc_cpu_has(const char *feature)
{
    if (feature == NULL) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]);
         i++) {
        if (strcmp(feature, feature_names[i].name) == 0) {
            return (features() & feature_names[i].bit) != 0;
        }
    }
    return 0;
}
