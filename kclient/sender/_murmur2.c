/*
 * kclient.sender._murmur2: Java's Utils.murmur2 in C, for the keyed partitioner, and
 * send_batch's partitioning of whole columns (keyed_partitions, group_rows).
 *
 * Optional: kclient/sender/partitioner.py falls back to its pure-Python murmur2 (and
 * kclient/sender/bulk.py to its Python partitioning) when this module is not built or
 * KCLIENT_PURE_PYTHON is set. Both give the same results (tested against each other and
 * against Java's test vectors). GIL held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "../record/_capi.h"

/* kclient.record._speedups.BinaryColumn, from the record layer's C API (NULL: not built, no
 * columns). */
static PyTypeObject *binary_column_type;

/* The signed 32-bit MurmurHash2 (seed 0x9747b28c) of `length` bytes, exactly as
 * org.apache.kafka.common.utils.Utils.murmur2 computes it. */
static uint32_t
murmur2_hash(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995U;
    uint32_t h = 0x9747b28cU ^ (uint32_t)length;
    const Py_ssize_t whole = length & ~(Py_ssize_t)3;

    for (Py_ssize_t i = 0; i < whole; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) |
                     ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[whole + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[whole + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[whole];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* murmur2(data) -> int: murmur2_hash of a bytes-like object, as a signed 32-bit int. */
static PyObject *
murmur2(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t h = murmur2_hash((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)(int32_t)h);
}

/* keyed_partition(key, num_partitions) -> int: toPositive(murmur2(key)) % num_partitions. */
static PyObject *
keyed_partition(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "keyed_partition(key, num_partitions) takes 2 arguments");
        return NULL;
    }
    long partitions = PyLong_AsLong(args[1]);
    if (partitions == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (partitions <= 0) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be positive, got %ld", partitions);
        return NULL;
    }
    PyObject *hashed = murmur2(module, args[0]);
    if (hashed == NULL) {
        return NULL;
    }
    long value = PyLong_AsLong(hashed);
    Py_DECREF(hashed);
    return PyLong_FromLong((long)((uint32_t)value & 0x7fffffffU) % partitions);
}

/* A writable or readable int64 buffer (array('q')); -1 with TypeError naming `what`. */
static int
int64_view(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT) < 0) {
        PyErr_Format(PyExc_TypeError, "%s must be an array('q')", what);
        return -1;
    }
    if (view->itemsize != 8 || view->format == NULL ||
        (strcmp(view->format, "q") != 0 && strcmp(view->format, "l") != 0)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be an array('q')", what);
        return -1;
    }
    return 0;
}

/* keyed_partitions(keys, explicit, num_partitions, start, stop, out) -> row
 * For the rows start..stop-1, out[row] = explicit[row] when given (explicit: a list of int
 * or None, or an array('q') where -1 is None), else the key's partition
 * (toPositive(murmur2(key)) % num_partitions) when the key is not None (keys: None, a list
 * of bytes or None, or a BinaryColumn), else -1. Stops at the first row whose explicit
 * partition is not an int in 0..num_partitions-1 and returns it (stop when there is none):
 * send() says what is wrong with that row. */
static PyObject *
keyed_partitions(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "keyed_partitions(keys, explicit, num_partitions, start, stop, out) "
                        "takes 6 arguments");
        return NULL;
    }
    PyObject *keys = args[0], *explicit = args[1];
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    Py_ssize_t start = PyLong_AsSsize_t(args[3]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (count <= 0) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be positive, got %zd", count);
        return NULL;
    }
    BinaryColumn *col = NULL;
    if (keys != Py_None && !PyList_CheckExact(keys)) {
        if (binary_column_type == NULL || !Py_IS_TYPE(keys, binary_column_type)) {
            PyErr_SetString(PyExc_TypeError, "keys must be None, a list or a BinaryColumn");
            return NULL;
        }
        col = (BinaryColumn *)keys;
    }
    Py_ssize_t n_keys = keys == Py_None ? 0 : col != NULL ? col->length : PyList_GET_SIZE(keys);
    Py_buffer out_view, explicit_view;
    int explicit_ints = 0;
    if (int64_view(args[5], &out_view, 1, "out") < 0) {
        return NULL;
    }
    if (explicit != Py_None && !PyList_CheckExact(explicit)) {
        if (int64_view(explicit, &explicit_view, 0, "explicit") < 0) {
            PyBuffer_Release(&out_view);
            return NULL;
        }
        explicit_ints = 1;
    }
    Py_ssize_t n_explicit = explicit == Py_None ? 0
                            : explicit_ints    ? explicit_view.len / 8
                                               : PyList_GET_SIZE(explicit);
    int64_t *out = (int64_t *)out_view.buf;
    if (start < 0 || stop > out_view.len / 8 || (keys != Py_None && stop > n_keys) ||
        (explicit != Py_None && stop > n_explicit)) {
        PyErr_Format(PyExc_IndexError, "keyed_partitions(): rows %zd..%zd are not in the columns",
                     start, stop);
        stop = -1;
        goto done;
    }
    for (Py_ssize_t row = start; row < stop; row++) {
        if (explicit != Py_None) {
            int64_t chosen = -1;
            if (explicit_ints) {
                chosen = ((const int64_t *)explicit_view.buf)[row];
            }
            else {
                PyObject *item = PyList_GET_ITEM(explicit, row);
                if (item != Py_None) {
                    chosen = PyLong_CheckExact(item) ? PyLong_AsLongLong(item) : -2;
                    if (chosen == -1 && PyErr_Occurred()) {
                        PyErr_Clear();
                        chosen = -2;
                    }
                    if (chosen == -1) {
                        chosen = -2; /* an explicit -1 is bad, not None */
                    }
                }
            }
            if (chosen != -1) {
                if (chosen < 0 || chosen >= count) {
                    stop = row;
                    break;
                }
                out[row] = chosen;
                continue;
            }
        }
        const char *ptr = NULL;
        Py_ssize_t len = -1;
        if (col != NULL) {
            len = column_row(col, row, &ptr);
        }
        else if (keys != Py_None) {
            PyObject *key = PyList_GET_ITEM(keys, row);
            if (key != Py_None) {
                if (!PyBytes_CheckExact(key)) {
                    PyErr_Format(PyExc_TypeError, "row %zd: key must be bytes or None, got %s",
                                 row, Py_TYPE(key)->tp_name);
                    stop = -1;
                    goto done;
                }
                ptr = PyBytes_AS_STRING(key);
                len = PyBytes_GET_SIZE(key);
            }
        }
        out[row] = len < 0 ? -1
                           : (int64_t)((murmur2_hash((const unsigned char *)ptr, len) &
                                        0x7fffffffU) %
                                       (uint32_t)count);
    }
done:
    if (explicit_ints) {
        PyBuffer_Release(&explicit_view);
    }
    PyBuffer_Release(&out_view);
    return stop < 0 ? NULL : PyLong_FromSsize_t(stop);
}

/* group_rows(partitions, start, stop, order) -> [(partition, first, last), ...]
 * The rows start..stop-1 grouped by partitions[row] (an array('q') of values >= -1):
 * order[first:last] holds each group's rows in row order (order: an array('q') of at least
 * stop - start items); the groups in partition order, -1 (sticky) first. */
static PyObject *
group_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "group_rows(partitions, start, stop, order) takes 4 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer parts_view, order_view;
    if (int64_view(args[0], &parts_view, 0, "partitions") < 0) {
        return NULL;
    }
    if (int64_view(args[3], &order_view, 1, "order") < 0) {
        PyBuffer_Release(&parts_view);
        return NULL;
    }
    PyObject *groups = NULL;
    Py_ssize_t *counts = NULL;
    const int64_t *parts = (const int64_t *)parts_view.buf;
    int64_t *order = (int64_t *)order_view.buf;
    if (start < 0 || stop < start || stop > parts_view.len / 8 ||
        stop - start > order_view.len / 8) {
        PyErr_Format(PyExc_IndexError, "group_rows(): rows %zd..%zd are not in the arrays",
                     start, stop);
        goto done;
    }
    int64_t highest = -1;
    for (Py_ssize_t row = start; row < stop; row++) {
        if (parts[row] < -1 || parts[row] >= INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "group_rows(): row %zd has partition %lld", row,
                         (long long)parts[row]);
            goto done;
        }
        if (parts[row] > highest) {
            highest = parts[row];
        }
    }
    Py_ssize_t buckets = (Py_ssize_t)highest + 2; /* -1 .. highest */
    counts = PyMem_Calloc((size_t)buckets + 1, sizeof(Py_ssize_t));
    if (counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t row = start; row < stop; row++) {
        counts[parts[row] + 2]++;
    }
    groups = PyList_New(0);
    if (groups == NULL) {
        goto done;
    }
    for (Py_ssize_t b = 0; b < buckets; b++) { /* counts[b + 1]: rows of partition b - 1 */
        Py_ssize_t n = counts[b + 1];
        counts[b + 1] = counts[b] + n; /* now the end of bucket b; counts[b] its start */
        if (n) {
            PyObject *group = Py_BuildValue("(nnn)", b - 1, counts[b], counts[b] + n);
            if (group == NULL || PyList_Append(groups, group) < 0) {
                Py_XDECREF(group);
                Py_CLEAR(groups);
                goto done;
            }
            Py_DECREF(group);
        }
    }
    for (Py_ssize_t row = start; row < stop; row++) { /* counts[b]: bucket b's next slot */
        order[counts[parts[row] + 1]++] = row;
    }
done:
    PyMem_Free(counts);
    PyBuffer_Release(&order_view);
    PyBuffer_Release(&parts_view);
    return groups;
}

static PyMethodDef methods[] = {
    {"murmur2", (PyCFunction)murmur2, METH_O, "Java's Utils.murmur2 (signed 32-bit)."},
    {"keyed_partition", (PyCFunction)(void (*)(void))keyed_partition, METH_FASTCALL,
     "toPositive(murmur2(key)) % num_partitions."},
    {"keyed_partitions", (PyCFunction)(void (*)(void))keyed_partitions, METH_FASTCALL,
     "keyed_partitions(keys, explicit, num_partitions, start, stop, out) -> first bad row"},
    {"group_rows", (PyCFunction)(void (*)(void))group_rows, METH_FASTCALL,
     "group_rows(partitions, start, stop, order) -> [(partition, first, last), ...]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kclient.sender._murmur2", "Java's murmur2 for the partitioner.",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__murmur2(void)
{
    if (binary_column_type == NULL) {
        const KclientRecordCAPI *record = kclient_record_capi();
        if (record == NULL) {
            PyErr_Clear(); /* not built, or from other sources: no BinaryColumn to read */
        }
        else {
            binary_column_type = record->column_type;
        }
    }
    return PyModule_Create(&module_def);
}
