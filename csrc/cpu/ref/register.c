/* register.c - fills every slot of the CPU table with the portable kernels;
 * the SIMD levels then override what they implement.
 */
#include "cpu/cpu.h"

void
ampc_register_cpu_ref(ampc_kernel_table *t, const char **variant)
{
    t->cast = ampc_cast_ref;
    t->binary = ampc_binary_ref;
    t->compare = ampc_compare_ref;
    t->unary = ampc_unary_ref;
    t->reduce = ampc_reduce_ref;
    t->random = ampc_random_ref;
    t->arange = ampc_arange_ref;
    for (int s = 0; s < AMPC_NUM_SLOTS; s++) {
        variant[s] = "ref";
    }
}
