/* norm.c - batch norm, layer norm and group norm, forward and backward:
 * the bodies of cpu/batch_norm_loops.h, norm_loops.h and group_norm_loops.h
 * compiled for the baseline ISA (cpu/norm_level.h).
 */
#include "cpu/cpu.h"

#define AMPC_LEVEL_TARGET 
#define AMPC_LEVEL_CVT ampc_cvt_ref
#define AMPC_LEVEL_NAME(prefix) prefix##ref
#include "cpu/norm_level.h"
