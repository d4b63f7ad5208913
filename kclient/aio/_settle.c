/*
 * kclient.aio._future's Ready (send()'s return: an awaitable already done) and the
 * per-batch settle of RecordFutures whose callbacks run in one pass (run_callbacks). See
 * _future.c for the design; completions.py calls these with plain values (rows of ints, a
 * topic, offsets), never a Python object of another class to read.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"
#include "../_pycall.h" /* take_exception */

/* ---- Ready: an awaitable that is already done ----------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *value;
} ReadyObject;

PyObject *
ready_create(PyObject *value)
{
    ReadyObject *self = PyObject_New(ReadyObject, &kaio_ReadyType);
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

static PySendResult
Ready_am_send(ReadyObject *self, PyObject *Py_UNUSED(arg), PyObject **presult)
{
    *presult = Py_NewRef(self->value);
    return PYGEN_RETURN;
}

static PyObject *
Ready_send(ReadyObject *self, PyObject *Py_UNUSED(arg))
{
    return stop_iteration(self->value);
}

/* throw(type[, value[, tb]]) of an awaitable that does not catch: raise what it was given.
 * Always NULL. */
static PyObject *
raise_thrown(PyObject *args)
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
Ready_throw(PyObject *Py_UNUSED(self), PyObject *args)
{
    return raise_thrown(args);
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

static PyAsyncMethods Ready_async = {
    .am_await = (unaryfunc)Ready_await,
    .am_send = (sendfunc)Ready_am_send,
};

PyTypeObject kaio_ReadyType = {
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

/* ---- settling a batch's records ------------------------------------------------------ */

/* add_row(rows, loop, offset_delta, timestamp_ms, key_size, value_size) -> Ready(future):
 * a new RecordFuture of loop, its row (future, offset delta, timestamp ms, key size, value
 * size) appended to rows (a batch's group, flat: no tuple per record, one object fewer for
 * the garbage collector to walk). The values are the caller's; nothing is read here. */
PyObject *
aio_add_row(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "add_row(rows: list, loop, offset_delta, timestamp_ms, key_size, "
                        "value_size)");
        return NULL;
    }
    PyObject *rows = args[0];
    PyObject *future = (PyObject *)future_create(&kaio_FutureType, args[1]);
    if (future == NULL) {
        return NULL;
    }
    Py_ssize_t size = PyList_GET_SIZE(rows);
    int rc = PyList_Append(rows, future);
    for (int i = 2; i < 6 && rc == 0; i++) {
        rc = PyList_Append(rows, args[i]);
    }
    if (rc < 0) { /* no half row left behind */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        (void)PyList_SetSlice(rows, size, PyList_GET_SIZE(rows), NULL);
        PyErr_Restore(type, value, tb);
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
    PyObject *md = kaio_RecordMetadataType->tp_alloc(kaio_RecordMetadataType, 7);
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
    /* timestamp_type: 1 (LogAppendTime) when the broker set the time, else 0 */
    PyObject *kind = PyLong_FromLong(append_ms >= 0 ? 1 : 0);
    PyTuple_SET_ITEM(md, 6, kind);
    if (kind == NULL) {
        Py_DECREF(md);
        return NULL;
    }
    /* Of exact str and int only, it can be in no reference cycle: the garbage collector need
     * not walk it (CPython untracks such plain tuples itself, not tuple subclasses). A
     * batch of 10,000 records leaves 10,000 of these alive, each walked by every full
     * collection until the caller drops them. */
    int plain = 1;
    for (Py_ssize_t i = 0; i < 7 && plain; i++) {
        PyObject *item = PyTuple_GET_ITEM(md, i);
        plain = PyLong_CheckExact(item) || PyUnicode_CheckExact(item) || item == Py_None;
    }
    if (plain) {
        PyObject_GC_UnTrack(md);
    }
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
PyObject *
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
        if (rc == 0) {
            untrack_settled(future);
        }
        Py_DECREF(md);
        if (rc < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* settle_error(rows, error, pending): each row's future (not cancelled) fails with error. */
PyObject *
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
PyObject *
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
    PyObject *value = take_exception();
    PyObject *message = PyUnicode_FromFormat("Exception in callback %R", fn);
    PyObject *context = NULL;
    if (message != NULL) {
        context = Py_BuildValue("{s:O,s:O,s:O}", "message", message, "exception",
                                value ? value : Py_None, "future", future);
    }
    Py_XDECREF(message);
    Py_XDECREF(value);
    if (context == NULL) {
        return -1;
    }
    PyObject *res = PyObject_CallMethodOneArg(loop, kaio_str_call_exception_handler, context);
    Py_DECREF(context);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

/* The pass over `taken` (the callbacks taken off pending): see run_callbacks. */
static PyObject *
run_taken(PyObject *pending, PyObject *loop, int direct)
{
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

/* One pass: every item taken off `pending` first (callbacks settling more futures fill it
 * again for the next pass), then run (see run_taken). None, or NULL. */
static PyObject *
run_pass(PyObject *pending, PyObject *loop, int direct)
{
    Py_ssize_t n = PyList_GET_SIZE(pending);
    PyObject *taken = PyList_GetSlice(pending, 0, n);
    if (taken == NULL || PyList_SetSlice(pending, 0, n, NULL) < 0) {
        Py_XDECREF(taken);
        return NULL;
    }
    PyObject *done = run_taken(taken, loop, direct);
    Py_DECREF(taken);
    return done;
}

/* run_callbacks(pending, loop, direct): pending is (future, fn, ctx) flat; its items are
 * taken off it first (emptied: callbacks settling more futures fill it for the next
 * pass). direct: call each fn(future) now in ctx (not inside a running Task); else
 * loop.call_soon each. A KeyboardInterrupt or SystemExit stops the pass: the callbacks left
 * go to call_soon. */
PyObject *
aio_run_callbacks(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || check_pending(args[0]) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "run_callbacks(pending, loop, direct)");
        }
        return NULL;
    }
    int direct = PyObject_IsTrue(args[2]);
    return direct < 0 ? NULL : run_pass(args[0], args[1], direct);
}

/* dispatch(pending, loop, current_task): BatchCompletions.dispatch without its frame: when
 * pending is not empty, run_callbacks(pending, loop, current_task(loop) is None). */
PyObject *
aio_dispatch(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || check_pending(args[0]) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "dispatch(pending, loop, current_task)");
        }
        return NULL;
    }
    if (PyList_GET_SIZE(args[0]) == 0) {
        Py_RETURN_NONE;
    }
    PyObject *task = PyObject_CallOneArg(args[2], args[1]);
    if (task == NULL) {
        return NULL;
    }
    int direct = task == Py_None;
    Py_DECREF(task);
    return run_pass(args[0], args[1], direct);
}
