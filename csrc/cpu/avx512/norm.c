/* norm.c - batch norm, layer norm and group norm, forward and backward:
 * the bodies of cpu/batch_norm_loops.h, norm_loops.h and group_norm_loops.h
 * compiled for AVX-512 F/BW/VL (cpu/norm_level.h).
 */
#if defined(__x86_64__)

#include "cpu/cpu.h"

#define AMPC_LEVEL_TARGET AMPC_TARGET_AVX512
#define AMPC_LEVEL_CVT ampc_cvt_avx512
#define AMPC_LEVEL_NAME(prefix) prefix##avx512
#include "cpu/norm_level.h"

#endif /* __x86_64__ */
