/* register.c - points the slots that have an AVX-512 variant at it; random
 * and arange keep the portable kernels.  Does nothing off x86-64.
 */
#include "cpu/cpu.h"

void
ampc_register_cpu_avx512(ampc_kernel_table *t, const char **variant)
{
#if defined(__x86_64__)
    t->cast = ampc_cast_avx512;
    variant[AMPC_SLOT_cast] = "avx512";
    t->binary = ampc_binary_avx512;
    variant[AMPC_SLOT_binary] = "avx512";
    t->compare = ampc_compare_avx512;
    variant[AMPC_SLOT_compare] = "avx512";
    t->unary = ampc_unary_avx512;
    variant[AMPC_SLOT_unary] = "avx512";
    t->reduce = ampc_reduce_avx512;
    variant[AMPC_SLOT_reduce] = "avx512";
#else
    (void)t;
    (void)variant;
#endif /* __x86_64__ */
}
