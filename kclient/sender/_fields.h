/* The sender's C field structs of kclient.sender._speedups (_fields.c). */
#ifndef KCLIENT_FIELDS_H
#define KCLIENT_FIELDS_H

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

/* A topic's queues (TopicQueues' base): its lock, its partition -> deque of batches, its
 * sticky partitioner and its partition count (an int). NULL until TopicQueues.__init__ sets
 * them. The ints Python code reads per record or per batch (num_partitions, partition) are
 * objects: CPython reads an object member as fast as a __slots__ one, a C int member it
 * converts on each access (the C code converts instead). */
typedef struct {
    PyObject_HEAD
    PyObject *lock, *deques, *sticky, *num_partitions;
} TopicQueuesFields;

/* The sticky partitioner's state (StickyPartitioner's base): its partition (an int object,
 * NULL until set), and the bytes the Appender counts per record and their bound. */
typedef struct {
    PyObject_HEAD
    PyObject *partition;
    Py_ssize_t produced_bytes, sticky_bytes;
} StickyFields;

/* What the Appender uses of a batch (ProducerBatch's base): its builder, its built records
 * (None while open) and its ProduceResult. NULL until ProducerBatch.__init__ sets them. */
typedef struct {
    PyObject_HEAD
    PyObject *builder, *records, *result;
} BatchFields;

extern PyTypeObject kclient_RecordFutureFieldsType, kclient_TopicQueuesFieldsType,
    kclient_StickyFieldsType, kclient_BatchFieldsType;

/* A new instance of `type` (RecordFutureFields or a subclass) with its fields set, or NULL. */
PyObject *kclient_new_record_future(PyTypeObject *type, PyObject *produce_result,
                                    Py_ssize_t offset_delta, long long timestamp_ms,
                                    Py_ssize_t key_size, Py_ssize_t value_size);

#endif
