/*
 * kclient.network._channel: LoopSelector's select (kclient/aio/loop_selector.py) without a
 * Python frame (LoopSelect, a method descriptor over PyLoopSelector.select, which takes any
 * other call), and the body of its reader callback (loop_readable). Same results and state as
 * the Python (tested against each other). The event loop's thread, GIL held.
 */
#include "_selector.h"

#include <stddef.h>

#include "../_fallback_method.h"

static PyObject *select_kw_names[1];

/* LoopSelector.select(timeout=None): what the loop reported since the last call. */
static PyObject *
loop_select_call(FallbackMethod *method, PyObject *const *args, size_t nargsf,
                 PyObject *kwnames)
{
    PyObject *argv[2] = {NULL, Py_None};
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == 1 && kwnames == NULL) {
        argv[0] = args[0];
    }
    else if (!fallback_bind(args, nargs, kwnames, select_kw_names, 1, 2, argv)) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *self = argv[0], *timeout = argv[1], *requested;
    if (timeout == Py_None) {
        requested = PyLong_FromLong(MAX_SELECT_TIMEOUT_MS);
    }
    else {
        PyObject *product = PyNumber_Multiply(timeout, thousand);
        requested = product ? PyNumber_Long(product) : NULL;
        Py_XDECREF(product);
    }
    if (requested == NULL) {
        return NULL;
    }
    int failed = PyObject_SetAttr(self, s_requested_timeout_ms, requested);
    Py_DECREF(requested);
    PyObject *ready = failed ? NULL : PyObject_GetAttr(self, s_ready);
    if (ready == NULL) {
        return NULL;
    }
    int any = PyObject_IsTrue(ready);
    if (any <= 0) {
        Py_DECREF(ready);
        if (any < 0 || PyObject_SetAttr(self, s_returned_events, Py_False) < 0) {
            return NULL;
        }
        return PyList_New(0);
    }
    PyObject *keys = NULL, *result = NULL;
    if (!PyDict_CheckExact(ready) || PyObject_SetAttr(self, s_returned_events, Py_True) < 0 ||
        (keys = PyObject_GetAttr(self, s_keys)) == NULL || (result = PyList_New(0)) == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "LoopSelector._ready must be a dict");
        }
        goto failed;
    }
    Py_ssize_t pos = 0;
    PyObject *fd, *mask;
    while (PyDict_Next(ready, &pos, &fd, &mask)) {
        Py_INCREF(fd);
        Py_INCREF(mask);
        PyObject *key = PyObject_GetItem(keys, fd);
        PyObject *events = key ? PyObject_GetAttr(key, s_events) : NULL;
        PyObject *both = events ? PyNumber_And(mask, events) : NULL;
        PyObject *pair = both ? PyTuple_Pack(2, key, both) : NULL;
        int appended = pair ? PyList_Append(result, pair) : -1;
        Py_XDECREF(pair);
        Py_XDECREF(both);
        Py_XDECREF(events);
        Py_XDECREF(key);
        Py_DECREF(mask);
        Py_DECREF(fd);
        if (appended < 0) {
            goto failed;
        }
    }
    PyDict_Clear(ready);
    Py_DECREF(keys);
    Py_DECREF(ready);
    return result;
failed:
    Py_XDECREF(result);
    Py_XDECREF(keys);
    Py_DECREF(ready);
    return NULL;
}

/* loop_readable(loop_selector, fd): LoopSelector._readable's body, the loop's reader callback:
 * fd is readable (_ready[fd] |= EVENT_READ), then on_ready(). */
static PyObject *
loop_readable(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "loop_readable(loop_selector, fd)");
        return NULL;
    }
    PyObject *self = args[0], *fd = args[1];
    PyObject *ready = PyObject_GetAttr(self, s_ready);
    if (ready == NULL) {
        return NULL;
    }
    PyObject *owned, *mask = dict_get(ready, fd, &owned), *marked = NULL;
    if (mask != NULL || !PyErr_Occurred()) {
        marked = PyNumber_Or(mask ? mask : zero, one);
    }
    Py_XDECREF(owned);
    int failed = marked == NULL || PyObject_SetItem(ready, fd, marked) < 0;
    Py_XDECREF(marked);
    Py_DECREF(ready);
    return failed ? NULL : call0(self, s_on_ready);
}

FALLBACK_TYPE(LoopSelectType, "LoopSelect", loop_select_call, "O:LoopSelect")

static PyMethodDef loop_methods[] = {
    {"loop_readable", (PyCFunction)(void (*)(void))loop_readable, METH_FASTCALL,
     "loop_readable(loop_selector, fd): LoopSelector._readable's body."},
    {NULL, NULL, 0, NULL},
};

int
loop_select_add_to_module(PyObject *module)
{
    select_kw_names[0] = s_timeout;
    if (PyType_Ready(&LoopSelectType) < 0 ||
        PyModule_AddObjectRef(module, "LoopSelect", (PyObject *)&LoopSelectType) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, loop_methods);
}
