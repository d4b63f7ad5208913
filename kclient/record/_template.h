/* SlotTemplate of kclient.record._speedups (_template.c). */
#ifndef KCLIENT_TEMPLATE_H
#define KCLIENT_TEMPLATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyTypeObject kclient_SlotTemplateType;

#endif
