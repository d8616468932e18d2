/* module.c - the ampc._C extension module: multi-phase init, the module
 * state, the types, the dispatch table, and the small introspection
 * functions (CPU level, kernel variants, CUDA build and devices).
 *
 * defines: (from the files it joins)
 *   tensor.c, views.c   TensorBase and its views
 *   dtype.c             the dtype type and its five singletons
 *   ops.c               raw element-wise, reduction, creation and random ops
 *   numpy_interop.c     from_numpy, numpy(), tensor_from_array, bits helpers
 *   dispatch.c          the CPU kernel table, chosen once at import
 *   index_ops.c         advanced indexing's gather and put, nonzero
 *   scatter_ops.c       scatter_reduce_ (sum, prod, mean, amax, amin)
 *   ops_scan.c          cumsum, cumprod
 *   ops_sort.c          sort, argsort, topk
 *   ops_stats.c         cummax, cummin, histc
 *   ops_unary.c         the unary element-wise ops
 *   linalg_ops.c        linear, matmul, conv2d and their backward passes
 *   nn_activation.c     relu_backward, softmax, dropout, each with its
 *                       backward
 *   nn_pool.c           max_pool2d and its backward
 *   nn_adaptive_max_pool.c, nn_embedding_bag.c   adaptive_max_pool2d;
 *                       embedding_bag and its backward
 *   nn_loss.c           nll_loss, cross_entropy, mse_loss and their
 *                       backward passes
 *   nn_norm.c           batch_norm and layer_norm and their backward
 *                       passes
 *   nn_group_norm.c     group_norm and its backward
 *   optim_ops.c         the fused SGD and Adam/AdamW steps (one parameter
 *                       or a list; optim_batch.c their shared checks)
 *   amp_ops.c           the fused AMP unscale-and-check, scale update and
 *                       gradient norm (clip_grad_norm_)
 *   grad_scaler.c       the GradScaler type and the OptState enum
 */
#include "ampc.h"

#include <omp.h>

#ifdef AMPC_WITH_CUDA
#include "../cuda/ampc_cuda.h"
#endif /* AMPC_WITH_CUDA */
#include "weight_casts.h"

/* NOTE: ampc keeps one state per process: the kernel table and the
 * allocator's counters describe the process, not an interpreter, so the
 * module declares no support for subinterpreters and caches its state. */
static ampc_state *the_state;

ampc_state *
ampc_get_state(void)
{
    return the_state;
}

int
ampc_cuda_built(void)
{
#ifdef AMPC_WITH_CUDA
    return 1;
#else
    return 0;
#endif /* AMPC_WITH_CUDA */
}

int
ampc_cuda_count(void)
{
#ifdef AMPC_WITH_CUDA
    return ampc_cuda_device_count();
#else
    return 0;
#endif /* AMPC_WITH_CUDA */
}

int
ampc_cuda_current_index(void)
{
#ifdef AMPC_WITH_CUDA
    return ampc_cuda_count() > 0 ? ampc_cuda_get_device() : 0;
#else
    return 0;
#endif /* AMPC_WITH_CUDA */
}

// ----------------------------------------------------------------------------
// module functions

static PyObject *
mod_set_classes(PyObject *module, PyObject *args)
{
    PyObject *tensor_class, *size_class;
    if (!PyArg_ParseTuple(args, "OO:_set_classes", &tensor_class,
                          &size_class)) {
        return NULL;
    }
    ampc_state *st = ampc_get_state();
    if (!PyType_Check(tensor_class) ||
        !PyType_IsSubtype((PyTypeObject *)tensor_class,
                          st->tensor_base_type)) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_classes(): the tensor class must subclass "
                        "TensorBase");
        return NULL;
    }
    if (!PyCallable_Check(size_class)) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_classes(): the size class must be callable");
        return NULL;
    }
    Py_XSETREF(st->tensor_class,
               (PyTypeObject *)Py_NewRef(tensor_class));
    Py_XSETREF(st->size_class, Py_NewRef(size_class));
    Py_RETURN_NONE;
}

static PyObject *
mod_cpu_capability(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(ampc_cpu_level_name(ampc_dispatch_level()));
}

static PyObject *
mod_cpu_best_level(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(
        ampc_cpu_level_name(ampc_dispatch_best_level()));
}

static PyObject *
mod_set_cpu_level(PyObject *module, PyObject *arg)
{
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    for (int lvl = 0; name != NULL && lvl < AMPC_NUM_CPU_LEVELS; lvl++) {
        if (strcmp(name, ampc_cpu_level_name((ampc_cpu_level)lvl)) == 0) {
            if (ampc_dispatch_set_level((ampc_cpu_level)lvl) < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "_set_cpu_level(): expected 'ref', 'avx2' or 'avx512', got "
                 "%R",
                 arg);
    return NULL;
}

static PyObject *
mod_kernel_variant(PyObject *module, PyObject *arg)
{
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    const char *variant = name ? ampc_kernel_variant(name) : NULL;
    if (variant == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "kernel_variant(): unknown kernel slot %R (see "
                     "kernel_slots())",
                     arg);
        return NULL;
    }
    return PyUnicode_FromString(variant);
}

static PyObject *
mod_kernel_slots(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New(AMPC_NUM_SLOTS);
    for (int i = 0; list != NULL && i < AMPC_NUM_SLOTS; i++) {
        PyObject *s = PyUnicode_FromString(ampc_slot_names[i]);
        if (s == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, s);
    }
    return list;
}

static PyObject *
mod_cpu_features(PyObject *module, PyObject *unused)
{
    static const char *const names[] = {"avx2", "fma", "f16c", "avx512f",
                                        "avx512bw", "avx512vl",
                                        "avx512bf16"};
    PyObject *d = PyDict_New();
    for (size_t i = 0; d != NULL && i < sizeof(names) / sizeof(names[0]);
         i++) {
        if (PyDict_SetItemString(d, names[i],
                                 ampc_cpu_has(names[i]) ? Py_True
                                                        : Py_False) < 0) {
            Py_CLEAR(d);
        }
    }
    return d;
}

static PyObject *
mod_set_num_threads(PyObject *module, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (n < 1) {
        PyErr_Format(PyExc_ValueError,
                     "set_num_threads(): expected a positive number of "
                     "threads, got %ld",
                     n);
        return NULL;
    }
    omp_set_num_threads((int)n);
    Py_RETURN_NONE;
}

static PyObject *
mod_get_num_threads(PyObject *module, PyObject *unused)
{
    return PyLong_FromLong(omp_get_max_threads());
}

static PyObject *
mod_cuda_is_built(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(ampc_cuda_built());
}

static PyObject *
mod_cuda_device_count(PyObject *module, PyObject *unused)
{
    return PyLong_FromLong(ampc_cuda_count());
}

// ----------------------------------------------------------------------------
// CUDA devices and memory (the raw half of ampc.cuda)

/* The device index argument of a _C.cuda_* function: -1 with RuntimeError
 * naming fn when CUDA is not built or there is no such device. */
static int
cuda_index_arg(PyObject *obj, const char *fn)
{
    int count = ampc_cuda_count();
    if (count <= 0) {
        PyErr_Format(PyExc_RuntimeError, "%s(): %s", fn,
                     ampc_cuda_built()
                         ? "no CUDA GPU was found on this machine"
                         : "ampc was built without CUDA support");
        return -1;
    }
    long index = PyLong_AsLong(obj);
    if (index == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (index < 0 || index >= count || index >= AMPC_MAX_CUDA_INDEX) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): invalid device index %ld: this machine has %d "
                     "CUDA device%s",
                     fn, index, count, count == 1 ? "" : "s");
        return -1;
    }
    return (int)index;
}

static PyObject *
mod_cuda_synchronize(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "synchronize");
    /* the capture check looks at the current device's stream: make it the
     * one waited for (device `index`'s), not whichever ran the last op */
    if (index < 0 ||
        ampc_cuda_enter("synchronize",
                        (ampc_device){AMPC_DEV_CUDA, (int8_t)index}) < 0 ||
        ampc_cuda_check_no_wait("synchronize") < 0) {
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ampc_cuda.synchronize(index);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        return ampc_cuda_raise("synchronize", rc);
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_set_device(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "set_device");
    if (index < 0) {
        return NULL;
    }
    int rc = ampc_cuda.set_device(index);
    if (rc != 0) {
        return ampc_cuda_raise("set_device", rc);
    }
#ifdef AMPC_WITH_CUDA
    ampc_cuda_select_device(index);
#endif /* AMPC_WITH_CUDA */
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_current_device(PyObject *module, PyObject *unused)
{
    PyObject *zero = PyLong_FromLong(0);
    int ok = zero != NULL && cuda_index_arg(zero, "current_device") >= 0;
    Py_XDECREF(zero);
    if (!ok) {
        return NULL;
    }
#ifdef AMPC_WITH_CUDA
    return PyLong_FromLong(ampc_cuda_get_device());
#else
    Py_RETURN_NONE;     /* unreachable: cuda_index_arg refused */
#endif /* AMPC_WITH_CUDA */
}

static PyObject *
mod_cuda_device_name(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "get_device_name");
    if (index < 0) {
        return NULL;
    }
#ifdef AMPC_WITH_CUDA
    char name[256];
    int rc = ampc_cuda_device_name(index, name, sizeof(name));
    if (rc != 0) {
        return ampc_cuda_raise("get_device_name", rc);
    }
    return PyUnicode_FromString(name);
#else
    Py_RETURN_NONE;
#endif /* AMPC_WITH_CUDA */
}

static PyObject *
mod_cuda_device_capability(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "get_device_capability");
    if (index < 0) {
        return NULL;
    }
#ifdef AMPC_WITH_CUDA
    int major = 0, minor = 0;
    int rc = ampc_cuda_device_capability(index, &major, &minor);
    if (rc != 0) {
        return ampc_cuda_raise("get_device_capability", rc);
    }
    return Py_BuildValue("(ii)", major, minor);
#else
    Py_RETURN_NONE;
#endif /* AMPC_WITH_CUDA */
}

static PyObject *
mod_cuda_device_memory(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "get_device_properties");
    if (index < 0) {
        return NULL;
    }
#ifdef AMPC_WITH_CUDA
    size_t total = 0;
    int sms = 0;
    int rc = ampc_cuda_device_memory(index, &total, &sms);
    if (rc != 0) {
        return ampc_cuda_raise("get_device_properties", rc);
    }
    return Py_BuildValue("(Ki)", (unsigned long long)total, sms);
#else
    Py_RETURN_NONE;
#endif /* AMPC_WITH_CUDA */
}

/* cuda_memory_stats(index) -> (reserved, max_reserved, free, total). */
static PyObject *
mod_cuda_memory_stats(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "memory_reserved");
    if (index < 0) {
        return NULL;
    }
#ifdef AMPC_WITH_CUDA
    int64_t reserved = 0;
    long long peak = 0;
    size_t free_b = 0, total_b = 0;
    int rc = ampc_cuda.memory_reserved(index, &reserved);
    if (rc == 0) {
        rc = ampc_cuda_max_memory_reserved(index, &peak);
    }
    if (rc == 0) {
        rc = ampc_cuda.mem_info(index, &free_b, &total_b);
    }
    if (rc != 0) {
        return ampc_cuda_raise("memory_reserved", rc);
    }
    return Py_BuildValue("(LLnn)", (long long)reserved, peak,
                         (Py_ssize_t)free_b, (Py_ssize_t)total_b);
#else
    Py_RETURN_NONE;
#endif /* AMPC_WITH_CUDA */
}

static PyObject *
mod_cuda_reset_peak_reserved(PyObject *module, PyObject *arg)
{
    int index = cuda_index_arg(arg, "reset_peak_memory_stats");
    if (index < 0) {
        return NULL;
    }
#ifdef AMPC_WITH_CUDA
    int rc = ampc_cuda_reset_peak_reserved(index);
    if (rc != 0) {
        return ampc_cuda_raise("reset_peak_memory_stats", rc);
    }
#endif /* AMPC_WITH_CUDA */
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_set_classes", mod_set_classes, METH_VARARGS,
     "_set_classes(Tensor, Size): the classes C creates"},
    {"cpu_capability", mod_cpu_capability, METH_NOARGS,
     "the CPU kernel level in use: 'avx512', 'avx2' or 'ref'"},
    {"cpu_best_level", mod_cpu_best_level, METH_NOARGS,
     "the best CPU kernel level this machine supports"},
    {"_set_cpu_level", mod_set_cpu_level, METH_O,
     "_set_cpu_level(name): use the kernels of a lower level (for tests)"},
    {"kernel_variant", mod_kernel_variant, METH_O,
     "kernel_variant(slot) -> the level of the kernel that runs for slot"},
    {"kernel_slots", mod_kernel_slots, METH_NOARGS, "all kernel slot names"},
    {"cpu_features", mod_cpu_features, METH_NOARGS,
     "the CPU features ampc checks, name -> bool"},
    {"set_num_threads", mod_set_num_threads, METH_O,
     "set_num_threads(n): the threads CPU kernels use (OpenMP)"},
    {"get_num_threads", mod_get_num_threads, METH_NOARGS,
     "the threads CPU kernels use"},
    {"cuda_is_built", mod_cuda_is_built, METH_NOARGS,
     "True when ampc was compiled with CUDA"},
    {"cuda_device_count", mod_cuda_device_count, METH_NOARGS,
     "the number of usable CUDA devices (0 without CUDA or a GPU)"},
    {"cuda_synchronize", mod_cuda_synchronize, METH_O,
     "cuda_synchronize(index): waits for the work queued on a GPU"},
    {"cuda_set_device", mod_cuda_set_device, METH_O,
     "cuda_set_device(index): makes a GPU current for this thread"},
    {"cuda_current_device", mod_cuda_current_device, METH_NOARGS,
     "the index of this thread's current GPU"},
    {"cuda_device_name", mod_cuda_device_name, METH_O,
     "cuda_device_name(index) -> the GPU's name"},
    {"cuda_device_capability", mod_cuda_device_capability, METH_O,
     "cuda_device_capability(index) -> (major, minor)"},
    {"cuda_device_memory", mod_cuda_device_memory, METH_O,
     "cuda_device_memory(index) -> (total bytes, multiprocessors)"},
    {"cuda_memory_stats", mod_cuda_memory_stats, METH_O,
     "cuda_memory_stats(index) -> (reserved, max_reserved, free, total) "
     "bytes"},
    {"cuda_reset_peak_reserved", mod_cuda_reset_peak_reserved, METH_O,
     "cuda_reset_peak_reserved(index): the reserved peak restarts"},
    {NULL},
};

// ----------------------------------------------------------------------------
// module definition

extern PyMethodDef ampc_ops_methods[];
extern PyMethodDef ampc_memory_methods[];
extern PyMethodDef ampc_elementwise_methods[];
extern PyMethodDef ampc_where_methods[];
extern PyMethodDef ampc_lerp_methods[];
extern PyMethodDef ampc_reduce_methods[];
extern PyMethodDef ampc_index_methods[];
extern PyMethodDef ampc_scatter_methods[];
extern PyMethodDef ampc_scan_methods[];
extern PyMethodDef ampc_sort_methods[];
extern PyMethodDef ampc_unary_methods[];
extern PyMethodDef ampc_random_methods[];
extern PyMethodDef ampc_numpy_functions[];
extern PyMethodDef ampc_linalg_methods[];
extern PyMethodDef ampc_conv_methods[];
extern PyMethodDef ampc_nn_activation_methods[];
extern PyMethodDef ampc_nn_pool_methods[];
extern PyMethodDef ampc_nn_avg_pool_methods[];
extern PyMethodDef ampc_nn_interp_methods[];
extern PyMethodDef ampc_deterministic_methods[];
extern PyMethodDef ampc_nn_adaptive_max_pool_methods[];
extern PyMethodDef ampc_nn_embedding_bag_methods[];
extern PyMethodDef ampc_stats_methods[];
extern PyMethodDef ampc_nn_loss_methods[];
extern PyMethodDef ampc_nn_mse_methods[];
extern PyMethodDef ampc_nn_norm_methods[];
extern PyMethodDef ampc_nn_group_norm_methods[];
extern PyMethodDef ampc_optim_methods[];
extern PyMethodDef ampc_optim_adaptive_methods[];
extern PyMethodDef ampc_amp_methods[];
extern PyMethodDef ampc_grad_norm_methods[];
extern PyMethodDef ampc_autocast_functions[];
extern PyMethodDef ampc_autocast_policy_functions[];
extern PyMethodDef ampc_autocast_state_functions[];
extern PyMethodDef ampc_weight_cast_functions[];
extern PyMethodDef ampc_cuda_graph_methods[];
extern PyMethodDef ampc_cuda_event_methods[];

static PyMethodDef all_functions[256];

static int
join_functions(void)
{
    const PyMethodDef *tables[] = {module_methods, ampc_ops_methods,
                                   ampc_memory_methods,
                                   ampc_elementwise_methods,
                                   ampc_where_methods,
                                   ampc_lerp_methods,
                                   ampc_reduce_methods, ampc_random_methods,
                                   ampc_index_methods, ampc_scatter_methods,
                                   ampc_scan_methods, ampc_sort_methods,
                                   ampc_unary_methods,
                                   ampc_numpy_functions,
                                   ampc_linalg_methods, ampc_conv_methods,
                                   ampc_nn_activation_methods,
                                   ampc_nn_pool_methods,
                                   ampc_nn_avg_pool_methods,
                                   ampc_nn_interp_methods,
                                   ampc_deterministic_methods,
                                   ampc_nn_adaptive_max_pool_methods,
                                   ampc_nn_embedding_bag_methods,
                                   ampc_stats_methods,
                                   ampc_nn_loss_methods,
                                   ampc_nn_mse_methods, ampc_nn_norm_methods,
                                   ampc_nn_group_norm_methods,
                                   ampc_optim_methods,
                                   ampc_optim_adaptive_methods,
                                   ampc_amp_methods,
                                   ampc_grad_norm_methods,
                                   ampc_autocast_functions,
                                   ampc_autocast_policy_functions,
                                   ampc_autocast_state_functions,
                                   ampc_weight_cast_functions,
                                   ampc_cuda_graph_methods,
                                   ampc_cuda_event_methods};
    size_t n = 0;
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (const PyMethodDef *m = tables[t]; m->ml_name != NULL; m++) {
            if (n + 1 >= sizeof(all_functions) / sizeof(all_functions[0])) {
                return -1;
            }
            all_functions[n++] = *m;
        }
    }
    return 0;
}

#define ADD_TYPE(module, slot, spec, base)                                  \
    do {                                                                    \
        slot = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec,       \
                                                        base);              \
        if (slot == NULL || PyModule_AddType(module, slot) < 0) {           \
            return -1;                                                      \
        }                                                                   \
    } while (0)

static int
ampc_exec(PyObject *module)
{
    ampc_state *st = PyModule_GetState(module);
    the_state = st;
    st->seed = 67280421310721ULL;   /* PyTorch's default seed */
    st->offset = 0;
    st->rng_capture_base = NULL;
    if (ampc_tensor_type_prepare() < 0 || ampc_numpy_init() < 0) {
        return -1;
    }
    ADD_TYPE(module, st->dtype_type, &ampc_dtype_spec, NULL);
    ADD_TYPE(module, st->tensor_base_type, &ampc_tensor_spec, NULL);
    st->tensor_class = (PyTypeObject *)Py_NewRef(st->tensor_base_type);
    if (ampc_dtype_init(module, st) < 0) {
        return -1;
    }
    ampc_dispatch_cuda_init();
    if (ampc_allocator_init(module) < 0) {
        return -1;
    }
    if (ampc_dispatch_init() < 0) {
        return -1;
    }
    if (ampc_grad_scaler_init(module) < 0) {
        return -1;
    }
    if (ampc_autocast_init(module) < 0 || ampc_weight_casts_init() < 0) {
        return -1;
    }
    return 0;
}

static int
ampc_traverse(PyObject *module, visitproc visit, void *arg)
{
    ampc_state *st = PyModule_GetState(module);
    Py_VISIT(st->tensor_base_type);
    Py_VISIT(st->dtype_type);
    Py_VISIT(st->tensor_class);
    Py_VISIT(st->size_class);
    for (int i = 0; i < AMPC_NUM_DTYPES; i++) {
        Py_VISIT(st->dtypes[i]);
    }
    return 0;
}

static int
ampc_clear(PyObject *module)
{
    ampc_state *st = PyModule_GetState(module);
    Py_CLEAR(st->tensor_base_type);
    Py_CLEAR(st->dtype_type);
    Py_CLEAR(st->tensor_class);
    Py_CLEAR(st->size_class);
    for (int i = 0; i < AMPC_NUM_DTYPES; i++) {
        Py_CLEAR(st->dtypes[i]);
    }
    return 0;
}

static void
ampc_free_module(void *module)
{
    ampc_clear((PyObject *)module);
}

static PyModuleDef_Slot ampc_slots[] = {
    {Py_mod_exec, ampc_exec},
    {0, NULL},
};

PyModuleDef ampc_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ampc._C",
    .m_doc = "ampc's C engine: tensors, kernels, dispatch.",
    .m_size = sizeof(ampc_state),
    .m_methods = all_functions,
    .m_slots = ampc_slots,
    .m_traverse = ampc_traverse,
    .m_clear = ampc_clear,
    .m_free = ampc_free_module,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    if (join_functions() < 0) {
        PyErr_SetString(PyExc_SystemError, "ampc: function table is full");
        return NULL;
    }
    return PyModuleDef_Init(&ampc_module);
}
