/*
 * __slots__ members read and written from C at the offsets their member descriptors give
 * (what CPython's own LOAD_ATTR_SLOT does), by kclient/record/_append.c and _send.c (the
 * Appender).
 */
#ifndef KCLIENT_SLOTS_H
#define KCLIENT_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* A __slots__ member of `obj` read or written at its descriptor's offset. */
#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* The offset of `name`, a __slots__ member of `type`; -1 with TypeError if it is not one. */
static inline Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    Py_ssize_t offset = -1;
    if (descr == NULL) {
        return -1;
    }
    if (Py_TYPE(descr) == &PyMemberDescr_Type &&
        ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX) {
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    else {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", type->tp_name, name);
    }
    Py_DECREF(descr);
    return offset;
}

#endif
