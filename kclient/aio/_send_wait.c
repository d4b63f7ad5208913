/*
 * kclient.aio._future's AioSendAndWait: AIOKafkaProducer.send_and_wait without a Python
 * frame or coroutine, for its common case (producer.py's send_and_wait is the reference and
 * the path for everything else).
 *
 * send_and_wait = AioSendAndWait(general): a method descriptor (see _fallback_method.h).
 * Called on a producer with arguments it can bind, it returns a SendWait: a coroutine-like
 * object (await, send, throw, close; asyncio takes it as a coroutine) that does nothing
 * until first resumed, as a coroutine. Then, if its class's send is AioSend (not a
 * subclass's own) and the producer's `_fast` is (producer,
 * tracker, run_now) and its `_fast_send.send_open(...)` queues the record (AioSend's common
 * case), it takes the record's future from the tracker, calls run_now() and awaits the
 * future: its result is the coroutine's. Otherwise it runs general(...) (the Python
 * coroutine) and passes everything through to it.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"

#include "../_fallback_method.h"
#include "../_pycall.h"

enum { START, WAITING, DELEGATING, DONE };

typedef struct {
    PyObject_HEAD
    PyObject *general;
    PyObject *argv[7]; /* producer, topic, value, key, partition, timestamp_ms, headers */
    PyObject *waiting; /* WAITING: the RecordFuture; DELEGATING: general's coroutine */
    int state;
} SendWaitObject;

static PyObject *str_fast, *str_fast_send, *str_send_open, *str_send;
static PyObject *send_kw_names[6]; /* topic value key partition timestamp_ms headers */

static void
release_args(SendWaitObject *self)
{
    for (int i = 0; i < 7; i++) {
        Py_CLEAR(self->argv[i]);
    }
}

/* START: queue the record (the waiting future), or hand the call to general. 0, or -1
 * with an exception. */
static int
start(SendWaitObject *self)
{
    PyObject **argv = self->argv;
    PyObject *fast = attr_get(argv[0], str_fast);
    if (fast == NULL) {
        return -1;
    }
    PyObject *record = Py_None;
    /* the class's send is AioSend's (a subclass's own send: the general way, which calls it) */
    PyObject *send = _PyType_Lookup(Py_TYPE(argv[0]), str_send);
    if (send != NULL && Py_TYPE(send) == &kaio_AioSendType && PyTuple_CheckExact(fast) &&
        PyTuple_GET_SIZE(fast) == 3 && Py_TYPE(PyTuple_GET_ITEM(fast, 1)) == &kaio_TrackerType) {
        PyObject *appender = attr_get(PyTuple_GET_ITEM(fast, 0), str_fast_send);
        if (appender == NULL) {
            Py_DECREF(fast);
            return -1;
        }
        if (appender != Py_None) {
            /* send_open(topic, value, key, partition, timestamp_ms, headers, callback) */
            PyObject *open_args[8] = {appender, argv[1], argv[2], argv[3],
                                      argv[4],  argv[5], argv[6], Py_None};
            record = PyObject_VectorcallMethod(str_send_open, open_args, 8, NULL);
        }
        else {
            Py_INCREF(record);
        }
        Py_DECREF(appender);
        if (record == NULL) {
            Py_DECREF(fast);
            return -1;
        }
    }
    else {
        Py_INCREF(record);
    }
    if (record == Py_None) { /* the general way: the Python coroutine */
        Py_DECREF(record);
        Py_DECREF(fast);
        PyObject *coro = PyObject_Vectorcall(self->general, argv, 7, NULL);
        if (coro == NULL) {
            return -1;
        }
        self->waiting = coro;
        self->state = DELEGATING;
        return 0;
    }
    PyObject *future = kaio_tracker_track(PyTuple_GET_ITEM(fast, 1), record, 0);
    Py_DECREF(record);
    if (future == NULL) {
        Py_DECREF(fast);
        return -1;
    }
    if (!Future_Check(future)) {
        Py_DECREF(future);
        Py_DECREF(fast);
        PyErr_SetString(PyExc_TypeError, "send_and_wait: track() must give a RecordFuture");
        return -1;
    }
    self->waiting = future;
    self->state = WAITING;
    PyObject *run_now = PyTuple_GET_ITEM(fast, 2);
    int rc = run_now == Py_None ? 0 : done(PyObject_CallNoArgs(run_now));
    Py_DECREF(fast);
    return rc;
}

/* The future's outcome, once done: PYGEN_RETURN with its result, or PYGEN_ERROR. */
static PySendResult
outcome(FutureObject *future, PyObject **result)
{
    if (future->state == FINISHED && future->exception == NULL) {
        *result = Py_NewRef(future->result);
        return PYGEN_RETURN;
    }
    PyObject *value = PyObject_CallMethod((PyObject *)future, "result", NULL);
    if (value != NULL) { /* not expected: a future done has its result or raises */
        *result = value;
        return PYGEN_RETURN;
    }
    *result = NULL;
    return PYGEN_ERROR;
}

static PySendResult
sendwait_am_send(SendWaitObject *self, PyObject *arg, PyObject **result)
{
    *result = NULL;
    if (self->state == START) {
        if (start(self) < 0) {
            self->state = DONE;
            Py_CLEAR(self->waiting);
            release_args(self);
            return PYGEN_ERROR;
        }
        release_args(self);
        arg = Py_None;
    }
    if (self->state == DELEGATING) {
        PySendResult status = PyIter_Send(self->waiting, arg, result);
        if (status != PYGEN_NEXT) {
            self->state = DONE;
            Py_CLEAR(self->waiting);
        }
        return status;
    }
    if (self->state == WAITING) {
        FutureObject *future = (FutureObject *)self->waiting;
        if (future->state == PENDING) {
            future->blocking = 1;
            *result = Py_NewRef(future);
            return PYGEN_NEXT;
        }
        self->state = DONE;
        PySendResult status = outcome(future, result);
        Py_CLEAR(self->waiting);
        return status;
    }
    PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
    return PYGEN_ERROR;
}

static PyObject *
sendwait_iternext(SendWaitObject *self)
{
    PyObject *result;
    PySendResult status = sendwait_am_send(self, Py_None, &result);
    if (status == PYGEN_RETURN) {
        if (result == Py_None) {
            Py_DECREF(result);
            return NULL;
        }
        stop_iteration(result);
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *
sendwait_send(SendWaitObject *self, PyObject *arg)
{
    PyObject *result;
    PySendResult status = sendwait_am_send(self, arg, &result);
    if (status == PYGEN_RETURN) {
        stop_iteration(result);
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

/* throw(...): into general's coroutine when it runs; else raised where the coroutine is (not
 * started, or awaiting the future, which has no throw of its own): it ends with it. */
static PyObject *
sendwait_throw(SendWaitObject *self, PyObject *args)
{
    if (self->state == DELEGATING) {
        PyObject *throw = PyObject_GetAttrString(self->waiting, "throw");
        PyObject *result = throw == NULL ? NULL : PyObject_Call(throw, args, NULL);
        Py_XDECREF(throw);
        if (result == NULL) {
            self->state = DONE;
            Py_CLEAR(self->waiting);
        }
        return result;
    }
    self->state = DONE;
    Py_CLEAR(self->waiting);
    release_args(self);
    return kaio_raise_thrown(args);
}

static PyObject *
sendwait_close(SendWaitObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *delegate = self->state == DELEGATING ? Py_NewRef(self->waiting) : NULL;
    self->state = DONE;
    Py_CLEAR(self->waiting);
    release_args(self);
    if (delegate != NULL) {
        PyObject *res = PyObject_CallMethod(delegate, "close", NULL);
        Py_DECREF(delegate);
        return res;
    }
    Py_RETURN_NONE;
}

static PyObject *
sendwait_await(PyObject *self)
{
    return Py_NewRef(self);
}

static int
sendwait_traverse(SendWaitObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->general);
    for (int i = 0; i < 7; i++) {
        Py_VISIT(self->argv[i]);
    }
    Py_VISIT(self->waiting);
    return 0;
}

static int
sendwait_clear(SendWaitObject *self)
{
    Py_CLEAR(self->general);
    release_args(self);
    Py_CLEAR(self->waiting);
    return 0;
}

static void
sendwait_dealloc(SendWaitObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->state == START) { /* as a coroutine never awaited says */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (PyErr_WarnEx(PyExc_RuntimeWarning,
                         "coroutine 'AIOKafkaProducer.send_and_wait' was never awaited", 1) < 0) {
            PyErr_WriteUnraisable((PyObject *)self);
        }
        PyErr_Restore(type, value, tb);
    }
    sendwait_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
sendwait_get_name(SendWaitObject *Py_UNUSED(self), void *closure)
{
    return PyUnicode_FromString((const char *)closure);
}

static PyMethodDef sendwait_methods[] = {
    {"send", (PyCFunction)sendwait_send, METH_O, NULL},
    {"throw", (PyCFunction)sendwait_throw, METH_VARARGS, NULL},
    {"close", (PyCFunction)sendwait_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sendwait_getset[] = {
    {"__name__", (getter)sendwait_get_name, NULL, NULL, "send_and_wait"},
    {"__qualname__", (getter)sendwait_get_name, NULL, NULL, "AIOKafkaProducer.send_and_wait"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyAsyncMethods sendwait_async = {
    .am_await = (unaryfunc)sendwait_await,
    .am_send = (sendfunc)sendwait_am_send,
};

static PyTypeObject SendWaitType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.SendWait",
    .tp_doc = "AIOKafkaProducer.send_and_wait's coroutine, in C.",
    .tp_basicsize = sizeof(SendWaitObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)sendwait_dealloc,
    .tp_traverse = (traverseproc)sendwait_traverse,
    .tp_clear = (inquiry)sendwait_clear,
    .tp_as_async = &sendwait_async,
    .tp_iter = (getiterfunc)sendwait_await,
    .tp_iternext = (iternextfunc)sendwait_iternext,
    .tp_methods = sendwait_methods,
    .tp_getset = sendwait_getset,
};

static PyObject *
send_wait_call(FallbackMethod *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    /* producer, topic, value, key, partition, timestamp_ms, headers */
    PyObject *argv[7] = {NULL, NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, send_kw_names, 6, 7, argv)) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    SendWaitObject *self = PyObject_GC_New(SendWaitObject, &SendWaitType);
    if (self == NULL) {
        return NULL;
    }
    self->general = Py_NewRef(method->general);
    for (int i = 0; i < 7; i++) {
        self->argv[i] = Py_NewRef(argv[i]);
    }
    self->waiting = NULL;
    self->state = START;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
send_wait_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)send_wait_call, "O:AioSendAndWait");
}

static PyGetSetDef send_wait_getset[] = {FALLBACK_GETSET};

PyTypeObject kaio_SendAndWaitType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.AioSendAndWait",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = send_wait_getset,
    .tp_new = send_wait_new,
};

int
kaio_send_wait_init(void)
{
#define INTERN(var, text)                                                                      \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_fast, "_fast");
    INTERN(str_fast_send, "_fast_send");
    INTERN(str_send_open, "send_open");
    INTERN(str_send, "send");
    static const char *names[6] = {"topic", "value", "key", "partition", "timestamp_ms",
                                   "headers"};
    for (int i = 0; i < 6; i++) {
        INTERN(send_kw_names[i], names[i]);
    }
#undef INTERN
    return PyType_Ready(&SendWaitType) < 0 ? -1 : PyType_Ready(&kaio_SendAndWaitType);
}
