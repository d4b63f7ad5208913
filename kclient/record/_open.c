/*
 * Appender.configure_open and the new batch send_open opens itself (kclient.record._speedups;
 * the Appender is in _append.c). When the partition's open batch has no room for a record,
 * send_open opens the next batch under the same hold of the topic's lock, as
 * RecordAccumulator.open_batch_now and _open_batch do (the reference, which the pure-Python
 * appender calls): buffer.memory reserved if free now (else None, nothing done: send goes the
 * general way, which waits), the batch made (the accumulator's batch maker), the record
 * appended, its future and callback, then the batch queued, counted, dated and added to the
 * incomplete batches. The caller wakes the accumulator once the lock is released.
 *
 * Threads: the GIL is held; the topic's lock is held by the caller.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_append.h"

static PyObject *str_append;       /* "append" */

/* configure_open(accumulator, try_allocate, deallocate, make_batch, batch_ids, monotonic_ms,
 * incomplete_add, batch_size) */
PyObject *
kclient_appender_configure_open(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "configure_open() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < 7; i++) {
        if (i != 4 && !PyCallable_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "configure_open: argument %zd must be callable", i);
            return NULL;
        }
    }
    if (!PyIter_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "configure_open: batch_ids must be an iterator");
        return NULL;
    }
    Py_ssize_t batch_size = PyLong_AsSsize_t(args[7]);
    if (batch_size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (str_append == NULL) {
        str_append = PyUnicode_InternFromString("append");
        if (str_append == NULL) {
            return NULL;
        }
    }
    Py_ssize_t tps = slot_offset(self->queues_type, "tps");
    Py_ssize_t queued = tps < 0 ? -1 : slot_offset(self->queues_type, "queued");
    Py_ssize_t last = queued < 0 ? -1 : slot_offset(self->queues_type, "last_batch_ms");
    if (last < 0) {
        return NULL;
    }
    self->q_tps = tps;
    self->q_queued = queued;
    self->q_last_batch_ms = last;
    self->o_batch_size = batch_size;
    Py_XSETREF(self->o_accumulator, Py_NewRef(args[0]));
    Py_XSETREF(self->o_try_allocate, Py_NewRef(args[1]));
    Py_XSETREF(self->o_deallocate, Py_NewRef(args[2]));
    Py_XSETREF(self->o_make_batch, Py_NewRef(args[3]));
    Py_XSETREF(self->o_batch_ids, Py_NewRef(args[4]));
    Py_XSETREF(self->o_monotonic_ms, Py_NewRef(args[5]));
    Py_XSETREF(self->o_incomplete_add, Py_NewRef(args[6]));
    Py_RETURN_NONE;
}

int
kclient_open_traverse(Appender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->o_accumulator);
    Py_VISIT(self->o_try_allocate);
    Py_VISIT(self->o_deallocate);
    Py_VISIT(self->o_make_batch);
    Py_VISIT(self->o_batch_ids);
    Py_VISIT(self->o_monotonic_ms);
    Py_VISIT(self->o_incomplete_add);
    return 0;
}

void
kclient_open_clear(Appender *self)
{
    Py_CLEAR(self->o_accumulator);
    Py_CLEAR(self->o_try_allocate);
    Py_CLEAR(self->o_deallocate);
    Py_CLEAR(self->o_make_batch);
    Py_CLEAR(self->o_batch_ids);
    Py_CLEAR(self->o_monotonic_ms);
    Py_CLEAR(self->o_incomplete_add);
}

/* Call fn(arg); 0, or -1 with an exception. */
static int
call_one(PyObject *fn, PyObject *arg)
{
    PyObject *out = PyObject_CallOneArg(fn, arg);
    Py_XDECREF(out);
    return out == NULL ? -1 : 0;
}

/* The new batch, queued: its partition's deque, the topic's count and time of its newest
 * batch. 0, or -1 with an exception and nothing changed. */
static int
queue_batch(Appender *self, PyObject *queues, PyObject *dq, PyObject *batch, PyObject *created)
{
    PyObject *queued = SLOT(queues, self->q_queued);
    if (queued == NULL) {
        PyErr_SetString(PyExc_AttributeError, "TopicQueues.queued is not set");
        return -1;
    }
    PyObject *one = PyLong_FromLong(1);
    PyObject *more = one == NULL ? NULL : PyNumber_Add(queued, one);
    Py_XDECREF(one);
    if (more == NULL) {
        return -1;
    }
    PyObject *out = PyObject_CallMethodOneArg(dq, str_append, batch);
    if (out == NULL) {
        Py_DECREF(more);
        return -1;
    }
    Py_DECREF(out);
    Py_XSETREF(SLOT(queues, self->q_queued), more);
    Py_XSETREF(SLOT(queues, self->q_last_batch_ms), Py_NewRef(created));
    return 0;
}

PyObject *
kclient_open_locked(Appender *self, PyObject *queues, PyObject *partition, PyObject *dq,
                    PyObject *const *args, Py_ssize_t size_estimate, PyObject **batch_out)
{
    PyObject *ts = args[0], *key = args[1], *value = args[2], *headers = args[3];
    PyObject *callback = args[4];
    Py_ssize_t size = size_estimate > self->o_batch_size ? size_estimate : self->o_batch_size;
    PyObject *size_obj = PyLong_FromSsize_t(size);
    if (size_obj == NULL) {
        return NULL;
    }
    PyObject *reserved = PyObject_CallOneArg(self->o_try_allocate, size_obj);
    int ok = reserved == NULL ? -1 : PyObject_IsTrue(reserved);
    Py_XDECREF(reserved);
    if (ok <= 0) {
        Py_DECREF(size_obj);
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    }
    /* size_obj bytes are ours: given back unless the batch is queued */
    PyObject *batch = NULL, *future = NULL, *batch_id = NULL, *created = NULL;
    PyObject *tps = SLOT(queues, self->q_tps);
    PyObject *tp = tps == NULL ? NULL : PyObject_GetItem(tps, partition);
    if (tp == NULL) {
        goto failed;
    }
    batch_id = PyIter_Next(self->o_batch_ids);
    if (batch_id == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "the batch ids ran out");
        }
        goto failed;
    }
    created = PyObject_CallNoArgs(self->o_monotonic_ms);
    if (created == NULL) {
        goto failed;
    }
    PyObject *make_args[4] = {tp, size_obj, created, batch_id};
    batch = PyObject_Vectorcall(self->o_make_batch, make_args, 4, NULL);
    if (batch == NULL) {
        goto failed;
    }
    if (!PyObject_TypeCheck(batch, self->batch_type)) {
        PyErr_Format(PyExc_TypeError, "the batch maker made a %s, not a ProducerBatch",
                     Py_TYPE(batch)->tp_name);
        goto failed;
    }
    Py_ssize_t delta = kclient_batch_append(self, batch, ts, key, value, headers);
    if (delta < 0) {
        if (delta == -1) {
            PyErr_Format(self->closed_error, "an empty batch for %R refused a record", tp);
        }
        goto failed;
    }
    PyObject *result = SLOT(batch, self->b_result);
    if (result == NULL) {
        PyErr_SetString(PyExc_AttributeError, "ProducerBatch.result is not set");
        goto failed;
    }
    future = kclient_new_future(self, batch, result, delta, ts, key, value, callback);
    if (future == NULL) {
        goto failed;
    }
    if (queue_batch(self, queues, dq, batch, created) < 0) {
        goto failed;
    }
    /* queued: the batch holds the memory now, whatever happens next (as in _open_batch) */
    int added = call_one(self->o_incomplete_add, batch);
    Py_DECREF(tp);
    Py_DECREF(batch_id);
    Py_DECREF(created);
    Py_DECREF(size_obj);
    if (added < 0) {
        Py_DECREF(batch);
        Py_DECREF(future);
        return NULL;
    }
    *batch_out = batch;
    return future;

failed:
    Py_XDECREF(tp);
    Py_XDECREF(batch_id);
    Py_XDECREF(created);
    Py_XDECREF(batch);
    Py_XDECREF(future);
    { /* give the memory back, keeping the error that brought us here */
        PyObject *type, *exc, *tb;
        PyErr_Fetch(&type, &exc, &tb);
        if (call_one(self->o_deallocate, size_obj) < 0) {
            PyErr_WriteUnraisable(self->o_deallocate);
        }
        PyErr_Restore(type, exc, tb);
    }
    Py_DECREF(size_obj);
    return NULL;
}
