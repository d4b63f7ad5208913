/*
 * Appender.send_open and configure_send (kclient.record._speedups; the Appender is in
 * _append.c): KafkaProducer.send's common case in one call. It makes send's own choices —
 * the record's types, its topic's partitions, its partition (explicit, by key, or the
 * sticky one), its size bound — and hands the record to the Appender's append; anything
 * uncommon returns None before any state is touched, and send goes the general way, which
 * converts, waits for metadata, refuses or opens a batch. kclient/sender/appender.py's
 * PyAppender.send_open is the reference it follows.
 *
 * Threads: the GIL is held (the Appender takes the topic's lock).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_append.h"

/* send_open(queues_by_topic, topic, value, key, partition, timestamp_ms, headers, callback)
 * -> the future, or None: KafkaProducer.send's common case — bytes (or None) key and value,
 * a topic with known partitions, no headers, the built-in partitioner, a record within
 * max_record_bytes, an open batch with room — and None, having done nothing, for anything
 * else (send then goes the general way, which converts, waits, refuses or opens a batch). */
PyObject *
kclient_appender_send_open(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "send_open() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *topic = args[1], *value = args[2], *key = args[3], *partition = args[4];
    PyObject *headers = args[6];
    if (!self->send_ready || !PyDict_CheckExact(args[0]) ||
        (value != Py_None && !PyBytes_CheckExact(value)) ||
        (key != Py_None && !PyBytes_CheckExact(key)) ||
        (headers != Py_None &&
         !((PyList_CheckExact(headers) || PyTuple_CheckExact(headers)) &&
           Py_SIZE(headers) == 0))) {
        Py_RETURN_NONE;
    }
    PyObject *queues = PyDict_GetItemWithError(args[0], topic); /* borrowed */
    if (queues == NULL || Py_TYPE(queues) != self->queues_type) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    PyObject *count_obj = SLOT(queues, self->q_num_partitions);
    Py_ssize_t count = count_obj == NULL ? -1 : PyLong_AsSsize_t(count_obj);
    if (count <= 0) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    PyObject *chosen = NULL; /* a new reference to the partition */
    if (partition != Py_None) {
        if (!PyLong_Check(partition)) {
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
    PyObject *rest[7] = {chosen, args[5], key, value, headers, args[7], size_obj};
    PyObject *out = kclient_append_to(self, queues, rest);
    Py_DECREF(size_obj);
    Py_DECREF(chosen);
    return out;
}

/* configure_send(max_record_bytes, keyed_partition, sticky_keyless): send_open's settings
 * (keyed_partition None: keyed records go the general way). */
PyObject *
kclient_appender_configure_send(Appender *self, PyObject *args)
{
    Py_ssize_t max_record_bytes;
    PyObject *keyed_partition;
    int sticky_keyless;
    if (!PyArg_ParseTuple(args, "nOp:configure_send", &max_record_bytes, &keyed_partition,
                          &sticky_keyless)) {
        return NULL;
    }
    self->max_record_bytes = max_record_bytes;
    Py_XSETREF(self->keyed_partition,
               keyed_partition == Py_None ? NULL : Py_NewRef(keyed_partition));
    self->sticky_keyless = sticky_keyless;
    self->send_ready = 1;
    Py_RETURN_NONE;
}
