/*
 * The accumulator's per-record append in C (part of kclient.sender._speedups): the common
 * case of RecordAccumulator.append — the partition's open batch has room — in one call.
 *
 *   Appender   append(queues, partition, timestamp_ms, key, value, headers, callback,
 *              size_estimate) -> the record's FutureRecordMetadata, or None when the
 *              partition has no open batch with room (the caller then opens one, in
 *              Python). It does what kclient/sender/append.py's PyAppender does, step for
 *              step: under the topic's lock, the sticky partition when partition < 0, the
 *              last batch of that partition's deque, the record into its builder, the
 *              future, the callback, the sticky partitioner's byte count.
 *
 * The objects it walks (TopicQueues, StickyPartitioner, ProducerBatch, FutureRecordMetadata)
 * keep what it uses in the C structs they subclass (_fields.c); it reads and writes those
 * fields directly, after checking each object's type (a subtype of the struct's type).
 * Anything else is a TypeError. A batch's builder, when it is the C RecordsWriter, is
 * appended to through the record layer's C API (kclient/record/_capi.h), which the module
 * init hands to kclient_append_init.
 *
 * send_open() (_send.c) goes one step further back: KafkaProducer.send's own common case
 * (bytes, known partitions, no headers, the built-in partitioner), then append.
 *
 * Threads: called with the GIL held; a contended Lock (_lock.c) is waited for with the GIL
 * released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_lock.h"
#include "_append.h"

static KclientRecordCAPI record;   /* a copy: one load per use */
static PyObject *str_add_callback; /* "add_callback" */
static PyObject *str_maybe_switch; /* "maybe_switch" */
static PyObject *str_append;       /* "append" */

/* 0 when `obj` (NULL: a field not set) is a `type` or a subtype; else -1 with TypeError. */
static int
check_type(PyObject *obj, PyTypeObject *type, const char *what)
{
    if (obj == NULL || !PyObject_TypeCheck(obj, type)) {
        PyErr_Format(PyExc_TypeError, "%s must be %s, got %s", what, type->tp_name,
                     obj == NULL ? "nothing" : Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static int
appender_init(Appender *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"future", "batch_overhead", "closed_error", "time_ns", NULL};
    PyTypeObject *f;
    PyObject *error, *time_ns;
    Py_ssize_t overhead;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!nOO:Appender", names, &PyType_Type, &f,
                                     &overhead, &error, &time_ns)) {
        return -1;
    }
    if (!PyType_IsSubtype(f, &kclient_RecordFutureFieldsType)) {
        PyErr_SetString(PyExc_TypeError, "Appender: future must subclass RecordFutureFields");
        return -1;
    }
    Py_XSETREF(self->time_ns, Py_NewRef(time_ns));
    Py_XSETREF(self->future_type, (PyTypeObject *)Py_NewRef(f));
    Py_XSETREF(self->closed_error, Py_NewRef(error));
    self->batch_overhead = overhead;
    return 0;
}

/* len() of a key or value as FutureRecordMetadata keeps it: -1 for None; -2 on error. */
static inline Py_ssize_t
size_of(PyObject *field)
{
    if (field == Py_None) {
        return -1;
    }
    Py_ssize_t n = PyBytes_CheckExact(field) ? PyBytes_GET_SIZE(field) : PyObject_Size(field);
    return n < 0 ? -2 : n;
}

/* A FutureRecordMetadata with its fields set, as FutureRecordMetadata(result, delta, ...). */
static PyObject *
new_future(Appender *self, PyObject *result, Py_ssize_t delta, PyObject *ts, PyObject *key,
           PyObject *value)
{
    long long timestamp_ms = PyLong_AsLongLong(ts);
    Py_ssize_t key_size = size_of(key);
    Py_ssize_t value_size = key_size == -2 ? -2 : size_of(value);
    if ((timestamp_ms == -1 && PyErr_Occurred()) || value_size == -2) {
        return NULL;
    }
    return kclient_new_record_future(self->future_type, result, delta, timestamp_ms, key_size,
                                     value_size);
}

/* The record's future on `batch`'s `result` and, unless `callback` is None,
 * batch.add_callback(future, callback): the future, or NULL. */
static PyObject *
kclient_new_future(Appender *self, PyObject *batch, PyObject *result, Py_ssize_t delta,
                   PyObject *ts, PyObject *key, PyObject *value, PyObject *callback)
{
    PyObject *future = new_future(self, result, delta, ts, key, value);
    if (future != NULL && callback != Py_None) {
        PyObject *out = PyObject_CallMethodObjArgs(batch, str_add_callback, future, callback,
                                                   NULL);
        if (out == NULL) {
            Py_CLEAR(future);
        }
        Py_XDECREF(out);
    }
    return future;
}

/* The record into `batch` (an open ProducerBatch): its delta, -1 when it does not fit, -2
 * with an exception. */
static Py_ssize_t
kclient_batch_append(BatchFields *batch, PyObject *ts, PyObject *key, PyObject *value,
                     PyObject *headers)
{
    PyObject *builder = batch->builder;
    if (builder == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the batch has no builder");
        return -2;
    }
    if (PyObject_TypeCheck(builder, record.writer_type)) {
        return record.writer_append((RecordsWriter *)builder, ts, key, value,
                                    headers == Py_None ? NULL : headers);
    }
    /* another builder (the pure-Python one): its append */
    PyObject *args[5] = {builder, ts, key, value, headers == Py_None ? PyTuple_New(0) : headers};
    if (args[4] == NULL) {
        return -2;
    }
    PyObject *out = PyObject_VectorcallMethod(str_append, args,
                                              5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (headers == Py_None) {
        Py_DECREF(args[4]);
    }
    if (out == NULL) {
        return -2;
    }
    Py_ssize_t delta = PyLong_AsSsize_t(out);
    Py_DECREF(out);
    return delta == -1 && PyErr_Occurred() ? -2 : (delta < 0 ? -1 : delta);
}

/* The sticky partitioner's byte count after a record went to `batch`; -1 on error. */
static int
sticky_count(Appender *self, StickyFields *sticky, BatchFields *batch, Py_ssize_t size_estimate)
{
    Py_ssize_t produced = sticky->produced_bytes += size_estimate - self->batch_overhead;
    Py_ssize_t limit = sticky->sticky_bytes;
    if (produced < limit) {
        return 0;
    }
    /* StickyPartitioner.maybe_switch(batch), its test first for the C builder */
    PyObject *builder = batch->builder;
    if (builder != NULL && PyObject_TypeCheck(builder, record.writer_type) &&
        !kclient_writer_is_full((RecordsWriter *)builder) && produced < 2 * limit) {
        return 0;
    }
    PyObject *out = PyObject_CallMethodOneArg((PyObject *)sticky, str_maybe_switch,
                                              (PyObject *)batch);
    Py_XDECREF(out);
    return out == NULL ? -1 : 0;
}

/* The part of append() under the topic's lock: a new reference to the future, Py_None, or
 * NULL with an exception. */
static PyObject *
append_locked(Appender *self, TopicQueuesFields *queues, PyObject *partition,
              PyObject *const *args)
{
    PyObject *ts = args[0], *key = args[1], *value = args[2], *headers = args[3];
    StickyFields *sticky = NULL;
    PyObject *dq, *future = NULL;

    if (self->closed) {
        PyErr_SetString(self->closed_error, "cannot send after the producer is closed");
        return NULL;
    }
    Py_ssize_t size_estimate = PyLong_AsSsize_t(args[5]);
    if (size_estimate == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(partition);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (index < 0) {
        if (check_type(queues->sticky, &kclient_StickyFieldsType, "TopicQueues.sticky") < 0) {
            return NULL;
        }
        sticky = (StickyFields *)queues->sticky;
        partition = sticky->partition;
        if (partition == NULL) {
            return PyErr_Format(PyExc_AttributeError, "the sticky partitioner has no partition");
        }
    }
    if (queues->deques == NULL || !PyDict_Check(queues->deques)) {
        return PyErr_Format(PyExc_TypeError, "TopicQueues.deques must be a dict");
    }
    dq = PyDict_GetItemWithError(queues->deques, partition); /* borrowed; no deque made here */
    Py_ssize_t queued = dq == NULL ? (PyErr_Occurred() ? -1 : 0) : PyObject_Length(dq);
    if (queued <= 0) {
        return queued < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *last = PySequence_GetItem(dq, queued - 1);
    if (last == NULL || check_type(last, &kclient_BatchFieldsType, "a queued batch") < 0) {
        Py_XDECREF(last);
        return NULL;
    }
    Py_XINCREF(sticky); /* held while Python code (a builder's append, add_callback) runs */
    BatchFields *batch = (BatchFields *)last;
    Py_ssize_t delta = -1; /* built (back for a retry): no more records */
    if (batch->records == NULL || batch->records == Py_None) {
        delta = kclient_batch_append(batch, ts, key, value, headers);
    }
    if (delta == -1) { /* no room */
        future = Py_NewRef(Py_None);
    }
    else if (delta >= 0 && batch->result == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the batch has no result");
    }
    else if (delta >= 0) {
        future = kclient_new_future(self, last, batch->result, delta, ts, key, value, args[4]);
        if (future != NULL && sticky != NULL &&
            sticky_count(self, sticky, batch, size_estimate) < 0) {
            Py_CLEAR(future);
        }
    }
    Py_XDECREF(sticky);
    Py_DECREF(last);
    return future;
}

/* The wall clock in ms (time_ns() // 1_000_000), a new reference; NULL on error. */
static PyObject *
now_ms(Appender *self)
{
    PyObject *ns = PyObject_CallNoArgs(self->time_ns);
    if (ns == NULL) {
        return NULL;
    }
    long long value = PyLong_AsLongLong(ns);
    if (value == -1 && PyErr_Occurred()) {
        Py_DECREF(ns);
        return NULL;
    }
    Py_DECREF(ns);
    long long ms = value / 1000000;
    if (value < 0 && ms * 1000000 != value) {
        ms -= 1; /* floor division, as Python's // */
    }
    return PyLong_FromLongLong(ms);
}

/* The record into `queues` (checked to be a TopicQueuesFields) under its lock; args:
 * partition, timestamp_ms (None: now), key, value, headers, callback, size_estimate. */
PyObject *
kclient_append_to(Appender *self, TopicQueuesFields *queues, PyObject *const *args)
{
    PyObject *lock = queues->lock;
    if (check_type(lock, &kclient_LockType, "TopicQueues.lock") < 0) {
        return NULL;
    }
    PyObject *rest[6] = {args[1], args[2], args[3], args[4], args[5], args[6]};
    PyObject *ts = NULL;
    if (args[1] == Py_None) {
        ts = rest[0] = now_ms(self);
        if (ts == NULL) {
            return NULL;
        }
    }
    Py_INCREF(queues); /* the lock lives as long as this call, whatever Python code runs */
    Py_INCREF(lock);
    kclient_lock_take((LockObject *)lock, -1);
    PyObject *out = append_locked(self, queues, args[0], rest);
    kclient_lock_give((LockObject *)lock);
    Py_DECREF(lock);
    Py_DECREF(queues);
    Py_XDECREF(ts);
    return out;
}

/* append(queues, partition, timestamp_ms, key, value, headers, callback, size_estimate);
 * timestamp_ms None: now, by the wall clock. */
static PyObject *
appender_append(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "append() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    if (check_type(args[0], &kclient_TopicQueuesFieldsType, "queues") < 0) {
        return NULL;
    }
    return kclient_append_to(self, (TopicQueuesFields *)args[0], args + 1);
}

static PyObject *
appender_get_closed(Appender *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->closed);
}

static int
appender_set_closed(Appender *self, PyObject *value, void *Py_UNUSED(closure))
{
    int truth = value == NULL ? 0 : PyObject_IsTrue(value);
    if (truth < 0) {
        return -1;
    }
    self->closed = truth;
    return 0;
}

/* Garbage-collected: open_batch is a bound method of the accumulator holding this Appender. */
static int
appender_traverse(Appender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->future_type);
    Py_VISIT(self->closed_error);
    Py_VISIT(self->time_ns);
    Py_VISIT(self->keyed_partition);
    Py_VISIT(self->queues_by_topic);
    Py_VISIT(self->open_batch);
    return 0;
}

static int
appender_clear(Appender *self)
{
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->closed_error);
    Py_CLEAR(self->time_ns);
    Py_CLEAR(self->keyed_partition);
    Py_CLEAR(self->queues_by_topic);
    Py_CLEAR(self->open_batch);
    return 0;
}

static void
appender_dealloc(Appender *self)
{
    PyObject_GC_UnTrack(self);
    appender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef appender_methods[] = {
    {"append", (PyCFunction)(void (*)(void))appender_append, METH_FASTCALL,
     "append(queues, partition, timestamp_ms, key, value, headers, callback, size_estimate)"
     " -> the record's future, or None when the partition has no open batch with room"},
    {"send_open", (PyCFunction)(void (*)(void))kclient_appender_send_open, METH_FASTCALL,
     "send_open(topic, value, key, partition, timestamp_ms, headers, callback) -> the "
     "future of KafkaProducer.send's common case, or None"},
    {"configure_send", (PyCFunction)kclient_appender_configure_send, METH_VARARGS,
     "configure_send(queues_by_topic, max_record_bytes, keyed_partition, sticky_keyless, "
     "open_batch=None)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef appender_getset[] = {
    {"closed", (getter)appender_get_closed, (setter)appender_set_closed,
     "Set when the producer closes: append() raises the closed error.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kclient_AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._speedups.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "RecordAccumulator.append's common case (an open batch with room), in C.",
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_methods = appender_methods,
    .tp_getset = appender_getset,
    .tp_init = (initproc)appender_init,
    .tp_new = PyType_GenericNew,
};

/* Keep the record layer's C API, intern the method names; -1 on failure. Called by the
 * module init. */
int
kclient_append_init(const KclientRecordCAPI *record_api)
{
    record = *record_api;
    if (str_add_callback == NULL) {
        str_add_callback = PyUnicode_InternFromString("add_callback");
        str_maybe_switch = PyUnicode_InternFromString("maybe_switch");
        str_append = PyUnicode_InternFromString("append");
    }
    return str_add_callback && str_maybe_switch && str_append ? kclient_send_init()
                                                                          : -1;
}
