/* register.c - points the slots that have an AVX2 variant at it; random
 * and arange keep the portable kernels.  Does nothing off x86-64.
 */
#include "cpu/cpu.h"

void
ampc_register_cpu_avx2(ampc_kernel_table *t, const char **variant)
{
#if defined(__x86_64__)
    t->cast = ampc_cast_avx2;
    variant[AMPC_SLOT_cast] = "avx2";
    t->binary = ampc_binary_avx2;
    variant[AMPC_SLOT_binary] = "avx2";
    t->compare = ampc_compare_avx2;
    variant[AMPC_SLOT_compare] = "avx2";
    t->unary = ampc_unary_avx2;
    variant[AMPC_SLOT_unary] = "avx2";
    t->reduce = ampc_reduce_avx2;
    variant[AMPC_SLOT_reduce] = "avx2";
#else
    (void)t;
    (void)variant;
#endif /* __x86_64__ */
}
