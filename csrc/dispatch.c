/* dispatch.c - fills the kernel tables at import.  The CPU table: the
 * reference kernels in every slot, then each SIMD level up to the chosen
 * one overrides the slots it implements.  The level is the best this CPU
 * supports, or the one named by AMPC_CPU_LEVEL=ref|avx2|avx512;
 * kernel_variant() reports which variant runs for each slot.  The CUDA
 * table (kernels_cuda.h), in CUDA builds; and the error it raises.
 */
#include "ampc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

ampc_kernel_table ampc_cpu;
ampc_cuda_table ampc_cuda;

const char *const ampc_slot_names[AMPC_NUM_SLOTS] = {
#define AMPC_OP(name, fn_type) #name,
#include "ops.def"
#undef AMPC_OP
};

static const char *cpu_variant[AMPC_NUM_SLOTS];
static ampc_cpu_level cpu_level = AMPC_CPU_REF;

static const char *const level_names[AMPC_NUM_CPU_LEVELS] = {
    "ref", "avx2", "avx512",
};

typedef void (*register_fn)(ampc_kernel_table *t, const char **variant);

/* Lowest first: each fills the slots it implements over the level below. */
static const register_fn level_register[AMPC_NUM_CPU_LEVELS] = {
    ampc_register_cpu_ref,
    ampc_register_cpu_avx2,
    ampc_register_cpu_avx512,
};

// ----------------------------------------------------------------------------
// levels

const char *
ampc_cpu_level_name(ampc_cpu_level level)
{
    if (level < 0 || level >= AMPC_NUM_CPU_LEVELS) {
        return NULL;
    }
    return level_names[level];
}

ampc_cpu_level
ampc_dispatch_best_level(void)
{
    return ampc_cpu_detect();
}

ampc_cpu_level
ampc_dispatch_level(void)
{
    return cpu_level;
}

/* The table is built aside and then copied, so a reader never sees a slot
 * that is NULL (each slot is replaced by a valid pointer). */
int
ampc_dispatch_set_level(ampc_cpu_level level)
{
    ampc_cpu_level best = ampc_dispatch_best_level();
    if (level < 0 || level >= AMPC_NUM_CPU_LEVELS) {
        PyErr_Format(PyExc_ValueError, "CPU level %d does not exist",
                     (int)level);
        return -1;
    }
    if (level > best) {
        PyErr_Format(PyExc_ValueError,
                     "CPU level '%s' is not supported by this CPU "
                     "(the best it supports is '%s')",
                     level_names[level], level_names[best]);
        return -1;
    }

    ampc_kernel_table table;
    const char *variant[AMPC_NUM_SLOTS];
    memset(&table, 0, sizeof(table));
    memset(variant, 0, sizeof(variant));
    for (int l = AMPC_CPU_REF; l <= (int)level; l++) {
        level_register[l](&table, variant);
    }
#ifndef NDEBUG
#define AMPC_OP(name, fn_type) assert(table.name != NULL);
#include "ops.def"
#undef AMPC_OP
    for (int s = 0; s < AMPC_NUM_SLOTS; s++) {
        assert(variant[s] != NULL);
    }
#endif /* NDEBUG */

    ampc_cpu = table;
    memcpy(cpu_variant, variant, sizeof(variant));
    cpu_level = level;
    return 0;
}

/* AMPC_CPU_LEVEL unset or empty: the best level.  An unknown name is a
 * ValueError; a level this CPU lacks, a RuntimeError (the value is valid,
 * the machine cannot honour it). */
int
ampc_dispatch_init(void)
{
    ampc_cpu_level best = ampc_dispatch_best_level();
    const char *env = getenv("AMPC_CPU_LEVEL");
    ampc_cpu_level level = best;

    if (env != NULL && env[0] != '\0') {
        int found = -1;
        for (int l = 0; l < AMPC_NUM_CPU_LEVELS; l++) {
            if (strcmp(env, level_names[l]) == 0) {
                found = l;
            }
        }
        if (found < 0) {
            PyErr_Format(PyExc_ValueError,
                         "AMPC_CPU_LEVEL='%s' is not a CPU level; expected "
                         "'ref', 'avx2' or 'avx512'", env);
            return -1;
        }
        level = (ampc_cpu_level)found;
        if (level > best) {
            PyErr_Format(PyExc_RuntimeError,
                         "AMPC_CPU_LEVEL='%s', but this CPU supports only "
                         "up to '%s'", env, level_names[best]);
            return -1;
        }
    }
    return ampc_dispatch_set_level(level);
}

// ----------------------------------------------------------------------------
// introspection

const char *
ampc_kernel_variant(const char *slot)
{
    if (slot == NULL) {
        return NULL;
    }
    for (int s = 0; s < AMPC_NUM_SLOTS; s++) {
        if (strcmp(slot, ampc_slot_names[s]) == 0) {
            return cpu_variant[s];
        }
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// the CUDA table

void
ampc_dispatch_cuda_init(void)
{
#ifdef AMPC_WITH_CUDA
    ampc_register_cuda(&ampc_cuda);
#ifndef NDEBUG
#define AMPC_CUDA_OP(name, fn_type) assert(ampc_cuda.name != NULL);
#include "cuda_ops.def"
#undef AMPC_CUDA_OP
#endif /* NDEBUG */
#endif /* AMPC_WITH_CUDA */
}

void *
ampc_cuda_raise(const char *fn, int code)
{
    const char *where = ampc_cuda.last_error != NULL ? ampc_cuda.last_error()
                                                     : "";
    PyObject *type = code == AMPC_CUDA_ERROR_OOM ? ampc_out_of_memory_error()
                                                 : PyExc_RuntimeError;
    PyErr_Format(type, "%s(): CUDA error %d: %s", fn, code, where);
    return NULL;
}

int
ampc_cuda_enter(const char *fn, ampc_device dev)
{
    if (dev.type != AMPC_DEV_CUDA) {
        return 0;
    }
    int rc = ampc_cuda.set_device(dev.index);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    return 0;
}
