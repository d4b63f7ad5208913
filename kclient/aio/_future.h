/*
 * Shared declarations of kclient.aio._future (_future.c: RecordFuture; _settle.c: Ready,
 * track and the per-batch settle; _watch.c: Tracker, BatchWatch; _future_module.c: AioSend and the module).
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

/* kclient.sender.future's FutureRecordMetadata (a record) and ProduceResult (its batch's
 * outcome): the fields read here, their names, and their __slots__ offsets (-1: getattr). */
enum { R_PRODUCE_RESULT, R_OFFSET_DELTA, R_TIMESTAMP_MS, R_KEY_SIZE, R_VALUE_SIZE, R_COUNT };
enum {
    P_DONE, P_SUPERSEDED, P_RECORD_ERRORS, P_ERROR, P_TP, P_BASE_OFFSET, P_LOG_APPEND_TIME_MS,
    P_COUNT
};
extern PyTypeObject *kaio_RecordType, *kaio_ResultType;
extern Py_ssize_t kaio_record_slots[R_COUNT], kaio_result_slots[P_COUNT];
extern PyObject *kaio_record_names[R_COUNT], *kaio_result_names[P_COUNT];

/* obj.<names[i]> (a new reference): read at its slot's offset when obj is exactly `type`
 * and the slot is set, else getattr (its AttributeError when unset, a subclass's own). */
static inline PyObject *
kaio_attr(PyObject *obj, PyTypeObject *type, const Py_ssize_t *slots, PyObject **names, int i)
{
    if (Py_TYPE(obj) == type && slots[i] >= 0) {
        PyObject *value = *(PyObject **)((char *)obj + slots[i]);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(obj, names[i]);
}

#define kaio_record_attr(record, i)                                                            \
    kaio_attr((record), kaio_RecordType, kaio_record_slots, kaio_record_names, (i))
#define kaio_result_attr(result, i)                                                            \
    kaio_attr((result), kaio_ResultType, kaio_result_slots, kaio_result_names, (i))

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

extern PyTypeObject kaio_FutureType, kaio_ReadyType, kaio_WatchType, kaio_TrackerType,
    kaio_DriverType;

#define Future_Check(op) PyObject_TypeCheck(op, &kaio_FutureType)

/* _future.c */
FutureObject *future_create(PyTypeObject *type, PyObject *loop);
int call_soon(PyObject *loop, PyObject *fn, PyObject *future, PyObject *ctx);
/* throw(type[, value[, tb]]) not caught: raise what it was given; NULL (_settle.c). */
PyObject *kaio_raise_thrown(PyObject *args);
int finish(FutureObject *self, PyObject *result, PyObject *exception, PyObject *pending);
PyObject *stop_iteration(PyObject *value);

/* _settle.c */
PyObject *ready_create(PyObject *value);
PyObject *ready_value(PyObject *ready); /* borrowed: a Ready's value */
PyObject *aio_track(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *kaio_track_row(PyObject *rows, PyObject *loop, PyObject *record, int ready);
PyObject *aio_settle_ok(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_settle_error(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_settle_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_run_callbacks(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *aio_dispatch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* _driver.c */
int kaio_driver_init(void);

/* _send_wait.c (and _future_module.c's AioSend) */
extern PyTypeObject kaio_SendAndWaitType, kaio_AioSendType;
int kaio_send_wait_init(void);

/* _watch.c */
int kaio_watch_init(void);
PyObject *kaio_tracker_track(PyObject *tracker, PyObject *record, int ready);

#endif
