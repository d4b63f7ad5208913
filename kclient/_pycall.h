/*
 * Small helpers for C that calls Python (methods by interned name, an attribute's truth),
 * shared by kclient's extension modules; each includes this file (static inline functions,
 * one copy per module that uses them).
 */
#ifndef KCLIENT_PYCALL_H
#define KCLIENT_PYCALL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* getattr(obj, name) for an instance attribute (one that __init__ sets, with no descriptor
 * of that name on the class): read from the instance's __dict__ when the type looks
 * attributes up the generic way; getattr itself otherwise, or when the dict lacks the name.
 * Cheaper than getattr, which looks the name up on the class first. A new reference. */
static inline PyObject *
attr_get(PyObject *obj, PyObject *name)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type->tp_getattro == PyObject_GenericGetAttr && type->tp_dictoffset != 0) {
        PyObject *dict = PyObject_GenericGetDict(obj, NULL);
        if (dict == NULL) {
            return NULL;
        }
        PyObject *value = PyDict_GetItemWithError(dict, name);
        Py_DECREF(dict);
        if (value != NULL) {
            return Py_NewRef(value);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return PyObject_GetAttr(obj, name);
}

/* bool(getattr(obj, name)): 1, 0, or -1 with the exception. */
static inline int
attr_truth(PyObject *obj, PyObject *name)
{
    PyObject *value = attr_get(obj, name);
    if (value == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

/* obj.name(), obj.name(a), obj.name(a, b), obj.name(a, b, c): a new reference or NULL. */
static inline PyObject *
call0(PyObject *obj, PyObject *name)
{
    PyObject *args[1] = {obj};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static inline PyObject *
call1(PyObject *obj, PyObject *name, PyObject *a)
{
    PyObject *args[2] = {obj, a};
    return PyObject_VectorcallMethod(name, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static inline PyObject *
call2(PyObject *obj, PyObject *name, PyObject *a, PyObject *b)
{
    PyObject *args[3] = {obj, a, b};
    return PyObject_VectorcallMethod(name, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static inline PyObject *
call3(PyObject *obj, PyObject *name, PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *args[4] = {obj, a, b, c};
    return PyObject_VectorcallMethod(name, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* A call made for its effect, its result dropped: 0, or -1 with its exception. */
static inline int
done(PyObject *result)
{
    if (result == NULL) {
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

#endif
