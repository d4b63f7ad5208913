/*
 * The RecordsWriter of kclient.record._speedups (a record batch's records being encoded),
 * defined by _speedups.c; the sender's Appender (kclient/sender/_append.c) reads it and
 * appends to it through the record layer's C API (_capi.h). The GIL is held by every caller.
 */
#ifndef KCLIENT_WRITER_H
#define KCLIENT_WRITER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

typedef struct {
    PyObject_HEAD
    uint8_t *buf;          /* the records section so far (PyMem), NULL before the first record */
    Py_ssize_t len;        /* bytes written to buf */
    Py_ssize_t cap;        /* bytes allocated for buf */
    Py_ssize_t size;       /* header + records, as the batch will be uncompressed */
    Py_ssize_t limit;      /* batch_size */
    Py_ssize_t count;      /* records appended */
    int64_t base_ts;       /* timestamp of the first record, 0 while empty */
    int64_t max_ts;        /* greatest timestamp, -1 while empty (as Java) */
    int closed;            /* _close() has run */
    Py_ssize_t bad_index;  /* first record whose key or value is not bytes-like, or -1 */
    const char *bad_field; /* "key" or "value" of that record */
    PyObject *bad_type;    /* the name (str) of its type */
} RecordsWriter;

/* The type (kclient.record._speedups.RecordsWriter); CRecordBatchBuilder subclasses it.
 * This and kclient_writer_append are the record module's own symbols: other modules get
 * them from its C API (_capi.h). */
extern PyTypeObject kclient_RecordsWriterType;

/* Append one record (timestamp_ms an int, key and value bytes-like or None, headers a
 * sequence of (str, bytes | None) or None): its offset delta, -1 when it does not fit (the
 * first record always does), or -2 with an exception set. */
Py_ssize_t kclient_writer_append(RecordsWriter *self, PyObject *timestamp_ms, PyObject *key,
                                 PyObject *value, PyObject *headers);

/* Whether the batch is closed or has reached its batch_size (is_full()). */
static inline int
kclient_writer_is_full(const RecordsWriter *self)
{
    return self->closed || (self->count > 0 && self->size >= self->limit);
}

#endif
