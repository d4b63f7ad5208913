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
 * callback or an exception is added, and untracked again when a batch settles it with a
 * RecordMetadata of plain values, its callbacks taken off (untrack_settled): a caller that
 * keeps a batch's futures (asyncio.gather adds a callback to each) no longer has the
 * garbage collector walk all of them at every full collection.
 *
 * Ready is what send() returns: an awaitable (and, to asyncio.create_task, a coroutine)
 * whose await gives its value at once, with no frame.
 *
 * Like CPython's _asyncio.Future, these types own their state: nothing here reads another
 * class's attributes. kclient/aio/completions.py calls them with plain values; its
 * pure-Python path (asyncio futures, KCLIENT_PURE_PYTHON=1) settles asyncio futures the
 * same way. Threads: the event loop's, GIL held.
 */
#include "_future.h"

PyObject *kaio_CancelledError, *kaio_InvalidStateError;
PyTypeObject *kaio_RecordMetadataType;
PyObject *kaio_str_call_soon, *kaio_str_call_exception_handler, *kaio_str_context;
PyObject *kaio_kwnames_context;

static void
track(FutureObject *self)
{
    if (!PyObject_GC_IsTracked((PyObject *)self)) {
        PyObject_GC_Track((PyObject *)self);
    }
}

FutureObject *
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
int
call_soon(PyObject *loop, PyObject *fn, PyObject *future, PyObject *ctx)
{
    PyObject *meth = PyObject_GetAttr(loop, kaio_str_call_soon);
    if (meth == NULL) {
        return -1;
    }
    PyObject *args[3] = {fn, future, ctx};
    PyObject *res = PyObject_Vectorcall(meth, args, 2, kaio_kwnames_context);
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

/* A future finished with a result the garbage collector does not track (settle_ok's plain
 * RecordMetadata), no exception and its callbacks taken off: in no cycle, untracked (see the
 * top comment). A callback added later to a done future is not kept (call_soon). */
void
untrack_settled(FutureObject *self)
{
    if (self->state == FINISHED && self->exception == NULL && self->cb0 == NULL &&
        self->callbacks == NULL && self->result != NULL &&
        !PyObject_GC_IsTracked(self->result) && PyObject_GC_IsTracked((PyObject *)self)) {
        PyObject_GC_UnTrack(self);
    }
}

/* Mark done with a result (steals nothing) or an exception instance. */
int
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
        return PyObject_CallOneArg(kaio_CancelledError, self->cancel_msg);
    }
    return PyObject_CallNoArgs(kaio_CancelledError);
}

static void
raise_cancelled(FutureObject *self)
{
    PyObject *exc = cancelled_error(self);
    if (exc != NULL) {
        PyErr_SetObject(kaio_CancelledError, exc);
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
        PyErr_SetString(kaio_InvalidStateError, "Result is not set.");
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
        PyErr_SetString(kaio_InvalidStateError, "Exception is not set.");
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
        PyErr_SetString(kaio_InvalidStateError, "invalid state");
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
        PyErr_SetString(kaio_InvalidStateError, "invalid state");
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

PyObject *
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

/* The await protocol without a StopIteration (am_send, which the interpreter's await uses):
 * the future itself while pending, then its result (PYGEN_RETURN) or its exception. */
static PySendResult
Future_am_send(FutureObject *self, PyObject *Py_UNUSED(arg), PyObject **presult)
{
    if (self->state == PENDING) {
        self->blocking = 1;
        *presult = Py_NewRef(self);
        return PYGEN_NEXT;
    }
    *presult = Future_result(self, NULL);
    return *presult == NULL ? PYGEN_ERROR : PYGEN_RETURN;
}

/* asyncio's gather reads a cancelled child's message, or asks it for its error. */
static PyObject *
Future_get_cancel_message(FutureObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->cancel_msg != NULL ? self->cancel_msg : Py_None);
}

static PyObject *
Future_make_cancelled_error(FutureObject *self, PyObject *Py_UNUSED(ignored))
{
    return cancelled_error(self);
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
        PyObject *res = PyObject_CallMethodOneArg(self->loop, kaio_str_call_exception_handler, context);
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
    {"_make_cancelled_error", (PyCFunction)Future_make_cancelled_error, METH_NOARGS, NULL},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Future_getset[] = {
    {"_asyncio_future_blocking", (getter)Future_get_blocking, (setter)Future_set_blocking, NULL,
     NULL},
    {"_cancel_message", (getter)Future_get_cancel_message, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyAsyncMethods Future_async = {
    .am_await = (unaryfunc)Future_await,
    .am_send = (sendfunc)Future_am_send,
};

PyTypeObject kaio_FutureType = {
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

