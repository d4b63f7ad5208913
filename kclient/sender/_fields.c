/*
 * The sender's data the Appender (_append.c, _send.c) reads and writes, owned by C structs
 * (part of kclient.sender._speedups). Each is the base class of its Python
 * class when the accelerator is built, and a pure-Python class of the same name with
 * __slots__ is the reference it follows (KCLIENT_PURE_PYTHON=1):
 *
 *   RecordFutureFields  FutureRecordMetadata's (kclient/sender/future.py): the record's
 *                       batch result, offset delta, timestamp, key and value sizes.
 *   TopicQueuesFields   TopicQueues' (topic_queues.py): lock, deques, sticky, num_partitions.
 *   StickyFields        StickyPartitioner's (partitioner.py): partition, produced_bytes,
 *                       sticky_bytes.
 *   BatchFields         ProducerBatch's (batch.py): builder, records, result.
 *
 * Python code reads and writes them as attributes (member descriptors); an object field not
 * set yet raises AttributeError, as an unset __slots__ member does.
 *
 * Threads: the GIL is held. A future's fields are written once, on the caller's thread,
 * before the future is returned (produce_result and offset_delta move when a split batch's
 * waiter follows its record); the others under their topic's lock, as the classes say.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_fields.h"

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

/* NAME: the tp_dealloc of a type whose tp_clear is CLEAR. The types are static: a
 * subclass's instance has its type released by subtype_dealloc. */
#define FIELDS_DEALLOC(NAME, TYPE, CLEAR)                                                     \
    static void NAME(TYPE *self)                                                              \
    {                                                                                         \
        PyObject_GC_UnTrack(self);                                                            \
        CLEAR(self);                                                                          \
        Py_TYPE(self)->tp_free((PyObject *)self);                                             \
    }

FIELDS_DEALLOC(fields_dealloc, RecordFutureFields, fields_clear)

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
    .tp_name = "kclient.sender._speedups.RecordFutureFields",
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

/* ---- TopicQueuesFields ------------------------------------------------------------------ */

static int
queues_traverse(TopicQueuesFields *self, visitproc visit, void *arg)
{
    Py_VISIT(self->lock);
    Py_VISIT(self->deques);
    Py_VISIT(self->sticky);
    Py_VISIT(self->num_partitions);
    return 0;
}

static int
queues_clear(TopicQueuesFields *self)
{
    Py_CLEAR(self->lock);
    Py_CLEAR(self->deques);
    Py_CLEAR(self->sticky);
    Py_CLEAR(self->num_partitions);
    return 0;
}

FIELDS_DEALLOC(queues_dealloc, TopicQueuesFields, queues_clear)

static PyMemberDef queues_members[] = {
    {"lock", T_OBJECT_EX, offsetof(TopicQueuesFields, lock), 0,
     "The topic's lock (the C Lock the Appender takes)."},
    {"deques", T_OBJECT_EX, offsetof(TopicQueuesFields, deques), 0,
     "Partition -> its deque of batches (a dict)."},
    {"sticky", T_OBJECT_EX, offsetof(TopicQueuesFields, sticky), 0,
     "The topic's StickyPartitioner."},
    {"num_partitions", T_OBJECT_EX, offsetof(TopicQueuesFields, num_partitions), 0,
     "The topic's partition count (0: not known yet)."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kclient_TopicQueuesFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._speedups.TopicQueuesFields",
    .tp_basicsize = sizeof(TopicQueuesFields),
    .tp_dealloc = (destructor)queues_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "What the Appender uses of a topic's queues (TopicQueues' base).",
    .tp_traverse = (traverseproc)queues_traverse,
    .tp_clear = (inquiry)queues_clear,
    .tp_members = queues_members,
    .tp_new = PyType_GenericNew,
};

/* ---- StickyFields ----------------------------------------------------------------------- */

static int
sticky_traverse(StickyFields *self, visitproc visit, void *arg)
{
    Py_VISIT(self->partition);
    return 0;
}

static int
sticky_clear(StickyFields *self)
{
    Py_CLEAR(self->partition);
    return 0;
}

FIELDS_DEALLOC(sticky_dealloc, StickyFields, sticky_clear)

static PyMemberDef sticky_members[] = {
    {"partition", T_OBJECT_EX, offsetof(StickyFields, partition), 0,
     "The partition keyless records go to (-1: none yet)."},
    {"produced_bytes", T_PYSSIZET, offsetof(StickyFields, produced_bytes), 0,
     "Bytes produced to the partition since it was chosen."},
    {"sticky_bytes", T_PYSSIZET, offsetof(StickyFields, sticky_bytes), 0,
     "The bytes after which a new partition may be chosen (batch.size)."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kclient_StickyFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._speedups.StickyFields",
    .tp_basicsize = sizeof(StickyFields),
    .tp_dealloc = (destructor)sticky_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The sticky partitioner's state (StickyPartitioner's base).",
    .tp_traverse = (traverseproc)sticky_traverse,
    .tp_clear = (inquiry)sticky_clear,
    .tp_members = sticky_members,
    .tp_new = PyType_GenericNew,
};

/* ---- BatchFields ------------------------------------------------------------------------ */

static int
batch_traverse(BatchFields *self, visitproc visit, void *arg)
{
    Py_VISIT(self->builder);
    Py_VISIT(self->records);
    Py_VISIT(self->result);
    return 0;
}

static int
batch_clear(BatchFields *self)
{
    Py_CLEAR(self->builder);
    Py_CLEAR(self->records);
    Py_CLEAR(self->result);
    return 0;
}

FIELDS_DEALLOC(batch_dealloc, BatchFields, batch_clear)

static PyMemberDef batch_members[] = {
    {"builder", T_OBJECT_EX, offsetof(BatchFields, builder), 0,
     "The batch's record builder."},
    {"records", T_OBJECT_EX, offsetof(BatchFields, records), 0,
     "The built batch's bytes; None while it is open."},
    {"result", T_OBJECT_EX, offsetof(BatchFields, result), 0,
     "The batch's ProduceResult, shared by its records' futures."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kclient_BatchFieldsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._speedups.BatchFields",
    .tp_basicsize = sizeof(BatchFields),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "What the Appender uses of a batch (ProducerBatch's base).",
    .tp_traverse = (traverseproc)batch_traverse,
    .tp_clear = (inquiry)batch_clear,
    .tp_members = batch_members,
    .tp_new = PyType_GenericNew,
};
