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
 * Cheaper than getattr, which looks the name up on the class first; but on CPython 3.11 it
 * makes the instance build a real __dict__ from its inline values, after which every
 * attribute access to it costs a little more, Python's own included: for objects C reads
 * much more than Python does (measure). A new reference. */
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

/* bool(value) of a new reference, which it releases: 1, 0, or -1 with the exception (also
 * when value is NULL: the getter that made it failed). */
static inline int
take_truth(PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

/* bool(getattr(obj, name)): 1, 0, or -1 with the exception. */
static inline int
attr_truth(PyObject *obj, PyObject *name)
{
    return take_truth(attr_get(obj, name));
}

/* bool(getattr(obj, name)) by getattr itself (for objects whose __dict__ C should not
 * touch: see attr_get). 1, 0, or -1 with the exception. */
static inline int
attr_truth_getattr(PyObject *obj, PyObject *name)
{
    return take_truth(PyObject_GetAttr(obj, name));
}
/* logger.isEnabledFor(level) without the call when it can: for exactly a logging.Logger,
 * what that method reads first (False when `disabled`, else its `_cache` of answers per
 * level); the call itself when the cache has no answer yet, or for a logger of another
 * class (which may decide otherwise). 1, 0, or -1 with the exception. */
static inline int
logger_enabled_for(PyObject *logger, PyObject *level)
{
    static PyTypeObject *logger_type;
    static PyObject *s_disabled, *s_cache, *s_is_enabled_for;
    if (logger_type == NULL) {
        PyObject *logging = PyImport_ImportModule("logging");
        PyObject *type = logging == NULL ? NULL : PyObject_GetAttrString(logging, "Logger");
        Py_XDECREF(logging);
        if (type == NULL) {
            return -1;
        }
        s_disabled = PyUnicode_InternFromString("disabled");
        s_cache = PyUnicode_InternFromString("_cache");
        s_is_enabled_for = PyUnicode_InternFromString("isEnabledFor");
        if (s_disabled == NULL || s_cache == NULL || s_is_enabled_for == NULL) {
            Py_DECREF(type);
            return -1;
        }
        logger_type = (PyTypeObject *)type; /* kept: the module holds it for good */
    }
    if (Py_TYPE(logger) == logger_type) {
        int disabled = attr_truth_getattr(logger, s_disabled);
        if (disabled != 0) {
            return disabled < 0 ? -1 : 0;
        }
        PyObject *cache = PyObject_GetAttr(logger, s_cache);
        if (cache == NULL) {
            return -1;
        }
        PyObject *known = PyDict_CheckExact(cache) ? PyDict_GetItemWithError(cache, level) : NULL;
        Py_DECREF(cache);
        if (known == Py_True || known == Py_False) {
            return known == Py_True;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    PyObject *args[2] = {logger, level};
    PyObject *enabled = PyObject_VectorcallMethod(s_is_enabled_for, args,
                                                  2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    int on = enabled == NULL ? -1 : PyObject_IsTrue(enabled);
    Py_XDECREF(enabled);
    return on;
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
