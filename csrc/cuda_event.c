/* cuda_event.c - the Python-facing CUDA event functions of ampc._C, which
 * ampc/cuda/streams.py wraps (ampc.cuda.Event).  As in PyTorch, an event is
 * created on its first record(), on the device it is recorded on, and one
 * that was never recorded counts as done.  ampc has one stream per device,
 * so record() and wait() always use the device's ampc stream.  Everything
 * CUDA goes through the table (slots event_* in cuda/event.cu); in a
 * CPU-only build those slots are NULL and record() raises a clear
 * RuntimeError.
 */
#include "ampc.h"

#define EVENT_CAPSULE "ampc._C.cuda_event"

typedef struct {
    void *ev;           /* NULL until the first record */
    int device;         /* where it was created; -1 before */
    int timing;         /* enable_timing */
    int blocking;       /* a host wait sleeps instead of spinning */
} event_box;

static void
event_capsule_destroy(PyObject *capsule)
{
    event_box *box = PyCapsule_GetPointer(capsule, EVENT_CAPSULE);
    if (box == NULL) {
        PyErr_Clear();
        return;
    }
    if (box->ev != NULL) {
        /* NOTE: no exception can leave a destructor; a failure here (the
         * driver already shut down at exit) only leaks the event. */
        (void)ampc_cuda.event_destroy(box->ev);
    }
    PyMem_Free(box);
}

static event_box *
event_arg(const char *fn, PyObject *obj)
{
    if (!PyCapsule_IsValid(obj, EVENT_CAPSULE)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'event' must be an event handle from "
                     "cuda_event_new(), got %.100s", fn,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyCapsule_GetPointer(obj, EVENT_CAPSULE);
}

/* Makes device `index` current; -1 with an exception. */
static int
enter(const char *fn, int index)
{
    if (ampc_cuda.event_create == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): ampc was built without CUDA support", fn);
        return -1;
    }
    if (index < 0 || index >= AMPC_MAX_CUDA_INDEX) {
        PyErr_Format(PyExc_RuntimeError, "%s(): invalid device index %d",
                     fn, index);
        return -1;
    }
    return ampc_cuda_enter(fn, (ampc_device){AMPC_DEV_CUDA, (int8_t)index});
}

/* -1 with RuntimeError while the device's stream is being captured: an
 * event recorded or waited for inside a capture would belong to the
 * graph, not to the eager timeline the caller means. */
static int
refuse_capture(const char *fn)
{
    int capturing = ampc_cuda_capturing(fn);
    if (capturing > 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): cannot use a CUDA event during CUDA graph "
                     "capture; record it before capture_begin() or after "
                     "capture_end(), around replay()", fn);
        return -1;
    }
    return capturing;
}

// ----------------------------------------------------------------------------
// the functions

static PyObject *
mod_cuda_event_new(PyObject *module, PyObject *args)
{
    int timing = 0, blocking = 0;
    if (!PyArg_ParseTuple(args, "pp:cuda_event_new", &timing, &blocking)) {
        return NULL;
    }
    event_box *box = PyMem_Calloc(1, sizeof(event_box));
    if (box == NULL) {
        return PyErr_NoMemory();
    }
    box->device = -1;
    box->timing = timing;
    box->blocking = blocking;
    PyObject *capsule = PyCapsule_New(box, EVENT_CAPSULE,
                                      event_capsule_destroy);
    if (capsule == NULL) {
        PyMem_Free(box);
    }
    return capsule;
}

static PyObject *
mod_cuda_event_record(PyObject *module, PyObject *args)
{
    const char *fn = "Event.record";
    PyObject *obj;
    int index;
    if (!PyArg_ParseTuple(args, "Oi:cuda_event_record", &obj, &index)) {
        return NULL;
    }
    event_box *box = event_arg(fn, obj);
    if (box == NULL || enter(fn, index) < 0 || refuse_capture(fn) < 0) {
        return NULL;
    }
    if (box->ev != NULL && box->device != index) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Event device %d does not match recording "
                     "stream's device %d (use one event per device)", fn,
                     box->device, index);
        return NULL;
    }
    int rc = 0;
    if (box->ev == NULL) {
        rc = ampc_cuda.event_create(box->timing, box->blocking, &box->ev);
        if (rc != 0) {
            box->ev = NULL;
            return ampc_cuda_raise(fn, rc);
        }
        box->device = index;
    }
    rc = ampc_cuda.event_record(box->ev);
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_cuda_event_wait(PyObject *module, PyObject *args)
{
    const char *fn = "Event.wait";
    PyObject *obj;
    int index;
    if (!PyArg_ParseTuple(args, "Oi:cuda_event_wait", &obj, &index)) {
        return NULL;
    }
    event_box *box = event_arg(fn, obj);
    if (box == NULL) {
        return NULL;
    }
    if (box->ev == NULL) {
        Py_RETURN_NONE;         /* never recorded: nothing to wait for */
    }
    if (enter(fn, index) < 0 || refuse_capture(fn) < 0) {
        return NULL;
    }
    int rc = ampc_cuda.event_wait(box->ev);
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    Py_RETURN_NONE;
}

/* 1 when the event's work is done (or it was never recorded), 0 when not,
 * -1 with an exception. */
static int
event_done(const char *fn, event_box *box)
{
    if (box->ev == NULL) {
        return 1;
    }
    if (enter(fn, box->device) < 0) {
        return -1;
    }
    int done = 0;
    int rc = ampc_cuda.event_query(box->ev, &done);
    if (rc != 0) {
        ampc_cuda_raise(fn, rc);
        return -1;
    }
    return done;
}

static PyObject *
mod_cuda_event_query(PyObject *module, PyObject *obj)
{
    const char *fn = "Event.query";
    event_box *box = event_arg(fn, obj);
    if (box == NULL) {
        return NULL;
    }
    int done = event_done(fn, box);
    if (done < 0) {
        return NULL;
    }
    return PyBool_FromLong(done);
}

static PyObject *
mod_cuda_event_synchronize(PyObject *module, PyObject *obj)
{
    const char *fn = "Event.synchronize";
    event_box *box = event_arg(fn, obj);
    if (box == NULL) {
        return NULL;
    }
    if (box->ev == NULL) {
        Py_RETURN_NONE;
    }
    if (enter(fn, box->device) < 0 || ampc_cuda_check_no_wait(fn) < 0) {
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ampc_cuda.event_synchronize(box->ev);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    Py_RETURN_NONE;
}

/* cuda_event_elapsed(start, end) -> milliseconds between the records, with
 * PyTorch's checks, messages and exception types. */
static PyObject *
mod_cuda_event_elapsed(PyObject *module, PyObject *args)
{
    const char *fn = "Event.elapsed_time";
    PyObject *a_obj, *b_obj;
    if (!PyArg_ParseTuple(args, "OO:cuda_event_elapsed", &a_obj, &b_obj)) {
        return NULL;
    }
    event_box *a = event_arg(fn, a_obj), *b = NULL;
    if (a == NULL || (b = event_arg(fn, b_obj)) == NULL) {
        return NULL;
    }
    if (!a->timing || !b->timing) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): Both events must be created with argument "
                     "'enable_timing=True'.", fn);
        return NULL;
    }
    if (a->ev == NULL || b->ev == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): Both events must be recorded before calculating "
                     "elapsed time.", fn);
        return NULL;
    }
    if (a->device != b->device) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): the events were recorded on cuda:%d and cuda:%d; "
                     "both must be on the same device", fn, a->device,
                     b->device);
        return NULL;
    }
    int done_a = event_done(fn, a), done_b = 0;
    if (done_a < 0 || (done_b = event_done(fn, b)) < 0) {
        return NULL;
    }
    if (!done_a || !done_b) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Both events must be completed before calculating "
                     "elapsed time (call synchronize() on the end event "
                     "first).", fn);
        return NULL;
    }
    float ms = 0.0f;
    int rc = ampc_cuda.event_elapsed(a->ev, b->ev, &ms);
    if (rc != 0) {
        return ampc_cuda_raise(fn, rc);
    }
    return PyFloat_FromDouble((double)ms);
}

/* cuda_event_device(event) -> the device index it was recorded on, or
 * None before its first record. */
static PyObject *
mod_cuda_event_device(PyObject *module, PyObject *obj)
{
    event_box *box = event_arg("Event.device", obj);
    if (box == NULL) {
        return NULL;
    }
    if (box->ev == NULL) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLong(box->device);
}

PyMethodDef ampc_cuda_event_methods[] = {
    {"cuda_event_new", mod_cuda_event_new, METH_VARARGS,
     "cuda_event_new(enable_timing, blocking) -> an event handle (created "
     "on the GPU at its first record)"},
    {"cuda_event_record", mod_cuda_event_record, METH_VARARGS,
     "cuda_event_record(event, device_index): record on that device's "
     "ampc stream"},
    {"cuda_event_wait", mod_cuda_event_wait, METH_VARARGS,
     "cuda_event_wait(event, device_index): that device's ampc stream "
     "waits for the event"},
    {"cuda_event_query", mod_cuda_event_query, METH_O,
     "cuda_event_query(event) -> True when its work is done"},
    {"cuda_event_synchronize", mod_cuda_event_synchronize, METH_O,
     "cuda_event_synchronize(event): wait until its work is done"},
    {"cuda_event_elapsed", mod_cuda_event_elapsed, METH_VARARGS,
     "cuda_event_elapsed(start, end) -> milliseconds between the records"},
    {"cuda_event_device", mod_cuda_event_device, METH_O,
     "cuda_event_device(event) -> its device index, None before a record"},
    {NULL},
};
