/*
 * A small helper for C that calls Python, shared by kclient's extension modules; each
 * includes this file (static inline functions, one copy per module that uses them).
 */
#ifndef KCLIENT_PYCALL_H
#define KCLIENT_PYCALL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The exception being raised, taken off the error indicator: its value, normalized and
 * with its traceback attached (a new reference), as `except ... as exc` binds it. */
static inline PyObject *
take_exception(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

#endif
