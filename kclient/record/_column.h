/*
 * BinaryColumn: an Arrow binary/string array (its large variants too) read in place from
 * its buffers — the validity bitmap, the 32- or 64-bit offsets and the data — for
 * send_batch's bulk path. Defined in _column.c (part of kclient.record._speedups), where
 * RecordsWriter.append_rows reads it; the keyed partitioner (kclient/sender/_murmur2.c)
 * reads the same struct through this header, checking the type the record layer's C API
 * (_capi.h) hands it.
 *
 * A column is checked whole when it is made (offsets in order and inside the data), so
 * reading a row is two loads and no checks. It holds its buffers (Py_buffer views) until
 * it is freed, so the Arrow array may go meanwhile. GIL held throughout.
 */
#ifndef KCLIENT_RECORD_COLUMN_H
#define KCLIENT_RECORD_COLUMN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    Py_buffer validity;    /* the validity bitmap (LSB first), when has_validity */
    Py_buffer offsets;     /* length + 1 offsets from `offset` on, int32 or int64 */
    Py_buffer data;        /* the bytes the offsets point into */
    int has_validity;      /* 0: no bitmap, every row is set */
    int wide;              /* 64-bit offsets (large_binary, large_string) */
    int views;             /* which of the three views are held (bits 1, 2, 4) */
    Py_ssize_t offset;     /* the array's offset into its buffers (a slice's start) */
    Py_ssize_t length;     /* rows */
    Py_ssize_t max_size;   /* the longest row's bytes (0 when none) */
    Py_ssize_t null_count; /* null rows */
} BinaryColumn;

/* The type, in kclient.record._speedups (_column.c). */
extern PyTypeObject kclient_BinaryColumnType;

/* Row `row` (0 <= row < length, unchecked): its bytes at *ptr and their length, or -1 with
 * *ptr NULL for a null row. */
static inline Py_ssize_t
column_row(const BinaryColumn *c, Py_ssize_t row, const char **ptr)
{
    Py_ssize_t i = c->offset + row;
    if (c->has_validity && !((((const uint8_t *)c->validity.buf)[i >> 3] >> (i & 7)) & 1)) {
        *ptr = NULL;
        return -1;
    }
    int64_t begin, end;
    if (c->wide) {
        const char *o = (const char *)c->offsets.buf + i * 8;
        memcpy(&begin, o, 8); /* memcpy: the buffers need not be aligned */
        memcpy(&end, o + 8, 8);
    }
    else {
        int32_t b, e;
        const char *o = (const char *)c->offsets.buf + i * 4;
        memcpy(&b, o, 4);
        memcpy(&e, o + 4, 4);
        begin = b;
        end = e;
    }
    *ptr = (const char *)c->data.buf + begin;
    return (Py_ssize_t)(end - begin);
}

#endif
