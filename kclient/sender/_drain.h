/* kclient.sender._drain's shared state and slot helpers (_drain.c, _drain_walk.c). */
#ifndef KCLIENT_DRAIN_H
#define KCLIENT_DRAIN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_slots.h"
#include "../_pycall.h" /* take_truth */
#include "../record/_lock.h"
#include "../record/_writer.h"
#define FEW_PENDING 8
#define MANY_PARTITIONS 8

/* ---- configuration (configure(), once, by drain.py) ---------------------------------------- */

typedef struct {
    PyTypeObject *queues, *batch, *info, *cluster, *builder, *lock, *deque;
    Py_ssize_t q_lock, q_deques, q_queued, q_tps;
    Py_ssize_t b_in_retry, b_retry_at, b_created, b_builder, b_records, b_drained,
        b_uncompressed, b_append;
    Py_ssize_t i_topic, i_partition;
    Py_ssize_t w_built; /* the C builder's _built */
    /* and the header fields build() writes */
    Py_ssize_t w_base_offset, w_base_sequence, w_codec, w_transactional, w_leader_epoch,
        w_producer_epoch, w_producer_id;
    PyObject *none_codec; /* CompressionType.NONE */
    PyObject *crc32c;     /* crc32c.crc32c, for _close_framed */
    PyObject *result_type; /* ReadyCheckResult */
    PyObject *refuse;      /* batch._refuse, a closed batch's _append */
    PyObject *py_ready, *py_drain; /* the reference, for calls this code does not take */
    int ready;
} DrainConfig;

extern DrainConfig cfg;

extern PyObject *s_leaders_by_partition, *s_partitions_for_node, *s_pending_steps, *s_id,
    *s_is_full, *s_build, *s_close, *s_can_send, *s_assign_sequence, *s_popleft, *s_enter,
    *s_exit, *s_size_in_bytes, *s_estimated, *s_in_retry, *s_retry_at_ms, *s_created_ms,
    *s_builder, *s_drained_ms, *s_lock, *s_deques, *s_queued, *s_tps, *s_topic, *s_partition,
    *s_close_framed;

/* ---- Drainer ------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *tm, *drain_index, *positions_cluster, *positions, *muted, *next_expiry_ms,
        *more_ready;
    /* partitions_for_node and leaders_by_partition of `cluster` (a Cluster, immutable) */
    PyObject *cluster, *leaders, *parts_by_node;
    /* the last ready() with exactly one ready node: that node and a set of it, copied (with
     * its stored hash) when the next one has the same node: a Node's __hash__ is Python */
    PyObject *ready_node, *ready_set;
} Drainer;

/* A slot of an object of exactly `type`, else the attribute: a new reference or NULL. */
static inline PyObject *
field(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name)
{
    if (Py_TYPE(obj) == type) {
        PyObject *value = SLOT(obj, offset);
        if (value == NULL) {
            PyErr_SetObject(PyExc_AttributeError, name);
            return NULL;
        }
        Py_INCREF(value);
        return value;
    }
    return PyObject_GetAttr(obj, name);
}

/* Set a slot (or the attribute); steals nothing. */
static inline int
set_field(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name, PyObject *value)
{
    if (Py_TYPE(obj) == type) {
        PyObject *old = SLOT(obj, offset);
        Py_INCREF(value);
        SLOT(obj, offset) = value;
        Py_XDECREF(old);
        return 0;
    }
    return PyObject_SetAttr(obj, name, value);
}

/* An int field as long long; -1 with an exception set on error (check PyErr_Occurred). */
static inline long long
int_field(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name, int *err)
{
    PyObject *value = field(obj, type, offset, name);
    if (value == NULL) {
        *err = 1;
        return -1;
    }
    long long n = PyLong_AsLongLong(value);
    Py_DECREF(value);
    if (n == -1 && PyErr_Occurred()) {
        *err = 1;
    }
    return n;
}

/* Truth of a field; -1 on error. */
static inline int
bool_field(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name)
{
    return take_truth(field(obj, type, offset, name));
}

/* Take a topic's lock: the C Lock directly, another through __enter__. 0, or -1. */
static inline int
lock_take(PyObject *lock)
{
    if (Py_TYPE(lock) == cfg.lock) {
        LockObject *l = (LockObject *)lock;
        PyLockStatus status = PyThread_acquire_lock_timed(l->lock, 0, 0);
        if (status != PY_LOCK_ACQUIRED) {
            Py_BEGIN_ALLOW_THREADS
            status = PyThread_acquire_lock_timed(l->lock, -1, 0);
            Py_END_ALLOW_THREADS
        }
        l->locked = 1;
        return 0;
    }
    PyObject *out = PyObject_CallMethodNoArgs(lock, s_enter);
    Py_XDECREF(out);
    return out == NULL ? -1 : 0;
}

/* Release it, keeping any exception set. 0, or -1 when releasing raised. */
static inline int
lock_give(PyObject *lock)
{
    if (Py_TYPE(lock) == cfg.lock) {
        ((LockObject *)lock)->locked = 0;
        PyThread_release_lock(((LockObject *)lock)->lock);
        return 0;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *out = PyObject_CallMethodObjArgs(lock, s_exit, Py_None, Py_None, Py_None, NULL);
    Py_XDECREF(out);
    if (type != NULL) {
        if (out == NULL) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, tb);
        return -1;
    }
    return out == NULL ? -1 : 0;
}

/* len() of a deque (any sized object); -1 on error. */
static inline Py_ssize_t
dq_len(PyObject *dq)
{
    return Py_TYPE(dq) == cfg.deque ? Py_SIZE(dq) : PyObject_Size(dq);
}

/* builder.size_in_bytes: the C builder's open size or built length; else the property. */
static inline PyObject *
builder_size(PyObject *builder)
{
    if (cfg.builder != NULL && Py_TYPE(builder) == cfg.builder) {
        PyObject *built = SLOT(builder, cfg.w_built);
        if (built == NULL || built == Py_None) {
            return PyLong_FromSsize_t(((RecordsWriter *)builder)->size);
        }
        Py_ssize_t n = PyObject_Size(built);
        return n < 0 ? NULL : PyLong_FromSsize_t(n);
    }
    return PyObject_GetAttr(builder, s_size_in_bytes);
}

/* batch.estimated_size_bytes as long long; -1 with an exception on error. */
static inline long long
estimated_size(PyObject *batch)
{
    PyObject *size;
    if (Py_TYPE(batch) == cfg.batch) {
        PyObject *records = SLOT(batch, cfg.b_records);
        PyObject *builder = SLOT(batch, cfg.b_builder);
        if (records == NULL || builder == NULL) {
            PyErr_SetString(PyExc_AttributeError, "ProducerBatch has no records or builder");
            return -1;
        }
        if (records != Py_None) {
            Py_ssize_t n = PyObject_Size(records);
            return n;
        }
        size = builder_size(builder);
    }
    else {
        size = PyObject_GetAttr(batch, s_estimated);
    }
    if (size == NULL) {
        return -1;
    }
    long long n = PyLong_AsLongLong(size);
    Py_DECREF(size);
    return n;
}

/* batch.builder.is_full(); -1 on error. */
static inline int
builder_is_full(PyObject *batch)
{
    PyObject *builder = field(batch, cfg.batch, cfg.b_builder, s_builder);
    if (builder == NULL) {
        return -1;
    }
    int full;
    if (cfg.builder != NULL && Py_TYPE(builder) == cfg.builder) {
        full = kclient_writer_is_full((RecordsWriter *)builder);
    }
    else {
        PyObject *out = PyObject_CallMethodNoArgs(builder, s_is_full);
        full = out == NULL ? -1 : PyObject_IsTrue(out);
        Py_XDECREF(out);
    }
    Py_DECREF(builder);
    return full;
}


/* builder.build() for a C builder of an uncompressed batch (the Python method's common
 * case, _drain_build.c): the batch's bytes; NULL with no exception when the Python method
 * must run (another builder, compression, already built or closed, empty, a transactional
 * batch without a producer id, a field out of range); NULL with an exception on error. */
PyObject *kclient_drain_build(PyObject *builder);

/* cluster.partitions_for_node(node_id) as a list or tuple (cached per Cluster): new ref. */
PyObject *kclient_drain_cluster_parts(Drainer *self, PyObject *cluster, PyObject *node_id);

/* The Python reference `function` with the call as it came (self first). */
PyObject *kclient_drain_reference(PyObject *function, Drainer *self, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames);

/* Drainer.ready(topics, cluster, now_ms, linger_ms, delivery_timeout_ms, all_ready)
 * (_drain_ready.c). */
PyObject *kclient_drain_ready(Drainer *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);

/* Drainer.drain(topics, cluster, nodes, max_request_size, now_ms) (_drain_walk.c). */
PyObject *kclient_drain_drain(Drainer *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);

#endif
