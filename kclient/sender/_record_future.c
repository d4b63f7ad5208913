/*
 * RecordFutureFields (part of kclient.record._speedups): the data of a record's future, owned
 * by a C struct. kclient/sender/future.py's FutureRecordMetadata takes it as its base class
 * when the accelerator is built (its pure-Python RecordFutureFields, with __slots__, is the
 * reference); the Appender (kclient/record/_append.c) fills a new future's struct directly.
 *
 * Threads: the GIL is held. The fields are written once, on the caller's thread, before
 * the future is returned; produce_result and offset_delta move when a split batch's waiter
 * follows its record (FutureRecordMetadata.follow).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_record_future.h"

PyObject *
kclient_new_record_future(PyTypeObject *type, PyObject *produce_result, Py_ssize_t offset_delta,
                          long long timestamp_ms, Py_ssize_t key_size, Py_ssize_t value_size)
{
    RecordFutureFields *self = (RecordFutureFields *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->produce_result = Py_NewRef(produce_result);
    self->offset_delta = offset_delta;
    self->timestamp_ms = timestamp_ms;
    self->key_size = key_size;
    self->value_size = value_size;
    return (PyObject *)self;
}

/* RecordFutureFields(produce_result, offset_delta, timestamp_ms, key_size=-1, value_size=-1) */
static int
fields_init(RecordFutureFields *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"produce_result", "offset_delta", "timestamp_ms", "key_size",
                            "value_size", NULL};
    PyObject *result;
    Py_ssize_t delta, key_size = -1, value_size = -1;
    long long timestamp_ms;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnL|nn:RecordFutureFields", names, &result,
                                     &delta, &timestamp_ms, &key_size, &value_size)) {
        return -1;
    }
    Py_XSETREF(self->produce_result, Py_NewRef(result));
    self->offset_delta = delta;
    self->timestamp_ms = timestamp_ms;
    self->key_size = key_size;
    self->value_size = value_size;
    return 0;
}

static int
fields_traverse(RecordFutureFields *self, visitproc visit, void *arg)
{
    Py_VISIT(self->produce_result);
    return 0;
}

static int
fields_clear(RecordFutureFields *self)
{
    Py_CLEAR(self->produce_result);
    return 0;
}

/* A static type: a subclass's instance has its type released by subtype_dealloc. */
static void
fields_dealloc(RecordFutureFields *self)
{
    PyObject_GC_UnTrack(self);
    fields_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef fields_members[] = {
    {"produce_result", T_OBJECT_EX, offsetof(RecordFutureFields, produce_result), 0,
     "The ProduceResult of the record's batch (after a split: the batch it moved to)."},
    {"offset_delta", T_PYSSIZET, offsetof(RecordFutureFields, offset_delta), 0,
     "The record's offset relative to its batch's base offset."},
    {"timestamp_ms", T_LONGLONG, offsetof(RecordFutureFields, timestamp_ms), 0,
     "The record's timestamp (ms)."},
    {"key_size", T_PYSSIZET, offsetof(RecordFutureFields, key_size), 0,
     "The serialized key's size in bytes, -1 when null."},
    {"value_size", T_PYSSIZET, offsetof(RecordFutureFields, value_size), 0,
     "The serialized value's size in bytes, -1 when null."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kclient_RecordFutureFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.record._speedups.RecordFutureFields",
    .tp_basicsize = sizeof(RecordFutureFields),
    .tp_dealloc = (destructor)fields_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "What a record's future knows of its record (FutureRecordMetadata's base).",
    .tp_traverse = (traverseproc)fields_traverse,
    .tp_clear = (inquiry)fields_clear,
    .tp_members = fields_members,
    .tp_init = (initproc)fields_init,
    .tp_new = PyType_GenericNew,
};
