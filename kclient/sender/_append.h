/* The Appender of kclient.sender._speedups (_append.c), shared with _send.c and the module
 * init (_speedups.c). */
#ifndef KCLIENT_APPEND_H
#define KCLIENT_APPEND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../record/_capi.h"
#include "_fields.h"

typedef struct {
    PyObject_HEAD
    PyTypeObject *future_type; /* a RecordFutureFields subclass: the futures made */
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
} Appender;


/* The record into `queues` (a TopicQueuesFields, checked) under its lock; args: partition,
 * timestamp_ms (None: now), key, value, headers, callback, size_estimate. The future, Py_None
 * when no open batch had room, or NULL with an exception. */
PyObject *kclient_append_to(Appender *self, TopicQueuesFields *queues, PyObject *const *args);

/* The Appender type, and the init taking the record layer's C API (RecordsWriter) and
 * interning its names (-1 on failure). */
extern PyTypeObject kclient_AppenderType;
int kclient_append_init(const KclientRecordCAPI *record_api);

/* _send.c: Appender.send_open and Appender.configure_send; the SendCall type and the init
 * interning its names (-1 on failure). */
PyObject *kclient_appender_send_open(Appender *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *kclient_appender_configure_send(Appender *self, PyObject *args);
extern PyTypeObject kclient_SendCallType;
int kclient_send_init(void);

#endif
