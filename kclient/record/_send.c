/*
 * Appender.send_open and configure_send (kclient.record._speedups; the Appender is in
 * _append.c): KafkaProducer.send's common case in one call. It makes send's own choices —
 * the record's types, its topic's partitions, its partition (explicit, by key, or the
 * sticky one), its size bound — and hands the record to the Appender's append, or, when the
 * open batch has no room, to open_batch (configure_send: the accumulator's new batch while
 * buffer.memory has room now). Anything uncommon returns None before any state is touched,
 * and send goes the general way, which converts, waits for metadata or memory, refuses or
 * opens a batch. kclient/sender/appender.py's PyAppender.send_open is the reference it
 * follows.
 *
 * Threads: the GIL is held (the Appender takes the topic's lock).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

#include "_append.h"
#include "../_fallback_method.h"

/* send_open(topic, value, key, partition, timestamp_ms, headers, callback)
 * -> the future, or None: KafkaProducer.send's common case — bytes (or None) key and value,
 * a topic with known partitions, no headers, the built-in partitioner, a record within
 * max_record_bytes, an open batch with room (or memory for a new one, given open_batch) — and
 * None, having done nothing, for anything else (send then goes the general way, which
 * converts, waits, refuses or opens a batch). */
static PyObject *send_queues(Appender *self, PyObject *queues, PyObject *const *args);

PyObject *
kclient_appender_send_open(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "send_open() takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *topic = args[0], *value = args[1], *key = args[2], *headers = args[5];
    if (self->queues_by_topic == NULL ||
        (value != Py_None && !PyBytes_CheckExact(value)) ||
        (key != Py_None && !PyBytes_CheckExact(key)) ||
        (headers != Py_None &&
         !((PyList_CheckExact(headers) || PyTuple_CheckExact(headers)) &&
           Py_SIZE(headers) == 0)) ||
        /* a timestamp that is not a non-negative int: the general way says what is wrong */
        (args[4] != Py_None && (!PyLong_CheckExact(args[4]) || PyLong_AsLongLong(args[4]) < 0)) ||
        /* a callback that cannot be called: the general way refuses it */
        (args[6] != Py_None && !PyCallable_Check(args[6]))) {
        PyErr_Clear(); /* an int beyond 64 bits: the general way refuses it */
        Py_RETURN_NONE;
    }
    PyObject *queues = PyDict_GetItemWithError(self->queues_by_topic, topic);
    if (queues == NULL || Py_TYPE(queues) != self->queues_type) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    Py_INCREF(queues); /* held while the partitioner runs */
    PyObject *out = send_queues(self, queues, args);
    Py_DECREF(queues);
    return out;
}

/* send_open's part once the topic's TopicQueues is known. */
static PyObject *
send_queues(Appender *self, PyObject *queues, PyObject *const *args)
{
    PyObject *value = args[1], *key = args[2], *partition = args[3], *headers = args[5];
    PyObject *count_obj = SLOT(queues, self->q_num_partitions);
    Py_ssize_t count = count_obj == NULL ? -1 : PyLong_AsSsize_t(count_obj);
    if (count <= 0) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    PyObject *chosen = NULL; /* a new reference to the partition */
    if (partition != Py_None) {
        if (!PyLong_CheckExact(partition)) { /* a bool or an int subclass: the general way */
            Py_RETURN_NONE;
        }
        Py_ssize_t index = PyLong_AsSsize_t(partition);
        if (index < 0 || index >= count) { /* bad or unknown: the general way says which */
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        chosen = Py_NewRef(partition);
    }
    else if (key != Py_None) {
        if (self->keyed_partition == NULL) {
            Py_RETURN_NONE;
        }
        PyObject *call[2] = {key, count_obj};
        chosen = PyObject_Vectorcall(self->keyed_partition, call, 2, NULL);
        if (chosen == NULL) {
            return NULL;
        }
    }
    else if (self->sticky_keyless) {
        chosen = PyLong_FromLong(-1);
        if (chosen == NULL) {
            return NULL;
        }
    }
    else {
        Py_RETURN_NONE;
    }
    Py_ssize_t size = 82 + (key == Py_None ? 0 : PyBytes_GET_SIZE(key)) +
                      (value == Py_None ? 0 : PyBytes_GET_SIZE(value));
    if (size > self->max_record_bytes) {
        Py_DECREF(chosen);
        Py_RETURN_NONE;
    }
    PyObject *size_obj = PyLong_FromSsize_t(size);
    if (size_obj == NULL) {
        Py_DECREF(chosen);
        return NULL;
    }
    PyObject *rest[7] = {chosen, args[4], key, value, headers, args[6], size_obj};
    PyObject *out = kclient_append_to(self, queues, rest);
    if (out == Py_None && self->open_batch != NULL) {
        /* no room: a new batch through open_batch, memory allowing */
        Py_DECREF(out);
        PyObject *open_args[8] = {queues, chosen, args[4], key, value, headers, args[6], size_obj};
        out = PyObject_Vectorcall(self->open_batch, open_args, 8, NULL);
    }
    Py_DECREF(size_obj);
    Py_DECREF(chosen);
    return out;
}

/* configure_send(queues_by_topic, max_record_bytes, keyed_partition, sticky_keyless,
 * open_batch=None): send_open's settings (keyed_partition None: keyed records go the general
 * way; open_batch None: so do records the open batch has no room for). */
PyObject *
kclient_appender_configure_send(Appender *self, PyObject *args)
{
    Py_ssize_t max_record_bytes;
    PyObject *queues_by_topic, *keyed_partition, *open_batch = Py_None;
    int sticky_keyless;
    if (!PyArg_ParseTuple(args, "O!nOp|O:configure_send", &PyDict_Type, &queues_by_topic,
                          &max_record_bytes, &keyed_partition, &sticky_keyless, &open_batch)) {
        return NULL;
    }
    if (open_batch != Py_None && !PyCallable_Check(open_batch)) {
        PyErr_SetString(PyExc_TypeError, "configure_send: open_batch must be callable or None");
        return NULL;
    }
    Py_XSETREF(self->open_batch, open_batch == Py_None ? NULL : Py_NewRef(open_batch));
    Py_XSETREF(self->queues_by_topic, Py_NewRef(queues_by_topic));
    self->max_record_bytes = max_record_bytes;
    Py_XSETREF(self->keyed_partition,
               keyed_partition == Py_None ? NULL : Py_NewRef(keyed_partition));
    self->sticky_keyless = sticky_keyless;
    Py_RETURN_NONE;
}

/* ---- SendMethod: KafkaProducer.send without a Python frame ------------------------------ */

/* send = SendMethod(general): a method descriptor. On the class it is `general` (the Python
 * send, with its signature, annotations and docstring); called on a producer it runs
 * send_open on the producer's `_fast_send` (an Appender, or None when send must check more
 * than its arguments' types) and, when that returns None or the call has arguments it does
 * not read, calls `_send_general` (or `general`) — the Python send — with the same
 * arguments. */
static PyObject *str_fast_send;    /* "_fast_send" */
static PyObject *str_send_general; /* "_send_general" */
static PyObject *kw_names[7];      /* topic value key headers partition timestamp_ms callback */

static PyObject *
send_method_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    /* producer, topic, value, key, headers, partition, timestamp_ms, callback */
    PyObject *argv[8] = {NULL, NULL, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, kw_names, 7, 4, argv)) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    PyObject *fast = PyObject_GetAttr(argv[0], str_fast_send);
    if (fast == NULL) {
        return NULL;
    }
    if (Py_TYPE(fast) != &kclient_AppenderType) {
        Py_DECREF(fast);
        return fallback_general(self, args, nargsf, kwnames);
    }
    PyObject *open_args[7] = {argv[1], argv[2], argv[3], argv[5], argv[6], argv[4], argv[7]};
    PyObject *future = kclient_appender_send_open((Appender *)fast, open_args, 7);
    Py_DECREF(fast);
    if (future != Py_None) {
        return future; /* the record's future, or NULL with its exception */
    }
    Py_DECREF(future);
    /* the general way, without trying the common case again */
    return PyObject_VectorcallMethod(str_send_general, argv, 8, NULL);
}

static PyObject *
send_method_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)send_method_call, "O:SendMethod");
}

static PyGetSetDef send_method_getset[] = {FALLBACK_GETSET};

PyTypeObject kclient_SendMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.record._speedups.SendMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = send_method_getset,
    .tp_new = send_method_new,
};

/* Intern the names; -1 on failure. */
int
kclient_send_init(void)
{
    static const char *names[7] = {"topic", "value", "key", "headers", "partition",
                                   "timestamp_ms", "callback"};
    if (str_fast_send != NULL) {
        return 0;
    }
    str_fast_send = PyUnicode_InternFromString("_fast_send");
    str_send_general = PyUnicode_InternFromString("_send_general");
    if (str_fast_send == NULL || str_send_general == NULL) {
        return -1;
    }
    for (int i = 0; i < 7; i++) {
        kw_names[i] = PyUnicode_InternFromString(names[i]);
        if (kw_names[i] == NULL) {
            return -1;
        }
    }
    return 0;
}
