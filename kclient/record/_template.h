/* SlotTemplate and copy_batch of kclient.record._speedups (_template.c). */
#ifndef KCLIENT_TEMPLATE_H
#define KCLIENT_TEMPLATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyTypeObject kclient_SlotTemplateType;

PyObject *kclient_copy_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
