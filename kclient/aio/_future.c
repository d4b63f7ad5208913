/*
 * kclient.aio._future: the future kclient.aio's send() returns, and the per-batch settle.
 *
 * RecordFuture is an asyncio-compatible future (asyncio.isfuture() is true: awaited by
 * Tasks, accepted by gather, wait, wait_for, shield, as_completed) that is not an
 * asyncio.Future: what it adds is that the producer can mark a whole batch's futures done
 * first (settle_ok / settle_error / settle_one put the waiting callbacks on a list) and
 * then run those callbacks in one pass (run_callbacks), directly, each in the context it
 * was registered with, instead of one loop.call_soon and Handle per callback. A Task
 * awaiting a record is then resumed in that pass, not one loop iteration later. When the
 * pass runs inside a Task (a Task cannot be entered from another), run_callbacks falls
 * back to call_soon. Everything a user calls (set_result, set_exception, cancel, and
 * add_done_callback on a done future) keeps asyncio's semantics: callbacks via call_soon.
 *
 * A future with no callbacks and no exception cannot be part of a reference cycle (it holds
 * its loop and a RecordMetadata), so it is tracked by the garbage collector only once a
 * callback or an exception is added.
 *
 * Ready is what send() returns: an awaitable (and, to asyncio.create_task, a coroutine)
 * whose await gives its value at once, with no frame. AioSend is AIOKafkaProducer.send's
 * common case (the record queued by KafkaProducer's C send_open, then tracked) without a
 * Python frame.
 *
 * kclient/aio/completions.py is the code that calls these; its pure-Python path (asyncio
 * futures, KCLIENT_PURE_PYTHON=1) is the reference. Threads: the event loop's, GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

enum { PENDING = 0, FINISHED = 1, CANCELLED = 2 };

static PyObject *CancelledError;    /* asyncio.CancelledError */
static PyObject *InvalidStateError; /* asyncio.InvalidStateError */
static PyTypeObject *RecordMetadataType;
static PyObject *str_call_soon, *str_call_exception_handler, *str_context;
static PyObject *str_produce_result, *str_offset_delta, *str_timestamp_ms, *str_key_size,
    *str_value_size;
static PyObject *kwnames_context; /* ("context",) */

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *result;
    PyObject *exception;
    PyObject *cancel_msg;
    PyObject *cb0; /* the first callback and its context, kept apart: usually the only one */
    PyObject *ctx0;
    PyObject *callbacks; /* the others: a list fn, ctx, fn, ctx, ... (or NULL) */
    PyObject *weakreflist;
    unsigned char state;
    unsigned char blocking; /* _asyncio_future_blocking */
    unsigned char log_tb;   /* an exception nobody retrieved yet */
} FutureObject;

static PyTypeObject FutureType;

#define Future_Check(op) PyObject_TypeCheck(op, &FutureType)

static void
track(FutureObject *self)
{
    if (!PyObject_GC_IsTracked((PyObject *)self)) {
        PyObject_GC_Track((PyObject *)self);
    }
}

static FutureObject *
future_create(PyTypeObject *type, PyObject *loop)
{
    FutureObject *self = PyObject_GC_New(FutureObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->loop = Py_NewRef(loop);
    self->result = self->exception = self->cancel_msg = NULL;
    self->cb0 = self->ctx0 = self->callbacks = NULL;
    self->weakreflist = NULL;
    self->state = PENDING;
    self->blocking = 0;
    self->log_tb = 0;
    return self; /* not tracked: see the top comment */
}

/* loop.call_soon(fn, future, context=ctx) */
static int
call_soon(PyObject *loop, PyObject *fn, PyObject *future, PyObject *ctx)
{
    PyObject *meth = PyObject_GetAttr(loop, str_call_soon);
    if (meth == NULL) {
        return -1;
    }
    PyObject *args[3] = {fn, future, ctx};
    PyObject *res = PyObject_Vectorcall(meth, args, 2, kwnames_context);
    Py_DECREF(meth);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

/* Take the callbacks off the future: appended to pending as (future, fn, ctx) when
 * pending is given, else each scheduled with call_soon (asyncio's way). */
static int
take_callbacks(FutureObject *self, PyObject *pending)
{
    PyObject *cb0 = self->cb0, *ctx0 = self->ctx0, *rest = self->callbacks;
    self->cb0 = self->ctx0 = self->callbacks = NULL;
    int rc = 0;
    if (cb0 != NULL) {
        if (pending != NULL) {
            if (PyList_Append(pending, (PyObject *)self) < 0 || PyList_Append(pending, cb0) < 0 ||
                PyList_Append(pending, ctx0) < 0) {
                rc = -1;
            }
        }
        else if (call_soon(self->loop, cb0, (PyObject *)self, ctx0) < 0) {
            rc = -1;
        }
    }
    if (rest != NULL) {
        Py_ssize_t n = PyList_GET_SIZE(rest);
        for (Py_ssize_t i = 0; rc == 0 && i + 1 < n; i += 2) {
            PyObject *fn = PyList_GET_ITEM(rest, i), *ctx = PyList_GET_ITEM(rest, i + 1);
            if (pending != NULL) {
                if (PyList_Append(pending, (PyObject *)self) < 0 ||
                    PyList_Append(pending, fn) < 0 || PyList_Append(pending, ctx) < 0) {
                    rc = -1;
                }
            }
            else if (call_soon(self->loop, fn, (PyObject *)self, ctx) < 0) {
                rc = -1;
            }
        }
    }
    Py_XDECREF(cb0);
    Py_XDECREF(ctx0);
    Py_XDECREF(rest);
    return rc;
}

/* Mark done with a result (steals nothing) or an exception instance. */
static int
finish(FutureObject *self, PyObject *result, PyObject *exception, PyObject *pending)
{
    if (exception != NULL) {
        self->exception = Py_NewRef(exception);
        self->log_tb = 1;
        track(self);
    }
    else {
        self->result = Py_NewRef(result);
    }
    self->state = FINISHED;
    return take_callbacks(self, pending);
}

static PyObject *
cancelled_error(FutureObject *self)
{
    if (self->cancel_msg != NULL && self->cancel_msg != Py_None) {
        return PyObject_CallOneArg(CancelledError, self->cancel_msg);
    }
    return PyObject_CallNoArgs(CancelledError);
}

static void
raise_cancelled(FutureObject *self)
{
    PyObject *exc = cancelled_error(self);
    if (exc != NULL) {
        PyErr_SetObject(CancelledError, exc);
        Py_DECREF(exc);
    }
}

/* ---- the asyncio future protocol ------------------------------------------------------- */

static PyObject *
Future_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"loop", NULL};
    PyObject *loop;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:RecordFuture", kwlist, &loop)) {
        return NULL;
    }
    return (PyObject *)future_create(type, loop);
}

static PyObject *
Future_result(FutureObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->state == CANCELLED) {
        raise_cancelled(self);
        return NULL;
    }
    if (self->state == PENDING) {
        PyErr_SetString(InvalidStateError, "Result is not set.");
        return NULL;
    }
    if (self->exception != NULL) {
        self->log_tb = 0;
        PyErr_SetObject((PyObject *)Py_TYPE(self->exception), self->exception);
        return NULL;
    }
    return Py_NewRef(self->result);
}

static PyObject *
Future_exception(FutureObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->state == CANCELLED) {
        raise_cancelled(self);
        return NULL;
    }
    if (self->state == PENDING) {
        PyErr_SetString(InvalidStateError, "Exception is not set.");
        return NULL;
    }
    self->log_tb = 0;
    return Py_NewRef(self->exception != NULL ? self->exception : Py_None);
}

static PyObject *
Future_done(FutureObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->state != PENDING);
}

static PyObject *
Future_cancelled(FutureObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->state == CANCELLED);
}

static PyObject *
Future_get_loop(FutureObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self->loop);
}

static PyObject *
Future_cancel(FutureObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"msg", NULL};
    PyObject *msg = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:cancel", kwlist, &msg)) {
        return NULL;
    }
    if (self->state != PENDING) {
        Py_RETURN_FALSE;
    }
    self->state = CANCELLED;
    Py_XSETREF(self->cancel_msg, Py_NewRef(msg));
    if (take_callbacks(self, NULL) < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *
Future_set_result(FutureObject *self, PyObject *result)
{
    if (self->state != PENDING) {
        PyErr_SetString(InvalidStateError, "invalid state");
        return NULL;
    }
    track(self); /* a result of the caller's choosing may refer back to the future */
    if (finish(self, result, NULL, NULL) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
Future_set_exception(FutureObject *self, PyObject *exception)
{
    if (self->state != PENDING) {
        PyErr_SetString(InvalidStateError, "invalid state");
        return NULL;
    }
    PyObject *instance;
    if (PyExceptionClass_Check(exception)) {
        instance = PyObject_CallNoArgs(exception);
        if (instance == NULL) {
            return NULL;
        }
    }
    else {
        instance = Py_NewRef(exception);
    }
    if (!PyExceptionInstance_Check(instance)) {
        Py_DECREF(instance);
        PyErr_SetString(PyExc_TypeError, "invalid exception object");
        return NULL;
    }
    if (PyErr_GivenExceptionMatches(instance, PyExc_StopIteration)) {
        Py_DECREF(instance);
        PyErr_SetString(PyExc_TypeError,
                        "StopIteration interacts badly with generators and cannot be raised into "
                        "a Future");
        return NULL;
    }
    int rc = finish(self, NULL, instance, NULL);
    Py_DECREF(instance);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
Future_add_done_callback(FutureObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs != 1 || nkw > 1 ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "context"))) {
        PyErr_SetString(PyExc_TypeError, "add_done_callback(fn, *, context=None)");
        return NULL;
    }
    PyObject *fn = args[0];
    PyObject *ctx = nkw == 1 ? args[1] : Py_None;
    if (ctx == Py_None) {
        ctx = PyContext_CopyCurrent();
        if (ctx == NULL) {
            return NULL;
        }
    }
    else {
        Py_INCREF(ctx);
    }
    if (self->state != PENDING) {
        int rc = call_soon(self->loop, fn, (PyObject *)self, ctx);
        Py_DECREF(ctx);
        if (rc < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    track(self);
    if (self->cb0 == NULL) {
        self->cb0 = Py_NewRef(fn);
        self->ctx0 = ctx;
        Py_RETURN_NONE;
    }
    if (self->callbacks == NULL) {
        self->callbacks = PyList_New(0);
        if (self->callbacks == NULL) {
            Py_DECREF(ctx);
            return NULL;
        }
    }
    int rc = PyList_Append(self->callbacks, fn) < 0 || PyList_Append(self->callbacks, ctx) < 0;
    Py_DECREF(ctx);
    if (rc) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
Future_remove_done_callback(FutureObject *self, PyObject *fn)
{
    Py_ssize_t removed = 0;
    if (self->cb0 != NULL) {
        int eq = PyObject_RichCompareBool(self->cb0, fn, Py_EQ);
        if (eq < 0) {
            return NULL;
        }
        if (eq) {
            Py_CLEAR(self->cb0);
            Py_CLEAR(self->ctx0);
            removed++;
        }
    }
    if (self->callbacks != NULL) {
        PyObject *kept = PyList_New(0);
        if (kept == NULL) {
            return NULL;
        }
        PyObject *old = Py_NewRef(self->callbacks);
        for (Py_ssize_t i = 0; i + 1 < PyList_GET_SIZE(old); i += 2) {
            PyObject *item = PyList_GET_ITEM(old, i), *ctx = PyList_GET_ITEM(old, i + 1);
            int eq = PyObject_RichCompareBool(item, fn, Py_EQ);
            if (eq < 0 ||
                (!eq && (PyList_Append(kept, item) < 0 || PyList_Append(kept, ctx) < 0))) {
                Py_DECREF(kept);
                Py_DECREF(old);
                return NULL;
            }
            removed += eq;
        }
        Py_DECREF(old);
        Py_XSETREF(self->callbacks, kept);
    }
    return PyLong_FromSsize_t(removed);
}

/* await future: yield it (blocking) while pending, then its result or exception. The
 * future is its own iterator, as it keeps no per-await state. */
static PyObject *
Future_await(FutureObject *self)
{
    return Py_NewRef(self);
}

static PyObject *
stop_iteration(PyObject *value)
{
    PyObject *exc = PyObject_CallOneArg(PyExc_StopIteration, value);
    if (exc != NULL) {
        PyErr_SetObject(PyExc_StopIteration, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *
Future_next(FutureObject *self)
{
    if (self->state == PENDING) {
        self->blocking = 1;
        return Py_NewRef(self);
    }
    PyObject *result = Future_result(self, NULL);
    if (result == NULL) {
        return NULL;
    }
    if (result == Py_None) {
        Py_DECREF(result);
        return NULL; /* StopIteration with no value */
    }
    stop_iteration(result);
    Py_DECREF(result);
    return NULL;
}

static PyObject *
Future_get_blocking(FutureObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->blocking);
}

static int
Future_set_blocking(FutureObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete _asyncio_future_blocking");
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    if (truth < 0) {
        return -1;
    }
    self->blocking = (unsigned char)truth;
    return 0;
}

static PyObject *
Future_repr(FutureObject *self)
{
    if (self->state == CANCELLED) {
        return PyUnicode_FromString("<RecordFuture cancelled>");
    }
    if (self->state == PENDING) {
        return PyUnicode_FromString("<RecordFuture pending>");
    }
    if (self->exception != NULL) {
        return PyUnicode_FromFormat("<RecordFuture finished exception=%R>", self->exception);
    }
    return PyUnicode_FromFormat("<RecordFuture finished result=%R>", self->result);
}

/* A failed future dropped without anyone reading its exception: say so, as asyncio does. */
static void
Future_finalize(FutureObject *self)
{
    if (!self->log_tb || self->exception == NULL) {
        return;
    }
    self->log_tb = 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *context = Py_BuildValue("{s:s,s:O,s:O}", "message",
                                      "Future exception was never retrieved", "exception",
                                      self->exception, "future", (PyObject *)self);
    if (context != NULL) {
        PyObject *res = PyObject_CallMethodOneArg(self->loop, str_call_exception_handler, context);
        if (res == NULL) {
            PyErr_WriteUnraisable((PyObject *)self);
        }
        Py_XDECREF(res);
        Py_DECREF(context);
    }
    else {
        PyErr_WriteUnraisable((PyObject *)self);
    }
    PyErr_Restore(type, value, tb);
}

static int
Future_traverse(FutureObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->loop);
    Py_VISIT(self->result);
    Py_VISIT(self->exception);
    Py_VISIT(self->cancel_msg);
    Py_VISIT(self->cb0);
    Py_VISIT(self->ctx0);
    Py_VISIT(self->callbacks);
    return 0;
}

static int
Future_clear(FutureObject *self)
{
    Py_CLEAR(self->loop);
    Py_CLEAR(self->result);
    Py_CLEAR(self->exception);
    Py_CLEAR(self->cancel_msg);
    Py_CLEAR(self->cb0);
    Py_CLEAR(self->ctx0);
    Py_CLEAR(self->callbacks);
    return 0;
}

static void
Future_dealloc(FutureObject *self)
{
    if (PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0) {
        return; /* resurrected */
    }
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    Future_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Future_methods[] = {
    {"result", (PyCFunction)Future_result, METH_NOARGS, "The record's metadata, or raise."},
    {"exception", (PyCFunction)Future_exception, METH_NOARGS, "The error, or None."},
    {"done", (PyCFunction)Future_done, METH_NOARGS, NULL},
    {"cancelled", (PyCFunction)Future_cancelled, METH_NOARGS, NULL},
    {"get_loop", (PyCFunction)Future_get_loop, METH_NOARGS, NULL},
    {"cancel", (PyCFunction)(void (*)(void))Future_cancel, METH_VARARGS | METH_KEYWORDS,
     "Cancel this wait (the record is still delivered)."},
    {"set_result", (PyCFunction)Future_set_result, METH_O, NULL},
    {"set_exception", (PyCFunction)Future_set_exception, METH_O, NULL},
    {"add_done_callback", (PyCFunction)(void (*)(void))Future_add_done_callback,
     METH_FASTCALL | METH_KEYWORDS, "fn(future) once done, in context (default: a copy)."},
    {"remove_done_callback", (PyCFunction)Future_remove_done_callback, METH_O, NULL},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Future_getset[] = {
    {"_asyncio_future_blocking", (getter)Future_get_blocking, (setter)Future_set_blocking, NULL,
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyAsyncMethods Future_async = {.am_await = (unaryfunc)Future_await};

static PyTypeObject FutureType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.RecordFuture",
    .tp_doc = "The future of one record sent with kclient.aio (asyncio-compatible).",
    .tp_basicsize = sizeof(FutureObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Future_new,
    .tp_dealloc = (destructor)Future_dealloc,
    .tp_finalize = (destructor)Future_finalize,
    .tp_traverse = (traverseproc)Future_traverse,
    .tp_clear = (inquiry)Future_clear,
    .tp_repr = (reprfunc)Future_repr,
    .tp_as_async = &Future_async,
    .tp_iter = (getiterfunc)Future_await,
    .tp_iternext = (iternextfunc)Future_next,
    .tp_weaklistoffset = offsetof(FutureObject, weakreflist),
    .tp_methods = Future_methods,
    .tp_getset = Future_getset,
};

/* ---- Ready: an awaitable that is already done ----------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *value;
} ReadyObject;

static PyTypeObject ReadyType;

static PyObject *
ready_create(PyObject *value)
{
    ReadyObject *self = PyObject_New(ReadyObject, &ReadyType);
    if (self != NULL) {
        self->value = Py_NewRef(value);
    }
    return (PyObject *)self;
}

static PyObject *
Ready_new(PyTypeObject *Py_UNUSED(type), PyObject *args, PyObject *kwds)
{
    PyObject *value;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Ready(value) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:Ready", &value)) {
        return NULL;
    }
    return ready_create(value);
}

static PyObject *
Ready_await(PyObject *self)
{
    return Py_NewRef(self);
}

static PyObject *
Ready_next(ReadyObject *self)
{
    return stop_iteration(self->value);
}

static PyObject *
Ready_send(ReadyObject *self, PyObject *Py_UNUSED(arg))
{
    return stop_iteration(self->value);
}

static PyObject *
Ready_throw(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *type, *value = NULL, *tb = NULL;
    if (!PyArg_UnpackTuple(args, "throw", 1, 3, &type, &value, &tb)) {
        return NULL;
    }
    if (PyExceptionInstance_Check(type)) {
        PyErr_SetObject((PyObject *)Py_TYPE(type), type);
    }
    else {
        PyErr_SetObject(type, value == NULL ? Py_None : value);
    }
    return NULL;
}

static PyObject *
Ready_close(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(ignored))
{
    Py_RETURN_NONE;
}

static void
Ready_dealloc(ReadyObject *self)
{
    Py_DECREF(self->value);
    PyObject_Free(self);
}

static PyMethodDef Ready_methods[] = {
    {"send", (PyCFunction)Ready_send, METH_O, NULL},
    {"throw", (PyCFunction)Ready_throw, METH_VARARGS, NULL},
    {"close", (PyCFunction)Ready_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods Ready_async = {.am_await = (unaryfunc)Ready_await};

static PyTypeObject ReadyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.Ready",
    .tp_doc = "An awaitable whose await returns its value at once (send()'s return).",
    .tp_basicsize = sizeof(ReadyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Ready_new,
    .tp_dealloc = (destructor)Ready_dealloc,
    .tp_as_async = &Ready_async,
    .tp_iter = (getiterfunc)Ready_await,
    .tp_iternext = (iternextfunc)Ready_next,
    .tp_methods = Ready_methods,
};

/* ---- tracking and settling a batch's records ------------------------------------------ */

/* track(groups, loop, new_group, record) -> Ready(future): a new future for record (just
 * queued), its row (future, offset delta, timestamp ms, key size, value size) appended to
 * groups[record._produce_result] (a flat list); new_group(record) answers instead when there is no
 * group for that batch yet. */
static PyObject *
aio_track(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "track(groups, loop, new_group, record)");
        return NULL;
    }
    PyObject *groups = args[0], *loop = args[1], *record = args[3];
    if (!PyDict_Check(groups)) {
        PyErr_SetString(PyExc_TypeError, "track(): groups must be a dict");
        return NULL;
    }
    PyObject *result = PyObject_GetAttr(record, str_produce_result);
    if (result == NULL) {
        return NULL;
    }
    PyObject *rows = PyDict_GetItemWithError(groups, result);
    Py_DECREF(result);
    if (rows == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return PyObject_CallOneArg(args[2], record);
    }
    if (!PyList_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "track(): a group must be a list");
        return NULL;
    }
    PyObject *future = (PyObject *)future_create(&FutureType, loop);
    if (future == NULL) {
        return NULL;
    }
    PyObject *names[4] = {str_offset_delta, str_timestamp_ms, str_key_size, str_value_size};
    PyObject *row[5] = {future, NULL, NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) {
        row[i + 1] = PyObject_GetAttr(record, names[i]);
        rc = row[i + 1] == NULL ? -1 : 0;
    }
    /* flat, no tuple per record: one object fewer for the garbage collector to walk */
    for (int i = 0; i < 5 && rc == 0; i++) {
        rc = PyList_Append(rows, row[i]);
    }
    for (int i = 1; i < 5; i++) {
        Py_XDECREF(row[i]);
    }
    if (rc < 0) {
        Py_DECREF(future);
        return NULL;
    }
    PyObject *ready = ready_create(future);
    Py_DECREF(future);
    return ready;
}

static int
check_pending(PyObject *pending)
{
    if (!PyList_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "pending must be a list");
        return -1;
    }
    return 0;
}

static PyObject *
metadata(PyObject *topic, PyObject *partition, long long base_offset, long long append_ms,
         PyObject **row)
{
    long long delta = PyLong_AsLongLong(row[1]);
    if (delta == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *md = RecordMetadataType->tp_alloc(RecordMetadataType, 6);
    if (md == NULL) {
        return NULL;
    }
    PyObject *offset = PyLong_FromLongLong(base_offset >= 0 ? base_offset + delta : -1);
    PyObject *timestamp = append_ms >= 0 ? PyLong_FromLongLong(append_ms) : Py_NewRef(row[2]);
    if (offset == NULL || timestamp == NULL) {
        Py_XDECREF(offset);
        Py_XDECREF(timestamp);
        Py_DECREF(md);
        return NULL;
    }
    PyTuple_SET_ITEM(md, 0, Py_NewRef(topic));
    PyTuple_SET_ITEM(md, 1, Py_NewRef(partition));
    PyTuple_SET_ITEM(md, 2, offset);
    PyTuple_SET_ITEM(md, 3, timestamp);
    PyTuple_SET_ITEM(md, 4, Py_NewRef(row[3]));
    PyTuple_SET_ITEM(md, 5, Py_NewRef(row[4]));
    return md;
}

/* rows: a list of (future, offset delta, timestamp ms, key size, value size), flat. */
static int
check_rows(PyObject *rows)
{
    if (!PyList_CheckExact(rows) || PyList_GET_SIZE(rows) % 5) {
        PyErr_SetString(PyExc_TypeError, "rows: a flat list of (future, delta, ts, k, v)");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i += 5) {
        if (!Future_Check(PyList_GET_ITEM(rows, i))) {
            PyErr_SetString(PyExc_TypeError, "rows: each row starts with its RecordFuture");
            return -1;
        }
    }
    return 0;
}

/* settle_ok(rows, topic, partition, base_offset, log_append_time_ms, pending): each row's
 * future (not cancelled by its caller) gets its RecordMetadata; their callbacks go to
 * pending, for run_callbacks once every future of the batch is done. */
static PyObject *
aio_settle_ok(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "settle_ok(rows, topic, partition, base_offset, log_append_time_ms, "
                        "pending)");
        return NULL;
    }
    PyObject *rows = args[0], *topic = args[1], *partition = args[2], *pending = args[5];
    long long base_offset = PyLong_AsLongLong(args[3]);
    long long append_ms = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred() || check_pending(pending) < 0) {
        return NULL;
    }
    if (check_rows(rows) < 0) {
        return NULL;
    }
    PyObject **items = ((PyListObject *)rows)->ob_item; /* not resized below: no user code */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i += 5) {
        FutureObject *future = (FutureObject *)items[i];
        if (future->state != PENDING) {
            continue; /* cancelled by its caller */
        }
        PyObject *md = metadata(topic, partition, base_offset, append_ms, items + i);
        if (md == NULL) {
            return NULL;
        }
        int rc = finish(future, md, NULL, pending);
        Py_DECREF(md);
        if (rc < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* settle_error(rows, error, pending): each row's future (not cancelled) fails with error. */
static PyObject *
aio_settle_error(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyExceptionInstance_Check(args[1]) ||
        check_pending(args[2]) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "settle_error(rows: list, error, pending: list)");
        }
        return NULL;
    }
    PyObject *rows = args[0];
    if (check_rows(rows) < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i += 5) {
        FutureObject *future = (FutureObject *)PyList_GET_ITEM(rows, i);
        if (future->state == PENDING && finish(future, NULL, args[1], args[2]) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* settle_one(future, result, error, pending): one future (unless cancelled): error if not
 * None, else result; its callbacks go to pending. */
static PyObject *
aio_settle_one(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !Future_Check(args[0]) || check_pending(args[3]) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "settle_one(future, result, error, pending)");
        }
        return NULL;
    }
    FutureObject *future = (FutureObject *)args[0];
    if (future->state == PENDING) {
        PyObject *error = args[2] == Py_None ? NULL : args[2];
        if (finish(future, args[1], error, args[3]) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* A callback run directly raised an Exception: to the loop's exception handler, as the
 * loop does for a callback it runs. */
static int
report(PyObject *loop, PyObject *fn, PyObject *future)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    PyObject *message = PyUnicode_FromFormat("Exception in callback %R", fn);
    PyObject *context = NULL;
    if (message != NULL) {
        context = Py_BuildValue("{s:O,s:O,s:O}", "message", message, "exception",
                                value ? value : Py_None, "future", future);
    }
    Py_XDECREF(message);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (context == NULL) {
        return -1;
    }
    PyObject *res = PyObject_CallMethodOneArg(loop, str_call_exception_handler, context);
    Py_DECREF(context);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

/* run_callbacks(pending, loop, direct): pending is (future, fn, ctx) flat. direct: call
 * each fn(future) now in ctx (not inside a running Task); else loop.call_soon each. A
 * KeyboardInterrupt or SystemExit stops the pass: the callbacks left go to call_soon. */
static PyObject *
aio_run_callbacks(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || check_pending(args[0]) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "run_callbacks(pending, loop, direct)");
        }
        return NULL;
    }
    PyObject *pending = args[0], *loop = args[1];
    int direct = PyObject_IsTrue(args[2]);
    if (direct < 0) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(pending);
    for (Py_ssize_t i = 0; i + 2 < n; i += 3) {
        PyObject *future = Py_NewRef(PyList_GET_ITEM(pending, i));
        PyObject *fn = Py_NewRef(PyList_GET_ITEM(pending, i + 1));
        PyObject *ctx = Py_NewRef(PyList_GET_ITEM(pending, i + 2));
        int rc = 0;
        if (direct && PyContext_Enter(ctx) == 0) {
            PyObject *res = PyObject_CallOneArg(fn, future);
            PyContext_Exit(ctx);
            if (res != NULL) {
                Py_DECREF(res);
            }
            else if (PyErr_ExceptionMatches(PyExc_Exception)) {
                rc = report(loop, fn, future);
            }
            else {
                rc = -2;
            }
        }
        else {
            PyErr_Clear(); /* a context already entered: that callback goes the loop's way */
            rc = call_soon(loop, fn, future, ctx);
        }
        Py_DECREF(future);
        Py_DECREF(fn);
        Py_DECREF(ctx);
        if (rc == -2) { /* KeyboardInterrupt, SystemExit: the rest later, then raise */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            for (Py_ssize_t j = i + 3; j + 2 < n; j += 3) {
                if (call_soon(loop, PyList_GET_ITEM(pending, j + 1), PyList_GET_ITEM(pending, j),
                              PyList_GET_ITEM(pending, j + 2)) < 0) {
                    PyErr_WriteUnraisable(loop);
                }
            }
            PyErr_Restore(type, value, tb);
            return NULL;
        }
        if (rc < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* ---- AioSend: AIOKafkaProducer.send without a Python frame -------------------------------- */

/* send = AioSend(general): a method descriptor. On the class it is `general` (the Python
 * send: signature, docstring). Called on a producer whose `_fast` is (producer, groups,
 * loop, new_group) — started, its Sender on the loop, not stopped — it hands the record to
 * the producer's `_fast_send.send_open` (KafkaProducer.send's common case, _send.c) and
 * returns track(...) of the record future; anything else (no `_fast`, no `_fast_send`,
 * send_open declining, an argument it does not know) calls `general` with the same
 * arguments. */
typedef struct {
    PyObject_HEAD
    PyObject *general;
    vectorcallfunc vectorcall;
} AioSendObject;

static PyObject *str_fast, *str_fast_send, *str_send_open;
static PyObject *send_kw_names[6]; /* topic value key partition timestamp_ms headers */

static PyObject *
aio_send_call(AioSendObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    /* producer, topic, value, key, partition, timestamp_ms, headers */
    PyObject *argv[7] = {NULL, NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (nargs < 1 || nargs > 7) {
        goto general;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        argv[i] = args[i];
    }
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            int j = 0;
            while (j < 6 && name != send_kw_names[j]) { /* interned: the compiler's names */
                j++;
            }
            if (j == 6 || j + 1 < nargs) { /* unknown, or also given positionally */
                goto general;
            }
            argv[j + 1] = args[nargs + i];
        }
    }
    if (argv[1] == NULL) {
        goto general;
    }
    PyObject *fast = PyObject_GetAttr(argv[0], str_fast);
    if (fast == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(fast) || PyTuple_GET_SIZE(fast) != 4) {
        Py_DECREF(fast);
        goto general;
    }
    PyObject *appender = PyObject_GetAttr(PyTuple_GET_ITEM(fast, 0), str_fast_send);
    if (appender == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    if (appender == Py_None) {
        Py_DECREF(appender);
        Py_DECREF(fast);
        goto general;
    }
    /* send_open(topic, value, key, partition, timestamp_ms, headers, callback) */
    PyObject *open_args[8] = {appender, argv[1], argv[2], argv[3], argv[4], argv[5], argv[6],
                              Py_None};
    PyObject *record = PyObject_VectorcallMethod(str_send_open, open_args, 8, NULL);
    Py_DECREF(appender);
    if (record == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    if (record == Py_None) {
        Py_DECREF(record);
        Py_DECREF(fast);
        goto general;
    }
    PyObject *track_args[4] = {PyTuple_GET_ITEM(fast, 1), PyTuple_GET_ITEM(fast, 2),
                               PyTuple_GET_ITEM(fast, 3), record};
    PyObject *ready = aio_track(NULL, track_args, 4);
    Py_DECREF(record);
    Py_DECREF(fast);
    return ready;
general:
    return PyObject_Vectorcall(self->general, args, nargsf, kwnames);
}

static PyObject *
aio_send_get(AioSendObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self->general);
    }
    return PyMethod_New((PyObject *)self, obj);
}

static PyObject *
aio_send_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *general;
    static char *names[] = {"general", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:AioSend", names, &general)) {
        return NULL;
    }
    AioSendObject *self = (AioSendObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->general = Py_NewRef(general);
    self->vectorcall = (vectorcallfunc)aio_send_call;
    return (PyObject *)self;
}

static void
aio_send_dealloc(AioSendObject *self)
{
    Py_CLEAR(self->general);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* __doc__, __name__, __wrapped__, ...: the Python send's. */
static PyObject *
aio_send_getattro(AioSendObject *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr((PyObject *)self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        return found;
    }
    PyErr_Clear();
    if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) {
        return Py_NewRef(self->general);
    }
    return PyObject_GetAttr(self->general, name);
}

static PyTypeObject AioSendType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.AioSend",
    .tp_basicsize = sizeof(AioSendObject),
    .tp_dealloc = (destructor)aio_send_dealloc,
    .tp_vectorcall_offset = offsetof(AioSendObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = (getattrofunc)aio_send_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_descr_get = (descrgetfunc)aio_send_get,
    .tp_new = aio_send_new,
};

static PyMethodDef module_methods[] = {
    {"track", (PyCFunction)(void (*)(void))aio_track, METH_FASTCALL, NULL},
    {"settle_ok", (PyCFunction)(void (*)(void))aio_settle_ok, METH_FASTCALL, NULL},
    {"settle_error", (PyCFunction)(void (*)(void))aio_settle_error, METH_FASTCALL, NULL},
    {"settle_one", (PyCFunction)(void (*)(void))aio_settle_one, METH_FASTCALL, NULL},
    {"run_callbacks", (PyCFunction)(void (*)(void))aio_run_callbacks, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef future_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.aio._future",
    .m_doc = "kclient.aio's record future and per-batch settle (see completions.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

static int
intern_all(void)
{
#define INTERN(var, text)                                                                      \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_call_soon, "call_soon");
    INTERN(str_call_exception_handler, "call_exception_handler");
    INTERN(str_context, "context");
    INTERN(str_produce_result, "_produce_result");
    INTERN(str_offset_delta, "_offset_delta");
    INTERN(str_timestamp_ms, "_timestamp_ms");
    INTERN(str_key_size, "_key_size");
    INTERN(str_value_size, "_value_size");
    INTERN(str_fast, "_fast");
    INTERN(str_fast_send, "_fast_send");
    INTERN(str_send_open, "send_open");
    static const char *names[6] = {"topic", "value", "key", "partition", "timestamp_ms",
                                   "headers"};
    for (int i = 0; i < 6; i++) {
        INTERN(send_kw_names[i], names[i]);
    }
#undef INTERN
    kwnames_context = PyTuple_Pack(1, str_context);
    return kwnames_context == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__future(void)
{
    if (PyType_Ready(&FutureType) < 0 || PyType_Ready(&ReadyType) < 0 ||
        PyType_Ready(&AioSendType) < 0) {
        return NULL;
    }
    if (CancelledError == NULL) {
        PyObject *asyncio = PyImport_ImportModule("asyncio");
        if (asyncio == NULL) {
            return NULL;
        }
        CancelledError = PyObject_GetAttrString(asyncio, "CancelledError");
        InvalidStateError = PyObject_GetAttrString(asyncio, "InvalidStateError");
        Py_DECREF(asyncio);
        PyObject *future = PyImport_ImportModule("kclient.sender.future");
        if (future == NULL) {
            return NULL;
        }
        RecordMetadataType = (PyTypeObject *)PyObject_GetAttrString(future, "RecordMetadata");
        Py_DECREF(future);
        if (CancelledError == NULL || InvalidStateError == NULL || RecordMetadataType == NULL ||
            intern_all() < 0) {
            return NULL;
        }
        if (!PyType_Check(RecordMetadataType) ||
            !PyType_IsSubtype(RecordMetadataType, &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "RecordMetadata must be a tuple type");
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&future_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "RecordFuture", (PyObject *)&FutureType) < 0 ||
        PyModule_AddObjectRef(module, "Ready", (PyObject *)&ReadyType) < 0 ||
        PyModule_AddObjectRef(module, "AioSend", (PyObject *)&AioSendType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
