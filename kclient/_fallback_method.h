/*
 * A method descriptor written in C that falls back to a Python function: `general`.
 *
 * On the class it is `general` itself (signature, annotations, docstring: inspect sees the
 * Python function); called on an instance it runs its own vectorcall, which takes the common
 * case and calls `general` with the same arguments for anything else. Used by
 * KafkaProducer.send (kclient/record/_send.c) and AIOKafkaProducer.send
 * (kclient/aio/_future_module.c); each includes this file (static functions, one copy per
 * extension module).
 */
#ifndef KCLIENT_FALLBACK_METHOD_H
#define KCLIENT_FALLBACK_METHOD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *general;
    vectorcallfunc vectorcall;
} FallbackMethod;

/* The call's arguments into argv: argv[0] the instance, argv[1..count] the parameters named
 * kw_names (interned, in order; argv's slots start as the defaults, argv[1] as NULL: the
 * required first parameter). 0 when the C path cannot take the call: more than
 * max_positional positional arguments (the instance counted), a keyword it does not know or
 * also given by position, or no first parameter. */
static inline int
fallback_bind(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **kw_names,
              int count, Py_ssize_t max_positional, PyObject **argv)
{
    if (nargs < 1 || nargs > max_positional) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        argv[i] = args[i];
    }
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            int j = 0;
            while (j < count && name != kw_names[j]) { /* interned: the compiler's names */
                j++;
            }
            if (j == count || j + 1 < nargs) { /* unknown, or also given positionally */
                return 0;
            }
            argv[j + 1] = args[nargs + i];
        }
    }
    return argv[1] != NULL;
}

/* The Python function, with the call exactly as it came. */
static inline PyObject *
fallback_general(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->general, args, nargsf, kwnames);
}

static inline PyObject *
fallback_get(FallbackMethod *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self->general);
    }
    return PyMethod_New((PyObject *)self, obj);
}

/* tp_new's body: `Type(general)`, calls going to `call`. */
static inline PyObject *
fallback_new(PyTypeObject *type, PyObject *args, PyObject *kwds, vectorcallfunc call,
             const char *format)
{
    PyObject *general;
    static char *names[] = {"general", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, format, names, &general)) {
        return NULL;
    }
    FallbackMethod *self = (FallbackMethod *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->general = Py_NewRef(general);
    self->vectorcall = call;
    return (PyObject *)self;
}

static inline void
fallback_dealloc(FallbackMethod *self)
{
    Py_CLEAR(self->general);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* __wrapped__ and any other attribute the type lacks: the Python function's
 * (inspect.signature follows __wrapped__). */
static inline PyObject *
fallback_getattro(FallbackMethod *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr((PyObject *)self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        return found;
    }
    PyErr_Clear();
    if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) {
        return Py_NewRef(self->general);
    }
    return PyObject_GetAttr(self->general, name);
}

/* __doc__, __module__, __qualname__, __name__ (which the type itself has): the Python
 * function's. */
static inline PyObject *
fallback_general_attr(FallbackMethod *self, void *closure)
{
    return PyObject_GetAttrString(self->general, (const char *)closure);
}

#define FALLBACK_GETSET                                                                    \
    {"__doc__", (getter)fallback_general_attr, NULL, NULL, "__doc__"},                     \
        {"__module__", (getter)fallback_general_attr, NULL, NULL, "__module__"},           \
        {"__qualname__", (getter)fallback_general_attr, NULL, NULL, "__qualname__"},       \
        {"__name__", (getter)fallback_general_attr, NULL, NULL, "__name__"},               \
    {                                                                                      \
        NULL, NULL, NULL, NULL, NULL                                                       \
    }

/* The type's slots, beside tp_name, tp_basicsize, tp_new and tp_getset. */
#define FALLBACK_SLOTS                                                                     \
    .tp_dealloc = (destructor)fallback_dealloc,                                            \
    .tp_vectorcall_offset = offsetof(FallbackMethod, vectorcall),                          \
    .tp_call = PyVectorcall_Call, .tp_getattro = (getattrofunc)fallback_getattro,          \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL, \
    .tp_descr_get = (descrgetfunc)fallback_get

#endif
