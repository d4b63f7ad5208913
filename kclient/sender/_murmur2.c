/*
 * kclient.sender._murmur2: Java's Utils.murmur2 in C, for the keyed partitioner.
 *
 * Optional: kclient/sender/partitioner.py falls back to its pure-Python murmur2 when this
 * module is not built or KCLIENT_PURE_PYTHON is set. Both give the same results (tested
 * against each other and against Java's test vectors).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* murmur2(data) -> int: the signed 32-bit MurmurHash2 (seed 0x9747b28c) of a bytes-like
 * object, exactly as org.apache.kafka.common.utils.Utils.murmur2 computes it. */
static PyObject *
murmur2(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    const Py_ssize_t length = view.len;
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

static PyMethodDef methods[] = {
    {"murmur2", (PyCFunction)murmur2, METH_O, "Java's Utils.murmur2 (signed 32-bit)."},
    {"keyed_partition", (PyCFunction)(void (*)(void))keyed_partition, METH_FASTCALL,
     "toPositive(murmur2(key)) % num_partitions."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kclient.sender._murmur2", "Java's murmur2 for the partitioner.",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__murmur2(void)
{
    return PyModule_Create(&module_def);
}
