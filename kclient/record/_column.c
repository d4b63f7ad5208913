/*
 * kclient.record._speedups.BinaryColumn: an Arrow binary or string array read in place (see
 * _column.h). Made by kclient.sender.bulk from ``pyarrow.Array.buffers()``:
 *
 *   BinaryColumn(validity, offsets, data, offset, length, wide)
 *
 * validity is None or the bitmap buffer; offsets and data are buffers (anything with the
 * buffer protocol); offset and length the array's; wide true for 64-bit offsets. Checked
 * whole here, then read by RecordsWriter.append_rows and the keyed partitioner without
 * checks. len(column) and column[row] (bytes or None) serve the rows that take the general
 * path. GIL held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_column.h"

#define VIEW_VALIDITY 1
#define VIEW_OFFSETS 2
#define VIEW_DATA 4

static void
column_release(BinaryColumn *self)
{
    if (self->views & VIEW_VALIDITY) {
        PyBuffer_Release(&self->validity);
    }
    if (self->views & VIEW_OFFSETS) {
        PyBuffer_Release(&self->offsets);
    }
    if (self->views & VIEW_DATA) {
        PyBuffer_Release(&self->data);
    }
    self->views = 0;
}

/* Read offset `i` of the column's offsets buffer. */
static inline int64_t
column_offset(const BinaryColumn *self, Py_ssize_t i)
{
    if (self->wide) {
        int64_t v;
        memcpy(&v, (const char *)self->offsets.buf + i * 8, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, (const char *)self->offsets.buf + i * 4, 4);
    return v;
}

/* Check the buffers cover the rows and the offsets are in order inside the data; count the
 * nulls and the longest row. -1 with ValueError when not. */
static int
column_check(BinaryColumn *self)
{
    Py_ssize_t offset = self->offset, length = self->length;
    Py_ssize_t width = self->wide ? 8 : 4;
    if (offset < 0 || length < 0 || offset > PY_SSIZE_T_MAX / 16 - length) {
        PyErr_Format(PyExc_ValueError, "Arrow array: offset %zd and length %zd are not valid",
                     offset, length);
        return -1;
    }
    if (self->offsets.len < (offset + length + 1) * width) {
        PyErr_Format(PyExc_ValueError,
                     "Arrow array: the offsets buffer holds %zd bytes, %zd rows from offset %zd "
                     "need %zd",
                     self->offsets.len, length, offset, (offset + length + 1) * width);
        return -1;
    }
    if (self->has_validity && self->validity.len < (offset + length + 7) / 8) {
        PyErr_Format(PyExc_ValueError,
                     "Arrow array: the validity bitmap holds %zd bytes, %zd rows from offset "
                     "%zd need %zd",
                     self->validity.len, length, offset, (offset + length + 7) / 8);
        return -1;
    }
    Py_ssize_t max_size = 0, nulls = 0;
    int64_t begin = column_offset(self, offset);
    for (Py_ssize_t row = 0; row < length; row++) {
        int64_t end = column_offset(self, offset + row + 1);
        if (begin < 0 || end < begin || end > (int64_t)self->data.len) {
            PyErr_Format(PyExc_ValueError,
                         "Arrow array: row %zd has offsets %lld..%lld outside its data buffer "
                         "of %zd bytes",
                         row, (long long)begin, (long long)end, self->data.len);
            return -1;
        }
        const char *ptr;
        Py_ssize_t size = column_row(self, row, &ptr);
        if (size < 0) {
            nulls++;
        }
        else if (size > max_size) {
            max_size = size;
        }
        begin = end;
    }
    self->max_size = max_size;
    self->null_count = nulls;
    return 0;
}

static PyObject *
column_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"validity", "offsets", "data", "offset", "length", "wide", NULL};
    PyObject *validity, *offsets, *data;
    Py_ssize_t offset, length;
    int wide;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOnnp:BinaryColumn", names, &validity,
                                     &offsets, &data, &offset, &length, &wide)) {
        return NULL;
    }
    BinaryColumn *self = (BinaryColumn *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->offset = offset;
    self->length = length;
    self->wide = wide;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &self->validity, PyBUF_SIMPLE) < 0) {
            goto error;
        }
        self->views |= VIEW_VALIDITY;
        self->has_validity = 1;
    }
    if (PyObject_GetBuffer(offsets, &self->offsets, PyBUF_SIMPLE) < 0) {
        goto error;
    }
    self->views |= VIEW_OFFSETS;
    if (data == Py_None) { /* pyarrow gives no data buffer when every row is empty or null */
        data = PyBytes_FromStringAndSize(NULL, 0);
        if (data == NULL) {
            goto error;
        }
        int failed = PyObject_GetBuffer(data, &self->data, PyBUF_SIMPLE);
        Py_DECREF(data); /* the view keeps it */
        if (failed < 0) {
            goto error;
        }
    }
    else if (PyObject_GetBuffer(data, &self->data, PyBUF_SIMPLE) < 0) {
        goto error;
    }
    self->views |= VIEW_DATA;
    if (column_check(self) < 0) {
        goto error;
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

static void
column_dealloc(BinaryColumn *self)
{
    column_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
column_len(BinaryColumn *self)
{
    return self->length;
}

static PyObject *
column_item(BinaryColumn *self, Py_ssize_t row)
{
    if (row < 0 || row >= self->length) {
        PyErr_SetString(PyExc_IndexError, "BinaryColumn index out of range");
        return NULL;
    }
    const char *ptr;
    Py_ssize_t size = column_row(self, row, &ptr);
    if (size < 0) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize(ptr, size);
}

static PyObject *
column_get_max_size(BinaryColumn *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->max_size);
}

static PyObject *
column_get_null_count(BinaryColumn *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->null_count);
}

static PySequenceMethods column_as_sequence = {
    .sq_length = (lenfunc)column_len,
    .sq_item = (ssizeargfunc)column_item,
};

static PyGetSetDef column_getset[] = {
    {"max_size", (getter)column_get_max_size, NULL, "The longest row's bytes.", NULL},
    {"null_count", (getter)column_get_null_count, NULL, "Null rows.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kclient_BinaryColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.record._speedups.BinaryColumn",
    .tp_basicsize = sizeof(BinaryColumn),
    .tp_dealloc = (destructor)column_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An Arrow binary or string array read in place from its buffers.",
    .tp_as_sequence = &column_as_sequence,
    .tp_getset = column_getset,
    .tp_new = column_new,
};
