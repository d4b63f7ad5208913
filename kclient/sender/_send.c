/*
 * Appender.send_open and configure_send (kclient.sender._speedups; the Appender is in
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
#include <string.h>

/* send_open(topic, value, key, partition, timestamp_ms, headers, callback)
 * -> the future, or None: KafkaProducer.send's common case — bytes (or None) key and value,
 * a topic with known partitions, no headers, the built-in partitioner, a record within
 * max_record_bytes, an open batch with room (or memory for a new one, given open_batch) — and
 * None, having done nothing, for anything else (send then goes the general way, which
 * converts, waits, refuses or opens a batch). */
static PyObject *send_queues(Appender *self, TopicQueuesFields *queues, PyObject *const *args);

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
    if (queues == NULL || !PyObject_TypeCheck(queues, &kclient_TopicQueuesFieldsType)) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    Py_INCREF(queues); /* held while the partitioner runs */
    PyObject *out = send_queues(self, (TopicQueuesFields *)queues, args);
    Py_DECREF(queues);
    return out;
}

/* send_open's part once the topic's TopicQueues is known. */
static PyObject *
send_queues(Appender *self, TopicQueuesFields *queues, PyObject *const *args)
{
    PyObject *value = args[1], *key = args[2], *partition = args[3], *headers = args[5];
    PyObject *count_obj = queues->num_partitions;
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
        PyObject *open_args[8] = {(PyObject *)queues, chosen, args[4], key, value, headers, args[6], size_obj};
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

/* ---- SendCall: a producer's send without a Python frame -------------------------------- */

/* SendCall(appender, producer_ref, send, general): what `producer.send` is (an instance
 * attribute, set by the producer while send needs no more than its arguments' types checked).
 * A call binds send's parameters (topic, value=None, key=None, *, headers, partition,
 * timestamp_ms, callback) and runs the appender's send_open; when that returns None it calls
 * general(producer, topic, value, key, headers, partition, timestamp_ms, callback) (the
 * Python send's general way), and a call it cannot bind goes to send(producer, ...) (the
 * Python send, which says what is wrong). The producer is held weakly (it holds this). */
typedef struct {
    PyObject_HEAD
    Appender *appender;
    PyObject *producer_ref, *send, *general;
    vectorcallfunc vectorcall;
} SendCall;

static PyObject *kw_names[7]; /* topic value key headers partition timestamp_ms callback */

/* args bound into argv[0..6] (left as they are where not given): 0 when the call has more
 * than 3 positional arguments, a keyword send lacks or one also given by position, or no
 * topic. */
static int
send_bind(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **argv)
{
    if (nargs > 3) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        argv[i] = args[i];
    }
    Py_ssize_t count = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int j = 0;
        while (j < 7 && name != kw_names[j]) { /* interned: the compiler's names */
            j++;
        }
        if (j == 7 || j < nargs) { /* unknown (or not interned), or also given positionally */
            return 0;
        }
        argv[j] = args[nargs + i];
    }
    return argv[0] != NULL;
}

static PyObject *
send_call(SendCall *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *producer = PyWeakref_GetObject(self->producer_ref); /* borrowed */
    if (producer == NULL || producer == Py_None) {
        return producer == NULL ? NULL : PyErr_Format(PyExc_ReferenceError, "the producer is gone");
    }
    Py_INCREF(producer);
    /* producer, then topic value key headers partition timestamp_ms callback */
    PyObject *argv[8] = {producer, NULL, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None};
    PyObject *out;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!send_bind(args, nargs, kwnames, argv + 1)) { /* the Python send says what is wrong */
        Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
        PyObject **with_producer = PyMem_Malloc((total + 1) * sizeof(PyObject *));
        if (with_producer == NULL) {
            Py_DECREF(producer);
            return PyErr_NoMemory();
        }
        with_producer[0] = producer;
        memcpy(with_producer + 1, args, total * sizeof(PyObject *));
        out = PyObject_Vectorcall(self->send, with_producer, nargs + 1, kwnames);
        PyMem_Free(with_producer);
        Py_DECREF(producer);
        return out;
    }
    PyObject *open_args[7] = {argv[1], argv[2], argv[3], argv[5], argv[6], argv[4], argv[7]};
    out = kclient_appender_send_open(self->appender, open_args, 7);
    if (out == Py_None) { /* the general way, without trying the common case again */
        Py_DECREF(out);
        out = PyObject_Vectorcall(self->general, argv, 8, NULL);
    }
    Py_DECREF(producer);
    return out;
}

static PyObject *
send_call_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"appender", "producer_ref", "send", "general", NULL};
    PyObject *appender, *producer_ref, *send, *general;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!OO:SendCall", names, &kclient_AppenderType,
                                     &appender, &_PyWeakref_RefType, &producer_ref, &send,
                                     &general)) {
        return NULL;
    }
    SendCall *self = (SendCall *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->appender = (Appender *)Py_NewRef(appender);
    self->producer_ref = Py_NewRef(producer_ref);
    self->send = Py_NewRef(send);
    self->general = Py_NewRef(general);
    self->vectorcall = (vectorcallfunc)send_call;
    return (PyObject *)self;
}

static int
send_call_traverse(SendCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->appender);
    Py_VISIT(self->producer_ref);
    Py_VISIT(self->send);
    Py_VISIT(self->general);
    return 0;
}

static int
send_call_clear(SendCall *self)
{
    Py_CLEAR(self->appender);
    Py_CLEAR(self->producer_ref);
    Py_CLEAR(self->send);
    Py_CLEAR(self->general);
    return 0;
}

static void
send_call_dealloc(SendCall *self)
{
    PyObject_GC_UnTrack(self);
    send_call_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* __wrapped__: the Python send bound to the producer (inspect.signature follows it). */
static PyObject *
send_call_get_wrapped(SendCall *self, void *Py_UNUSED(closure))
{
    PyObject *producer = PyWeakref_GetObject(self->producer_ref); /* borrowed */
    if (producer == NULL || producer == Py_None) {
        return producer == NULL ? NULL : PyErr_Format(PyExc_ReferenceError, "the producer is gone");
    }
    return PyMethod_New(self->send, producer);
}

/* __doc__: the Python send's. */
static PyObject *
send_call_get_doc(SendCall *self, void *Py_UNUSED(closure))
{
    return PyObject_GetAttrString(self->send, "__doc__");
}

static PyGetSetDef send_call_getset[] = {
    {"__wrapped__", (getter)send_call_get_wrapped, NULL, NULL, NULL},
    {"__doc__", (getter)send_call_get_doc, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kclient_SendCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._speedups.SendCall",
    .tp_basicsize = sizeof(SendCall),
    .tp_dealloc = (destructor)send_call_dealloc,
    .tp_vectorcall_offset = offsetof(SendCall, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_getset = send_call_getset,
    .tp_traverse = (traverseproc)send_call_traverse,
    .tp_clear = (inquiry)send_call_clear,
    .tp_new = send_call_new,
};

/* Intern the names; -1 on failure. */
int
kclient_send_init(void)
{
    static const char *names[7] = {"topic", "value", "key", "headers", "partition",
                                   "timestamp_ms", "callback"};
    for (int i = 0; i < 7 && kw_names[6] == NULL; i++) {
        kw_names[i] = PyUnicode_InternFromString(names[i]);
        if (kw_names[i] == NULL) {
            return -1;
        }
    }
    return 0;
}
