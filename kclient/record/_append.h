/* The Appender of kclient.record._speedups (_append.c), shared with _send.c. */
#ifndef KCLIENT_APPEND_H
#define KCLIENT_APPEND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_slots.h"

typedef struct {
    PyObject_HEAD
    PyTypeObject *queues_type, *sticky_type, *batch_type, *future_type;
    Py_ssize_t q_lock, q_deques, q_sticky, q_num_partitions; /* TopicQueues */
    Py_ssize_t s_partition, s_produced, s_sticky_bytes; /* StickyPartitioner */
    Py_ssize_t b_append, b_builder, b_records, b_result; /* ProducerBatch */
    Py_ssize_t batch_overhead;
    PyObject *closed_error; /* IllegalStateError */
    PyObject *time_ns;      /* the wall clock in ns (time.time_ns): timestamps not given */
    int closed;
    /* send_open()'s settings (configure_send): */
    PyObject *queues_by_topic;  /* the producer's topic -> TopicQueues; NULL until
                                 * configure_send (send_open appends nothing) */
    Py_ssize_t max_record_bytes; /* a larger record goes the general way (which refuses it) */
    PyObject *keyed_partition;  /* keyed_partition(key, num_partitions); NULL: keys go the
                                 * general way (a custom partitioner, or ignored keys) */
    int sticky_keyless;         /* keyless records: -1, the sticky partition (no custom
                                 * partitioner) */
    PyObject *open_batch;       /* open_batch(queues, partition, timestamp_ms, key, value,
                                 * headers, callback, size_estimate): the record in a new
                                 * batch when the open one had no room, or None (memory
                                 * short: the general way waits); NULL: the general way */
    /* send_open()'s own new batches (configure_open, _open.c); o_accumulator NULL until then:
     * the accumulator (its wakeup), its pool's try_allocate and deallocate, its batch maker,
     * batch ids, monotonic clock, incomplete batches' add, and batch.size */
    PyObject *o_accumulator, *o_try_allocate, *o_deallocate, *o_make_batch, *o_batch_ids;
    PyObject *o_monotonic_ms, *o_incomplete_add;
    Py_ssize_t o_batch_size;
    Py_ssize_t q_tps, q_queued, q_last_batch_ms; /* TopicQueues */
} Appender;


/* The record into `queues` (a TopicQueues, checked) under its lock; args: partition,
 * timestamp_ms (None: now), key, value, headers, callback, size_estimate. The future, Py_None
 * when no open batch had room, or NULL with an exception. */
PyObject *kclient_append_to(Appender *self, PyObject *queues, PyObject *const *args);

/* kclient_append_to, opening a batch when the open one has no room and memory is free now
 * (with configure_open and an open_batch given to configure_send; else as
 * kclient_append_to): send_open's way. */
PyObject *kclient_append_or_open(Appender *self, PyObject *queues, PyObject *const *args);

/* _append.c's helpers, for _open.c. */
PyObject *kclient_new_future(Appender *self, PyObject *batch, PyObject *result, Py_ssize_t delta,
                             PyObject *ts, PyObject *key, PyObject *value, PyObject *callback);
Py_ssize_t kclient_batch_append(Appender *self, PyObject *batch, PyObject *ts, PyObject *key,
                                PyObject *value, PyObject *headers);

/* _open.c: a new batch under the topic's lock for a record the open batch had no room for:
 * the record's future (its callback registered) and, in *batch, the new batch; Py_None when
 * buffer.memory has no room now (nothing done); NULL with an exception. */
PyObject *kclient_open_locked(Appender *self, PyObject *queues, PyObject *partition,
                              PyObject *dq, PyObject *const *args, Py_ssize_t size_estimate,
                              PyObject **batch);
PyObject *kclient_appender_configure_open(Appender *self, PyObject *const *args,
                                          Py_ssize_t nargs);
int kclient_open_traverse(Appender *self, visitproc visit, void *arg);
void kclient_open_clear(Appender *self);

extern PyTypeObject kclient_AppenderType;

/* _send.c: Appender.send_open and Appender.configure_send; the SendMethod type and the init
 * interning its names (-1 on failure). */
PyObject *kclient_appender_send_open(Appender *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *kclient_appender_configure_send(Appender *self, PyObject *args);
extern PyTypeObject kclient_SendMethodType;
int kclient_send_init(void);

#endif
