/*
 * kclient.sender._complete: the success path of one batch (ProduceResponses._complete_success
 * and what it calls: _remove_in_flight, ProducerBatch.complete / _done, ProduceResult.set,
 * RecordAccumulator.deallocate, IncompleteBatches.remove, BufferPool.deallocate), step for
 * step as the Python does it. See _complete.c.
 *
 * Threads: the Sender thread, GIL held; a contended lock is waited for by its own acquire.
 */
#include "_complete.h"

/* ProduceResponses._remove_in_flight */
static int
remove_in_flight(Answer *a, PyObject *batch)
{
    if (!PyDict_CheckExact(a->in_flight)) {
        return done(call1(a->sender, s_remove_in_flight, batch));
    }
    PyObject *batches = PyDict_GetItemWithError(a->in_flight, SLOT(batch, cfg.b_tp));
    if (batches == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyList_CheckExact(batches)) {
        return done(call1(a->sender, s_remove_in_flight, batch));
    }
    Py_INCREF(batches);
    int status = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(batches); i++) {
        PyObject *item = Py_NewRef(PyList_GET_ITEM(batches, i));
        int equal = PyObject_RichCompareBool(item, batch, Py_EQ);
        Py_DECREF(item);
        if (equal != 0) {
            if (equal > 0 && i < PyList_GET_SIZE(batches)) {
                status = PyList_SetSlice(batches, i, i + 1, NULL);
            }
            else if (equal < 0) {
                status = -1;
            }
            break;
        }
    }
    Py_DECREF(batches);
    return status;
}

/* ProducerBatch.complete(base_offset, log_append_time_ms, wakeups) for a batch of exactly
 * ProducerBatch with a ProduceResult not done: ProducerBatch._done and ProduceResult.set. */
static int
complete_batch(Answer *a, PyObject *batch, PyObject *base_offset, PyObject *log_append_time_ms)
{
    PyObject *result = SLOT(batch, cfg.b_result);
    if (result == NULL || Py_TYPE(result) != cfg.result || SLOT(batch, cfg.b_final_state) != Py_None ||
        SLOT(result, cfg.r_done) != Py_False || SLOT(result, cfg.r_lock) == NULL ||
        SLOT(result, cfg.r_watchers) == NULL || SLOT(result, cfg.r_gate) == NULL ||
        SLOT(batch, cfg.b_thunks) == NULL) {
        /* anything unusual, and the errors a second completion raises: the Python way */
        return done(call3(batch, s_complete, base_offset, log_append_time_ms, a->wakeups));
    }
    slot_set(batch, cfg.b_final_state, cfg.succeeded);
    Py_INCREF(result);
    PyObject *thunks = Py_NewRef(SLOT(batch, cfg.b_thunks));
    int finish = PyObject_Not(thunks);
    PyObject *watchers = NULL, *gate = NULL;
    int status = -1;
    if (finish < 0) {
        goto out;
    }
    PyObject *lock = Py_NewRef(SLOT(result, cfg.r_lock));
    if (lock_acquire(lock) < 0) {
        Py_DECREF(lock);
        goto out;
    }
    slot_set(result, cfg.r_base_offset, base_offset);
    slot_set(result, cfg.r_log_append_time_ms, log_append_time_ms);
    slot_set(result, cfg.r_error, Py_None);
    slot_set(result, cfg.r_record_errors, Py_None);
    slot_set(result, cfg.r_done, Py_True);
    watchers = SLOT(result, cfg.r_watchers); /* the reference moves to us */
    SLOT(result, cfg.r_watchers) = Py_NewRef(Py_None);
    gate = Py_NewRef(SLOT(result, cfg.r_gate));
    if (finish) {
        slot_set(result, cfg.r_finished, Py_True);
    }
    int released = lock_release(lock);
    Py_DECREF(lock);
    if (released < 0) {
        goto out;
    }
    if (finish && gate != Py_None) {
        if (a->wakeups != Py_None) {
            if (PyList_CheckExact(a->wakeups) ? PyList_Append(a->wakeups, gate) < 0
                                               : done(call1(a->wakeups, s_append, gate)) < 0) {
                goto out;
            }
        }
        else if (lock_release(gate) < 0) {
            goto out;
        }
    }
    if (!finish && done(call2(batch, s_run_callbacks, thunks, a->wakeups)) < 0) {
        goto out;
    }
    if (watchers != Py_None) {
        PyObject *each = PySequence_Fast(watchers, "ProduceResult._watchers must be a list");
        if (each == NULL) {
            goto out;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(each); i++) {
            if (done(call0(PySequence_Fast_GET_ITEM(each, i), s_notify_watcher)) < 0) {
                Py_DECREF(each);
                goto out;
            }
        }
        Py_DECREF(each);
    }
    status = 0;
out:
    Py_XDECREF(watchers);
    Py_XDECREF(gate);
    Py_DECREF(thunks);
    Py_DECREF(result);
    return status;
}

/* With the lock held: the batch leaves the set. None, or NULL. */
static PyObject *
incomplete_remove_locked(PyObject *incomplete, PyObject *batch)
{
    PyObject *batches = typed_get(incomplete, cfg.incomplete, cfg.i_batches, s_batches);
    if (batches == NULL) {
        return NULL;
    }
    int status = PySet_CheckExact(batches) ? (PySet_Discard(batches, batch) < 0 ? -1 : 0)
                                           : done(PyObject_CallMethod(batches, "discard", "O", batch));
    Py_DECREF(batches);
    return status < 0 ? NULL : Py_NewRef(Py_None);
}

/* IncompleteBatches.remove(batch) */
static int
incomplete_remove(PyObject *incomplete, PyObject *batch)
{
    if (Py_TYPE(incomplete) != cfg.incomplete) {
        return done(call1(incomplete, s_remove, batch));
    }
    return done(under_lock(incomplete, batch, incomplete_remove_locked));
}

/* BufferPool.deallocate(size): returning more than was allocated goes to the Python method,
 * which raises. */
static int
pool_deallocate(PyObject *pool, PyObject *size)
{
    if (Py_TYPE(pool) != cfg.pool) {
        return done(call1(pool, s_deallocate, size));
    }
    PyObject *lock = typed_get(pool, cfg.pool, cfg.p_lock, s_lock);
    if (lock == NULL) {
        return -1;
    }
    if (lock_acquire(lock) < 0) {
        Py_DECREF(lock);
        return -1;
    }
    int status = -1, too_much = 0;
    PyObject *available = NULL, *total = NULL, *sum = NULL, *waiters = NULL;
    available = typed_get(pool, cfg.pool, cfg.p_available, s_available);
    total = available == NULL ? NULL : typed_get(pool, cfg.pool, cfg.p_total_bytes, s_total_bytes);
    sum = total == NULL ? NULL : PyNumber_Add(available, size);
    if (sum == NULL) {
        goto unlock;
    }
    too_much = PyObject_RichCompareBool(sum, total, Py_GT);
    if (too_much != 0) {
        status = too_much < 0 ? -1 : 0;
        goto unlock;
    }
    if (typed_set(pool, cfg.pool, cfg.p_available, s_available, sum) < 0) {
        goto unlock;
    }
    waiters = typed_get(pool, cfg.pool, cfg.p_waiters, s_waiters);
    int any = waiters == NULL ? -1 : PyObject_IsTrue(waiters);
    if (any < 0) {
        goto unlock;
    }
    if (any) {
        PyObject *first = PySequence_GetItem(waiters, 0);
        if (first == NULL || done(call0(first, s_notify)) < 0) {
            Py_XDECREF(first);
            goto unlock;
        }
        Py_DECREF(first);
    }
    status = 0;
unlock:
    Py_XDECREF(available);
    Py_XDECREF(total);
    Py_XDECREF(sum);
    Py_XDECREF(waiters);
    status = status < 0 ? lock_release_raising(lock) : lock_release(lock);
    Py_DECREF(lock);
    if (status == 0 && too_much > 0) {
        /* nothing changed: the Python method does it again and raises IllegalStateError */
        return done(call1(pool, s_deallocate, size));
    }
    return status;
}

/* RecordAccumulator.deallocate(batch) */
static int
deallocate(Answer *a, PyObject *batch)
{
    if (Py_TYPE(a->accumulator) != cfg.accumulator) {
        return done(call1(a->accumulator, s_deallocate, batch));
    }
    PyObject *incomplete = attr_get(a->accumulator, s_incomplete);
    if (incomplete == NULL) {
        return -1;
    }
    int status = incomplete_remove(incomplete, batch);
    Py_DECREF(incomplete);
    if (status < 0) {
        return -1;
    }
    PyObject *reserved = SLOT(batch, cfg.b_reserved_bytes);
    if (reserved == NULL) {
        PyErr_SetString(PyExc_AttributeError, "reserved_bytes");
        return -1;
    }
    int any = PyObject_IsTrue(reserved);
    if (any <= 0) {
        return any;
    }
    reserved = Py_NewRef(reserved);
    slot_set(batch, cfg.b_reserved_bytes, zero);
    PyObject *pool = attr_get(a->accumulator, s_pool);
    status = pool == NULL ? -1 : pool_deallocate(pool, reserved);
    Py_XDECREF(pool);
    Py_DECREF(reserved);
    return status;
}

int
kclient_complete_success(Answer *a, PyObject *batch, PyObject *base_offset,
                 PyObject *log_append_time_ms)
{
    if (remove_in_flight(a, batch) < 0) {
        return -1;
    }
    if (a->tm != Py_None && done(call1(a->tm, s_on_success, batch)) < 0) {
        return -1;
    }
    if (SLOT(batch, cfg.b_final_state) == Py_None) {
        PyObject *builder = SLOT(batch, cfg.b_builder);
        PyObject *count = builder == NULL ? NULL : PyObject_GetAttr(builder, s_record_count);
        if (count == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_AttributeError, "builder");
            }
            return -1;
        }
        int status = done(call2(a->metrics, s_record_sent, count, a->now_ms));
        Py_DECREF(count);
        if (status < 0 || complete_batch(a, batch, base_offset, log_append_time_ms) < 0) {
            return -1;
        }
    }
    return deallocate(a, batch);
}
