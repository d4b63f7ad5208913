/*
 * kclient._clock: SystemClock.monotonic_ms without a Python frame (kclient/clock.py; the
 * Sender, the network client and the appender read it several times per request).
 *
 * The same clock as time.monotonic_ns() // 1_000_000: on Linux both read CLOCK_MONOTONIC;
 * elsewhere this calls time.monotonic_ns itself.
 *
 * Threads: any, GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __linux__
#include <time.h>
#else
static PyObject *monotonic_ns_fn; /* time.monotonic_ns */
#endif

static PyObject *
clock_monotonic_ms(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
#ifdef __linux__
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
#else
    PyObject *ns = PyObject_CallNoArgs(monotonic_ns_fn);
    if (ns == NULL) {
        return NULL;
    }
    long long value = PyLong_AsLongLong(ns);
    Py_DECREF(ns);
    if (value == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromLongLong(value / 1000000); /* never negative: floor = truncation */
#endif
}

static PyMethodDef clock_methods[] = {
    {"monotonic_ms", clock_monotonic_ms, METH_NOARGS,
     "monotonic_ms() -> int: time.monotonic_ns() // 1_000_000."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef clock_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient._clock",
    .m_doc = "SystemClock's monotonic_ms in C (see kclient/clock.py).",
    .m_size = -1,
    .m_methods = clock_methods,
};

PyMODINIT_FUNC
PyInit__clock(void)
{
#ifndef __linux__
    if (monotonic_ns_fn == NULL) {
        PyObject *time = PyImport_ImportModule("time");
        if (time == NULL) {
            return NULL;
        }
        monotonic_ns_fn = PyObject_GetAttrString(time, "monotonic_ns");
        Py_DECREF(time);
        if (monotonic_ns_fn == NULL) {
            return NULL;
        }
    }
#endif
    return PyModule_Create(&clock_module);
}
