/* RecordFutureFields of kclient.record._speedups (kclient/sender/_record_future.c). */
#ifndef KCLIENT_RECORD_FUTURE_H
#define KCLIENT_RECORD_FUTURE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* What a record's future knows of its record: the batch's shared result, the record's offset
 * delta in it, its timestamp and its serialized key and value sizes (-1: null). */
typedef struct {
    PyObject_HEAD
    PyObject *produce_result; /* never NULL once made */
    Py_ssize_t offset_delta;
    long long timestamp_ms;
    Py_ssize_t key_size, value_size;
} RecordFutureFields;

extern PyTypeObject kclient_RecordFutureFieldsType;

/* A new instance of `type` (RecordFutureFields or a subclass) with its fields set, or NULL. */
PyObject *kclient_new_record_future(PyTypeObject *type, PyObject *produce_result,
                                    Py_ssize_t offset_delta, long long timestamp_ms,
                                    Py_ssize_t key_size, Py_ssize_t value_size);

#endif
