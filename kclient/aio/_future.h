/*
 * Shared declarations of kclient.aio._future (_future.c: RecordFuture; _settle.c: Ready and
 * the per-batch settle; _future_module.c: the module).
 */
#ifndef KCLIENT_AIO_FUTURE_H
#define KCLIENT_AIO_FUTURE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

enum { PENDING = 0, FINISHED = 1, CANCELLED = 2 };

extern PyObject *kaio_CancelledError;    /* asyncio.CancelledError */
extern PyObject *kaio_InvalidStateError; /* asyncio.InvalidStateError */
extern PyTypeObject *kaio_RecordMetadataType;
extern PyObject *kaio_str_call_soon, *kaio_str_call_exception_handler, *kaio_str_context;
extern PyObject *kaio_kwnames_context; /* ("context",) */

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *result;
    PyObject *exception;
    PyObject *cancel_msg;
    PyObject *cb0; /* the first callback and its context, kept apart: usually the only one */
    PyObject *ctx0;
    PyObject *callbacks; /* the others: a list fn, ctx, fn, ctx, ... (or NULL) */
    PyObject *weakreflist;
    unsigned char state;
    unsigned char blocking; /* _asyncio_future_blocking */
    unsigned char log_tb;   /* an exception nobody retrieved yet */
} FutureObject;

extern PyTypeObject kaio_FutureType, kaio_ReadyType;

#define Future_Check(op) PyObject_TypeCheck(op, &kaio_FutureType)

/* _future.c */
FutureObject *future_create(PyTypeObject *type, PyObject *loop);
int call_soon(PyObject *loop, PyObject *fn, PyObject *future, PyObject *ctx);
int finish(FutureObject *self, PyObject *result, PyObject *exception, PyObject *pending);
void untrack_settled(FutureObject *self);
PyObject *stop_iteration(PyObject *value);

/* _settle.c */
PyObject *ready_create(PyObject *value);
PyObject *aio_add_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_settle_ok(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_settle_error(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_settle_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_run_callbacks(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_dispatch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
