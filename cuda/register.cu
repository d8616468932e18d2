/* register.cu - fills the CUDA kernel table (csrc/kernels_cuda.h) from
 * csrc/cuda_ops.def: slot `name` is the function ampc_<name>_cuda, declared
 * for every .cu file in common.cuh, so a definition that does not match its
 * slot's type fails to compile.
 */
#include "common.cuh"

extern "C" void
ampc_register_cuda(ampc_cuda_table *t)
{
#define AMPC_CUDA_OP(name, fn_type) t->name = ampc_##name##_cuda;
#include "cuda_ops.def"
#undef AMPC_CUDA_OP
}
