/* cuda_graph.c - the Python-facing CUDA graph functions of ampc._C, which
 * ampc/cuda/graphs.py wraps (CUDAGraph, graph()); the check that refuses a
 * host read of device data while a graph is being captured; and
 * cuda_slots(), which lists the CUDA table's slots for the build tests.
 * Everything CUDA goes through the table (kernels_cuda.h, slots graph_* in
 * cuda/graph.cu); in a CPU-only build those slots are NULL and the
 * functions raise a clear RuntimeError.
 */
#include "ampc.h"
#include "weight_casts.h"

#define GRAPH_CAPSULE "ampc._C.cuda_graph"
#define POOL_CAPSULE "ampc._C.cuda_graph_pool"

/* What a graph capsule holds.  The box outlives the graph: reset() frees
 * the graph and clears g, and the capsule's destructor frees the box. */
typedef struct {
    ampc_cuda_graph *g;     /* NULL before capture_begin and after reset */
    ampc_device device;     /* where it is captured and replays */
    int captured;           /* capture_end succeeded: replay() may run */
    uint64_t *rng_base;     /* device: {offset, seed} of the generator at
                             * a replay */
    uint64_t rng_used;      /* how far the capture moved the generator */
    PyObject *kept;         /* the kept weight casts the graph uses (a
                             * list, weight_casts.h), or NULL */
} graph_box;

// ----------------------------------------------------------------------------
// the CUDA table's slots

static PyObject *
mod_cuda_slots(PyObject *module, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    /* Every slot of cuda_ops.def, True when filled (a CUDA build fills
     * all of them; a CPU-only build none). */
#define AMPC_CUDA_OP(name, fn_type)                                       \
    if (PyDict_SetItemString(d, #name, ampc_cuda.name != NULL ? Py_True   \
                                                             : Py_False)  \
        < 0) {                                                            \
        goto error;                                                       \
    }
#include "cuda_ops.def"
#undef AMPC_CUDA_OP
    return d;

error:
    Py_DECREF(d);
    return NULL;
}

// ----------------------------------------------------------------------------
// host reads during capture

int
ampc_cuda_capturing(const char *fn)
{
    /* NULL in a CPU-only build, where no CUDA tensor exists. */
    if (ampc_cuda.graph_capturing == NULL) {
        return 0;
    }
    int capturing = 0;
    int rc = ampc_cuda.graph_capturing(&capturing);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    return capturing != 0;
}

/* -1 with RuntimeError "fn(): cannot <what> during CUDA graph capture
 * (...)" when this thread's current stream is being captured. */
static int
refuse_in_capture(const char *fn, const char *what)
{
    int capturing = ampc_cuda_capturing(fn);
    if (capturing > 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): cannot %s during CUDA graph capture (that waits "
                     "for the GPU, which a graph cannot capture); do it "
                     "after capture_end() or replay()",
                     fn, what);
        return -1;
    }
    return capturing;
}

int
ampc_cuda_check_not_capturing(const char *fn)
{
    return refuse_in_capture(fn, "read a CUDA tensor");
}

int
ampc_cuda_check_no_wait(const char *fn)
{
    return refuse_in_capture(fn, "wait for the GPU");
}

static PyObject *
mod_cuda_graph_capturing(PyObject *module, PyObject *unused)
{
    if (ampc_cuda.graph_capturing == NULL || ampc_cuda_count() == 0) {
        Py_RETURN_FALSE;
    }
    int capturing = 0;
    int rc = ampc_cuda.graph_capturing(&capturing);
    if (rc != 0) {
        return ampc_cuda_raise("is_current_stream_capturing", rc);
    }
    return PyBool_FromLong(capturing);
}

// ----------------------------------------------------------------------------
// random numbers in graphs
//
// A draw's offset is a kernel argument, which a graph would replay as
// captured: every replay would draw the same numbers.  So while a graph is
// captured, GPU draws add box->rng_base[0] (device memory) to an offset
// relative to the capture's start (ampc_rng_claim) and take their seed
// from box->rng_base[1]; each replay first sets the pair to the
// generator's offset and seed and moves the generator on by what the
// capture used: a replay draws what eager ops would.

static void
rng_capture_begin(graph_box *box)
{
    ampc_state *st = ampc_get_state();
    st->rng_capture_base = box->rng_base;
    st->rng_capture_start = st->offset;
}

/* Stops routing draws through this graph (if they are); idempotent. */
static void
rng_capture_end(graph_box *box)
{
    ampc_state *st = ampc_get_state();
    if (box->rng_base != NULL && st->rng_capture_base == box->rng_base) {
        box->rng_used = st->offset - st->rng_capture_start;
        st->rng_capture_base = NULL;
    }
}

/* Queues box->rng_base[i] = value: a fill kernel, whose value is its
 * argument (no host memory involved). */
static int
rng_set(graph_box *box, int i, uint64_t value)
{
    ampc_iter it;
    memset(&it, 0, sizeof(it));
    it.ndim = 1;
    it.shape[0] = 1;
    it.nops = 1;
    it.data[0] = (char *)(box->rng_base + i);
    it.itemsize[0] = sizeof(uint64_t);
    it.strides[0][0] = 1;
    return ampc_cuda.fill(AMPC_INT64, &it, value);
}

/* Queues box->rng_base = {the generator's offset, its seed}, as PyTorch
 * reads both at replay (a manual_seed() after capture counts), and moves
 * the generator on by what the capture drew. */
static int
rng_before_replay(graph_box *box)
{
    ampc_state *st = ampc_get_state();
    int rc = rng_set(box, 0, st->offset);
    if (rc == 0) {
        rc = rng_set(box, 1, st->seed);
    }
    if (rc == 0) {
        st->offset += box->rng_used;
    }
    return rc;
}

// ----------------------------------------------------------------------------
// graphs

static void
graph_capsule_destroy(PyObject *capsule)
{
    graph_box *box = PyCapsule_GetPointer(capsule, GRAPH_CAPSULE);
    if (box == NULL) {
        PyErr_Clear();
        return;
    }
    if (box->g != NULL && !box->captured) {
        Py_XDECREF(ampc_kept_casts_capture_end());  /* abandoned */
    }
    if (box->g != NULL) {
        /* NOTE: no exception can leave a destructor; a failure here (the
         * driver already shut down at exit) only leaks the graph. */
        (void)ampc_cuda.graph_destroy(box->g);
    }
    if (box->rng_base != NULL) {
        rng_capture_end(box);
        (void)ampc_cuda.free(box->rng_base);
    }
    Py_XDECREF(box->kept);
    PyMem_Free(box);
}

/* -1 with RuntimeError when this build has no CUDA graphs. */
static int
check_built(const char *fn)
{
    if (ampc_cuda.graph_capture_begin == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): ampc was built without CUDA support, so it has "
                     "no CUDA graphs", fn);
        return -1;
    }
    return 0;
}

static graph_box *
graph_arg(const char *fn, PyObject *obj)
{
    if (!PyCapsule_IsValid(obj, GRAPH_CAPSULE)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'graph' must be a graph handle from "
                     "cuda_graph_new(), got %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyCapsule_GetPointer(obj, GRAPH_CAPSULE);
}

static PyObject *
mod_cuda_graph_new(PyObject *module, PyObject *arg)
{
    const char *fn = "CUDAGraph";
    ampc_device dev;
    if (check_built(fn) < 0 || ampc_parse_device(arg, &dev, fn) < 0) {
        return NULL;
    }
    if (dev.type != AMPC_DEV_CUDA) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument 'device' must be a CUDA device, got "
                     "cpu", fn);
        return NULL;
    }
    graph_box *box = PyMem_Calloc(1, sizeof(graph_box));
    if (box == NULL) {
        return PyErr_NoMemory();
    }
    box->device = dev;
    PyObject *capsule = PyCapsule_New(box, GRAPH_CAPSULE,
                                      graph_capsule_destroy);
    if (capsule == NULL) {
        PyMem_Free(box);
    }
    return capsule;
}

static PyObject *
mod_cuda_graph_capture_begin(PyObject *module, PyObject *args)
{
    const char *fn = "CUDAGraph.capture_begin";
    PyObject *obj, *pool_obj = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:cuda_graph_capture_begin", &obj,
                          &pool_obj)) {
        return NULL;
    }
    graph_box *box = graph_arg(fn, obj);
    if (box == NULL || check_built(fn) < 0) {
        return NULL;
    }
    void *pool = NULL;
    if (pool_obj != Py_None) {
        if (!PyCapsule_IsValid(pool_obj, POOL_CAPSULE)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'pool' must be None or another "
                         "graph's pool() handle, got %.100s", fn,
                         Py_TYPE(pool_obj)->tp_name);
            return NULL;
        }
        pool = PyCapsule_GetPointer(pool_obj, POOL_CAPSULE);
    }
    if (box->g != NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): this graph is already %s; call reset() before "
                     "capturing it again", fn,
                     box->captured ? "captured" : "being captured");
        return NULL;
    }
    if (ampc_cuda_enter(fn, box->device) < 0) {
        return NULL;
    }
    /* before the capture: no allocation from the graph's pool */
    if (box->rng_base == NULL) {
        int rc = ampc_cuda.malloc(2 * sizeof(uint64_t),
                                  (void **)&box->rng_base);
        if (rc != 0) {
            box->rng_base = NULL;
            return ampc_cuda_raise(fn, rc);
        }
    }
    int rc = ampc_cuda.graph_capture_begin(pool, &box->g);
    if (rc != 0) {
        box->g = NULL;
        return ampc_cuda_raise(fn, rc);
    }
    rng_capture_begin(box);
    ampc_kept_casts_capture_begin();
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_graph_capture_end(PyObject *module, PyObject *obj)
{
    const char *fn = "CUDAGraph.capture_end";
    graph_box *box = graph_arg(fn, obj);
    if (box == NULL || check_built(fn) < 0) {
        return NULL;
    }
    if (box->g == NULL || box->captured) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): no capture is in progress on this graph (call "
                     "capture_begin() first)", fn);
        return NULL;
    }
    if (ampc_cuda_enter(fn, box->device) < 0) {
        return NULL;
    }
    rng_capture_end(box);
    Py_XSETREF(box->kept, ampc_kept_casts_capture_end());
    int rc = ampc_cuda.graph_capture_end(box->g);
    if (rc != 0) {
        /* The capture is over either way (an op that CUDA refuses during
         * capture invalidates it): free the graph and its pool, so the
         * graph can be captured again after reset(). */
        PyObject *err = ampc_cuda_raise(fn, rc);
        (void)ampc_cuda.graph_destroy(box->g);
        box->g = NULL;
        Py_CLEAR(box->kept);    /* no graph keeps them now */
        return err;
    }
    box->captured = 1;
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_graph_replay(PyObject *module, PyObject *obj)
{
    const char *fn = "CUDAGraph.replay";
    graph_box *box = graph_arg(fn, obj);
    if (box == NULL || check_built(fn) < 0) {
        return NULL;
    }
    if (!box->captured) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): the graph has not been captured (call "
                     "capture_begin() and capture_end() first)", fn);
        return NULL;
    }
    if (ampc_cuda_enter(fn, box->device) < 0) {
        return NULL;
    }
    int rc = rng_before_replay(box);
    if (rc == 0) {
        rc = ampc_cuda.graph_replay(box->g);
    }
    /* the replay writes parameters without changing their versions */
    ampc_kept_casts_replayed();
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_graph_reset(PyObject *module, PyObject *obj)
{
    const char *fn = "CUDAGraph.reset";
    graph_box *box = graph_arg(fn, obj);
    if (box == NULL) {
        return NULL;
    }
    if (box->g == NULL) {
        Py_RETURN_NONE;
    }
    if (ampc_cuda_enter(fn, box->device) < 0) {
        return NULL;
    }
    rng_capture_end(box);
    if (!box->captured) {
        Py_XDECREF(ampc_kept_casts_capture_end());  /* abandoned */
    }
    int rc = ampc_cuda.graph_destroy(box->g);
    box->g = NULL;
    box->captured = 0;
    Py_CLEAR(box->kept);
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_graph_pool(PyObject *module, PyObject *obj)
{
    const char *fn = "CUDAGraph.pool";
    graph_box *box = graph_arg(fn, obj);
    if (box == NULL) {
        return NULL;
    }
    if (box->g == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): the graph has no memory pool yet (it is made "
                     "by capture_begin())", fn);
        return NULL;
    }
    void *pool = NULL;
    int rc = ampc_cuda.graph_pool(box->g, &pool);
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    /* NOTE: the handle does not keep the pool alive; graph.cu refuses a
     * pool that no live graph uses any more. */
    return PyCapsule_New(pool, POOL_CAPSULE, NULL);
}

PyMethodDef ampc_cuda_graph_methods[] = {
    {"cuda_slots", mod_cuda_slots, METH_NOARGS,
     "cuda_slots() -> {slot name: filled} for every CUDA table slot"},
    {"cuda_graph_capturing", mod_cuda_graph_capturing, METH_NOARGS,
     "True while the current device's ampc stream is being captured"},
    {"cuda_graph_new", mod_cuda_graph_new, METH_O,
     "cuda_graph_new(device) -> an empty graph handle on that device"},
    {"cuda_graph_capture_begin", mod_cuda_graph_capture_begin,
     METH_VARARGS,
     "cuda_graph_capture_begin(graph, pool=None): start capturing"},
    {"cuda_graph_capture_end", mod_cuda_graph_capture_end, METH_O,
     "cuda_graph_capture_end(graph): end the capture, instantiate"},
    {"cuda_graph_replay", mod_cuda_graph_replay, METH_O,
     "cuda_graph_replay(graph): queue one replay on the ampc stream"},
    {"cuda_graph_reset", mod_cuda_graph_reset, METH_O,
     "cuda_graph_reset(graph): free the captured graph and its pool"},
    {"cuda_graph_pool", mod_cuda_graph_pool, METH_O,
     "cuda_graph_pool(graph) -> the graph's memory pool handle"},
    {NULL},
};
