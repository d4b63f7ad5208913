/*
 * The record layer's C API for the C of the layers above (CPython's datetime CAPI pattern):
 * kclient.record._speedups exports one capsule, _C_API, holding this struct; a module that
 * needs the record layer's C gets it in its init with kclient_record_capi() (the one
 * handshake) and reads the layouts in _writer.h and _column.h. The version is checked there:
 * a module built from other sources fails its import (ImportError) and kclient runs its
 * pure-Python code. Bump KCLIENT_RECORD_CAPI_VERSION when this struct, RecordsWriter or
 * BinaryColumn changes.
 */
#ifndef KCLIENT_RECORD_CAPI_H
#define KCLIENT_RECORD_CAPI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_column.h"
#include "_writer.h"

#define KCLIENT_RECORD_CAPI_VERSION 1
#define KCLIENT_RECORD_CAPI_NAME "kclient.record._speedups._C_API"

typedef struct {
    int version; /* KCLIENT_RECORD_CAPI_VERSION of the record module's sources; first, always */
    PyTypeObject *writer_type; /* RecordsWriter */
    PyTypeObject *column_type; /* BinaryColumn */
    /* kclient_writer_append (_writer.h): the offset delta, -1 when full, -2 with an error */
    Py_ssize_t (*writer_append)(RecordsWriter *self, PyObject *timestamp_ms, PyObject *key,
                                PyObject *value, PyObject *headers);
} KclientRecordCAPI;

/* The record module's C API, for a module's init: NULL with ImportError when the record
 * module is not built or was built from other sources. PyCapsule_Import's work, from the
 * module object: before 3.13 it getattr()s from the top package, which fails while
 * kclient.record is being imported (its _accel.py imports the sender's module). */
static inline const KclientRecordCAPI *
kclient_record_capi(void)
{
    PyObject *module = PyImport_ImportModule("kclient.record._speedups");
    PyObject *capsule = module == NULL ? NULL : PyObject_GetAttrString(module, "_C_API");
    const KclientRecordCAPI *api = NULL;
    if (capsule != NULL) {
        api = (const KclientRecordCAPI *)PyCapsule_GetPointer(capsule, KCLIENT_RECORD_CAPI_NAME);
    }
    Py_XDECREF(capsule); /* the struct is static in the record module, never unloaded */
    Py_XDECREF(module);
    if (api == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ImportError)) { /* no _C_API: older sources */
            PyErr_Clear();
            PyErr_SetString(PyExc_ImportError, "kclient.record._speedups has no _C_API: "
                                               "built from older sources (rebuild it)");
        }
        return NULL;
    }
    if (api->version != KCLIENT_RECORD_CAPI_VERSION) {
        PyErr_Format(PyExc_ImportError,
                     "%s is version %d, this module needs version %d: the two were built "
                     "from different sources (rebuild both)",
                     KCLIENT_RECORD_CAPI_NAME, api->version, KCLIENT_RECORD_CAPI_VERSION);
        return NULL;
    }
    return api;
}

#endif
