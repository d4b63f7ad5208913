/*
 * kclient.sender._complete: a Produce answer's common case in C — the Sender's
 * _handle_produce_response (kclient/sender/produce_responses.py) for an answer whose
 * partitions all succeeded, Java's Sender.handleProduceResponse + completeBatch.
 *
 * AnswerMethod(general) is a method descriptor (kclient/_fallback_method.h) that replaces
 * ProduceResponses._handle_produce_response. For a ClientResponse that carries a body (not
 * disconnected, no version mismatch, acks != 0) whose topics and partitions are plain
 * dicts and lists, it does what the Python does, in the same order: the request latency
 * metric, then per partition of the body the batch's removal from the answer's batches, and
 * for a ProducerBatch answered with error code 0 (or DUPLICATE_SEQUENCE_NUMBER with a
 * transaction manager) the success path — unmute (max.in.flight 1), the in-flight list
 * removal, tm.on_success, record_sent, the batch's completion (final state, the
 * ProduceResult's fields under its lock, the waiters' gate into the Sender's wakeups, the
 * send callbacks through ProducerBatch._run_callbacks, the watchers' _notify), then
 * IncompleteBatches.remove and BufferPool.deallocate under their locks (waking the first
 * waiter for memory). Any other partition goes to the Python _complete_batch, a partition
 * the request did not have to _not_in_request, the batches left unanswered to _not_answered;
 * any other response to `general`, the Python method. Objects of other types than the
 * configured ones (subclasses, test doubles) get their Python method called.
 *
 * Optional: produce_responses.py keeps the Python reference and runs it when this module is
 * not built or KCLIENT_PURE_PYTHON is set (tests/sender/test_complete_c.py compares both).
 *
 * Threads: the Sender thread, GIL held; a contended lock is waited for by its own acquire
 * (GIL released).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_fallback_method.h"
#include "../_slots.h"

/* ---- configuration --------------------------------------------------------------------- */

static struct {
    PyTypeObject *response, *batch, *result, *accumulator, *incomplete, *pool;
    PyObject *succeeded; /* FinalState.SUCCEEDED */
    long duplicate_sequence;
    /* ProducerBatch slots */
    Py_ssize_t b_tp, b_builder, b_result, b_thunks, b_final_state, b_reserved_bytes;
    /* ProduceResult slots */
    Py_ssize_t r_lock, r_done, r_base_offset, r_log_append_time_ms, r_error, r_record_errors,
        r_watchers, r_gate, r_finished;
    int ready;
} cfg;

static PyObject *s_accumulator, *s_tm, *s_guarantee_order, *s_in_flight_batches, *s_wakeups,
    *s_metrics, *s_version_mismatch, *s_disconnected, *s_body, *s_received_time_ms, *s_request,
    *s_created_time_ms, *s_responses, *s_name, *s_partition_responses, *s_index, *s_error_code,
    *s_base_offset, *s_log_append_time_ms, *s_record_latency, *s_record_sent, *s_record_count,
    *s_on_success, *s_unmute, *s_incomplete, *s_pool, *s_lock, *s_batches, *s_acquire,
    *s_release, *s_available, *s_total_bytes, *s_waiters, *s_notify, *s_notify_watcher,
    *s_complete_batch, *s_not_in_request, *s_not_answered, *s_remove_in_flight, *s_deallocate,
    *s_complete, *s_remove, *s_run_callbacks, *s_append, *minus_one, *zero;

/* One Produce answer's state: the Sender's attributes read once. */
typedef struct {
    PyObject *sender, *accumulator, *tm, *in_flight, *wakeups, *metrics, *now_ms;
    int guarantee_order;
} Answer;

static PyObject *
call0(PyObject *obj, PyObject *name)
{
    PyObject *args[1] = {obj};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *
call1(PyObject *obj, PyObject *name, PyObject *a)
{
    PyObject *args[2] = {obj, a};
    return PyObject_VectorcallMethod(name, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *
call2(PyObject *obj, PyObject *name, PyObject *a, PyObject *b)
{
    PyObject *args[3] = {obj, a, b};
    return PyObject_VectorcallMethod(name, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *
call3(PyObject *obj, PyObject *name, PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *args[4] = {obj, a, b, c};
    return PyObject_VectorcallMethod(name, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* A call whose result is dropped: 0, or -1 with its exception. */
static int
done(PyObject *result)
{
    if (result == NULL) {
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

/* Replace a slot's value (a new reference to `value` is taken). */
static void
slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    SLOT(obj, offset) = Py_NewRef(value);
    Py_XDECREF(old);
}

/* ---- the pieces of the success path ------------------------------------------------------ */

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

/* `with lock:` around nothing yet: acquire (0) or -1. */
static int
lock_acquire(PyObject *lock)
{
    return done(call0(lock, s_acquire));
}

static int
lock_release(PyObject *lock)
{
    return done(call0(lock, s_release));
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

/* IncompleteBatches.remove(batch) */
static int
incomplete_remove(PyObject *incomplete, PyObject *batch)
{
    if (Py_TYPE(incomplete) != cfg.incomplete) {
        return done(call1(incomplete, s_remove, batch));
    }
    PyObject *lock = PyObject_GetAttr(incomplete, s_lock);
    if (lock == NULL) {
        return -1;
    }
    if (lock_acquire(lock) < 0) {
        Py_DECREF(lock);
        return -1;
    }
    int status = 0;
    PyObject *batches = PyObject_GetAttr(incomplete, s_batches);
    if (batches == NULL) {
        status = -1;
    }
    else if (PySet_CheckExact(batches)) {
        status = PySet_Discard(batches, batch) < 0 ? -1 : 0;
    }
    else {
        status = done(PyObject_CallMethod(batches, "discard", "O", batch));
    }
    Py_XDECREF(batches);
    if (status < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (lock_release(lock) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
        else {
            PyErr_Restore(type, value, tb);
        }
    }
    else {
        status = lock_release(lock);
    }
    Py_DECREF(lock);
    return status;
}

/* BufferPool.deallocate(size): returning more than was allocated goes to the Python method,
 * which raises. */
static int
pool_deallocate(PyObject *pool, PyObject *size)
{
    if (Py_TYPE(pool) != cfg.pool) {
        return done(call1(pool, s_deallocate, size));
    }
    PyObject *lock = PyObject_GetAttr(pool, s_lock);
    if (lock == NULL) {
        return -1;
    }
    if (lock_acquire(lock) < 0) {
        Py_DECREF(lock);
        return -1;
    }
    int status = -1, too_much = 0;
    PyObject *available = NULL, *total = NULL, *sum = NULL, *waiters = NULL;
    available = PyObject_GetAttr(pool, s_available);
    total = available == NULL ? NULL : PyObject_GetAttr(pool, s_total_bytes);
    sum = total == NULL ? NULL : PyNumber_Add(available, size);
    if (sum == NULL) {
        goto unlock;
    }
    too_much = PyObject_RichCompareBool(sum, total, Py_GT);
    if (too_much != 0) {
        status = too_much < 0 ? -1 : 0;
        goto unlock;
    }
    if (PyObject_SetAttr(pool, s_available, sum) < 0) {
        goto unlock;
    }
    waiters = PyObject_GetAttr(pool, s_waiters);
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
    if (status < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (lock_release(lock) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
        else {
            PyErr_Restore(type, value, tb);
        }
    }
    else {
        status = lock_release(lock);
    }
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
    PyObject *incomplete = PyObject_GetAttr(a->accumulator, s_incomplete);
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
    PyObject *pool = PyObject_GetAttr(a->accumulator, s_pool);
    status = pool == NULL ? -1 : pool_deallocate(pool, reserved);
    Py_XDECREF(pool);
    Py_DECREF(reserved);
    return status;
}

/* ProduceResponses._complete_success, for a batch of exactly ProducerBatch. */
static int
complete_success(Answer *a, PyObject *batch, PyObject *base_offset,
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

/* One partition of the answer: the body of _handle_produce_response's inner loop. */
static int
answer_partition(Answer *a, PyObject *batches, PyObject *name, PyObject *part)
{
    PyObject *index = PyDict_GetItemWithError(part, s_index);
    if (index == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, s_index);
        }
        return -1;
    }
    Py_INCREF(index);
    PyObject *key = PyTuple_Pack(2, name, index);
    PyObject *found = NULL, *code = NULL;
    int status = -1;
    if (key == NULL) {
        goto out;
    }
    found = PyDict_GetItemWithError(batches, key);
    if (found == NULL) {
        if (!PyErr_Occurred()) {
            status = done(call2(a->sender, s_not_in_request, name, index));
        }
        goto out;
    }
    Py_INCREF(found);
    if (PyDict_DelItem(batches, key) < 0) {
        goto out;
    }
    code = PyDict_GetItemWithError(part, s_error_code);
    if (code == NULL && PyErr_Occurred()) {
        goto out;
    }
    code = Py_NewRef(code == NULL ? zero : code);
    int success = 0;
    if (Py_TYPE(found) == cfg.batch && PyLong_CheckExact(code)) {
        int overflow;
        long value = PyLong_AsLongAndOverflow(code, &overflow);
        success = !overflow &&
                  (value == 0 || (value == cfg.duplicate_sequence && a->tm != Py_None));
    }
    if (!success) {
        status = done(PyObject_CallMethodObjArgs(a->sender, s_complete_batch, found, code, part,
                                                 a->now_ms, NULL));
        goto out;
    }
    if (a->guarantee_order &&
        done(call1(a->accumulator, s_unmute, SLOT(found, cfg.b_tp))) < 0) {
        goto out;
    }
    PyObject *base_offset = PyDict_GetItemWithError(part, s_base_offset);
    if (base_offset == NULL && PyErr_Occurred()) {
        goto out;
    }
    base_offset = Py_NewRef(base_offset == NULL ? minus_one : base_offset);
    PyObject *append_ms = PyDict_GetItemWithError(part, s_log_append_time_ms);
    if (append_ms == NULL && PyErr_Occurred()) {
        Py_DECREF(base_offset);
        goto out;
    }
    append_ms = Py_NewRef(append_ms == NULL ? minus_one : append_ms);
    status = complete_success(a, found, base_offset, append_ms);
    Py_DECREF(base_offset);
    Py_DECREF(append_ms);
out:
    Py_XDECREF(code);
    Py_XDECREF(found);
    Py_XDECREF(key);
    Py_DECREF(index);
    return status;
}

/* `obj.get(name) or ()` of a dict as a list: a new reference to the list, Py_None for
 * nothing (None or empty), NULL without an exception when it is anything else. */
static PyObject *
list_or_nothing(PyObject *dict, PyObject *name)
{
    PyObject *value = PyDict_GetItemWithError(dict, name);
    if (value == NULL || value == Py_None) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    if (!PyList_CheckExact(value)) {
        return NULL;
    }
    return Py_NewRef(PyList_GET_SIZE(value) ? value : Py_None);
}

/* Whether every topic and partition of the body is a plain dict (partitions with an
 * "index") in plain lists: the shapes the C loop takes. -1 on error. */
static int
plain_body(PyObject *body)
{
    PyObject *topics = list_or_nothing(body, s_responses);
    if (topics == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int plain = 1;
    for (Py_ssize_t t = 0; plain && topics != Py_None && t < PyList_GET_SIZE(topics); t++) {
        PyObject *topic = PyList_GET_ITEM(topics, t);
        if (!PyDict_CheckExact(topic)) {
            plain = 0;
            break;
        }
        PyObject *parts = list_or_nothing(topic, s_partition_responses);
        if (parts == NULL) {
            plain = PyErr_Occurred() ? -1 : 0;
            break;
        }
        for (Py_ssize_t p = 0; parts != Py_None && p < PyList_GET_SIZE(parts); p++) {
            PyObject *part = PyList_GET_ITEM(parts, p);
            if (!PyDict_CheckExact(part) || PyDict_GetItemWithError(part, s_index) == NULL) {
                plain = PyErr_Occurred() ? -1 : 0;
                break;
            }
        }
        Py_DECREF(parts);
    }
    Py_DECREF(topics);
    return plain;
}

/* The body's partitions, in order (the outer loops of _handle_produce_response). */
static int
answer_body(Answer *a, PyObject *batches, PyObject *body)
{
    PyObject *topics = list_or_nothing(body, s_responses);
    if (topics == NULL) {
        goto changed;
    }
    for (Py_ssize_t t = 0; topics != Py_None && t < PyList_GET_SIZE(topics); t++) {
        PyObject *topic = Py_NewRef(PyList_GET_ITEM(topics, t));
        if (!PyDict_CheckExact(topic)) {
            Py_DECREF(topic);
            Py_DECREF(topics);
            goto changed;
        }
        PyObject *name = PyDict_GetItemWithError(topic, s_name);
        PyObject *parts = PyErr_Occurred() ? NULL : list_or_nothing(topic, s_partition_responses);
        if (parts == NULL) {
            Py_DECREF(topic);
            Py_DECREF(topics);
            goto changed;
        }
        name = Py_NewRef(name == NULL ? Py_None : name);
        int status = 0;
        for (Py_ssize_t p = 0; parts != Py_None && p < PyList_GET_SIZE(parts); p++) {
            PyObject *part = Py_NewRef(PyList_GET_ITEM(parts, p));
            if (!PyDict_CheckExact(part)) {
                PyErr_SetString(PyExc_RuntimeError, "a produce answer changed while handled");
                status = -1;
            }
            else {
                status = answer_partition(a, batches, name, part);
            }
            Py_DECREF(part);
            if (status < 0) {
                break;
            }
        }
        Py_DECREF(name);
        Py_DECREF(parts);
        Py_DECREF(topic);
        if (status < 0) {
            Py_DECREF(topics);
            return -1;
        }
    }
    Py_DECREF(topics);
    return 0;
changed:
    if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "a produce answer changed while handled");
    }
    return -1;
}

/* ---- AnswerMethod ---------------------------------------------------------------------- */

static PyObject *
answer_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!cfg.ready || PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    PyObject *sender = args[0], *batches = args[1], *response = args[2];
    if (Py_TYPE(response) != cfg.response || !PyDict_CheckExact(batches)) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    Answer a = {sender};
    PyObject *body = NULL, *request = NULL, *created = NULL, *latency = NULL;
    PyObject *result = NULL;
    int plain = 0;
    PyObject *mismatch = PyObject_GetAttr(response, s_version_mismatch);
    PyObject *disconnected = mismatch == NULL ? NULL : PyObject_GetAttr(response, s_disconnected);
    if (disconnected == NULL) {
        goto out;
    }
    if (mismatch == Py_None && disconnected == Py_False) {
        body = PyObject_GetAttr(response, s_body);
        if (body == NULL) {
            goto out;
        }
        if (PyDict_CheckExact(body)) {
            plain = plain_body(body);
            if (plain < 0) {
                goto out;
            }
        }
    }
    if (!plain) {
        result = fallback_general(self, args, nargsf, kwnames);
        goto out;
    }
    a.now_ms = PyObject_GetAttr(response, s_received_time_ms);
    request = a.now_ms == NULL ? NULL : PyObject_GetAttr(response, s_request);
    created = request == NULL ? NULL : PyObject_GetAttr(request, s_created_time_ms);
    latency = created == NULL ? NULL : PyNumber_Subtract(a.now_ms, created);
    a.metrics = latency == NULL ? NULL : PyObject_GetAttr(sender, s_metrics);
    if (a.metrics == NULL || done(call2(a.metrics, s_record_latency, latency, a.now_ms)) < 0) {
        goto out;
    }
    a.accumulator = PyObject_GetAttr(sender, s_accumulator);
    a.tm = a.accumulator == NULL ? NULL : PyObject_GetAttr(sender, s_tm);
    a.in_flight = a.tm == NULL ? NULL : PyObject_GetAttr(sender, s_in_flight_batches);
    a.wakeups = a.in_flight == NULL ? NULL : PyObject_GetAttr(sender, s_wakeups);
    PyObject *order = a.wakeups == NULL ? NULL : PyObject_GetAttr(sender, s_guarantee_order);
    if (order == NULL) {
        goto out;
    }
    a.guarantee_order = PyObject_IsTrue(order);
    Py_DECREF(order);
    if (a.guarantee_order < 0 || answer_body(&a, batches, body) < 0) {
        goto out;
    }
    if (PyDict_GET_SIZE(batches) && done(call3(sender, s_not_answered, batches, response,
                                               a.now_ms)) < 0) {
        goto out;
    }
    result = Py_NewRef(Py_None);
out:
    Py_XDECREF(mismatch);
    Py_XDECREF(disconnected);
    Py_XDECREF(body);
    Py_XDECREF(request);
    Py_XDECREF(created);
    Py_XDECREF(latency);
    Py_XDECREF(a.now_ms);
    Py_XDECREF(a.metrics);
    Py_XDECREF(a.accumulator);
    Py_XDECREF(a.tm);
    Py_XDECREF(a.in_flight);
    Py_XDECREF(a.wakeups);
    return result;
}

static PyObject *
answer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)answer_call, "O:AnswerMethod");
}

static PyGetSetDef answer_getset[] = {FALLBACK_GETSET};

static PyTypeObject AnswerMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._complete.AnswerMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = answer_getset,
    .tp_new = answer_new,
};

/* ---- configure ---------------------------------------------------------------------------- */

static int
take_type(PyObject *obj, PyTypeObject **out)
{
    if (!PyType_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "configure: a type expected");
        return -1;
    }
    Py_XSETREF(*out, (PyTypeObject *)Py_NewRef(obj));
    return 0;
}

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(ClientResponse, ProducerBatch, ProduceResult, "
                        "RecordAccumulator, IncompleteBatches, BufferPool, SUCCEEDED, "
                        "duplicate_sequence_code)");
        return NULL;
    }
    PyTypeObject **types[6] = {&cfg.response,    &cfg.batch,      &cfg.result,
                               &cfg.accumulator, &cfg.incomplete, &cfg.pool};
    cfg.ready = 0;
    for (int i = 0; i < 6; i++) {
        if (take_type(args[i], types[i]) < 0) {
            return NULL;
        }
    }
    Py_XSETREF(cfg.succeeded, Py_NewRef(args[6]));
    cfg.duplicate_sequence = PyLong_AsLong(args[7]);
    if (cfg.duplicate_sequence == -1 && PyErr_Occurred()) {
        return NULL;
    }
    struct {
        Py_ssize_t *offset;
        PyTypeObject *type;
        const char *name;
    } slots[] = {
        {&cfg.b_tp, cfg.batch, "tp"},
        {&cfg.b_builder, cfg.batch, "builder"},
        {&cfg.b_result, cfg.batch, "result"},
        {&cfg.b_thunks, cfg.batch, "thunks"},
        {&cfg.b_final_state, cfg.batch, "final_state"},
        {&cfg.b_reserved_bytes, cfg.batch, "reserved_bytes"},
        {&cfg.r_lock, cfg.result, "_lock"},
        {&cfg.r_done, cfg.result, "done"},
        {&cfg.r_base_offset, cfg.result, "base_offset"},
        {&cfg.r_log_append_time_ms, cfg.result, "log_append_time_ms"},
        {&cfg.r_error, cfg.result, "error"},
        {&cfg.r_record_errors, cfg.result, "record_errors"},
        {&cfg.r_watchers, cfg.result, "_watchers"},
        {&cfg.r_gate, cfg.result, "_gate"},
        {&cfg.r_finished, cfg.result, "_finished"},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        *slots[i].offset = slot_offset(slots[i].type, slots[i].name);
        if (*slots[i].offset < 0) {
            return NULL;
        }
    }
    cfg.ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(ClientResponse, ProducerBatch, ProduceResult, RecordAccumulator, "
     "IncompleteBatches, BufferPool, FinalState.SUCCEEDED, duplicate_sequence_code)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.sender._complete",
    .m_doc = "A Produce answer's common case (see produce_responses.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__complete(void)
{
    struct {
        PyObject **name;
        const char *text;
    } names[] = {
        {&s_accumulator, "_accumulator"},
        {&s_tm, "_tm"},
        {&s_guarantee_order, "_guarantee_order"},
        {&s_in_flight_batches, "_in_flight_batches"},
        {&s_wakeups, "_wakeups"},
        {&s_metrics, "metrics"},
        {&s_version_mismatch, "version_mismatch"},
        {&s_disconnected, "disconnected"},
        {&s_body, "body"},
        {&s_received_time_ms, "received_time_ms"},
        {&s_request, "request"},
        {&s_created_time_ms, "created_time_ms"},
        {&s_responses, "responses"},
        {&s_name, "name"},
        {&s_partition_responses, "partition_responses"},
        {&s_index, "index"},
        {&s_error_code, "error_code"},
        {&s_base_offset, "base_offset"},
        {&s_log_append_time_ms, "log_append_time_ms"},
        {&s_record_latency, "record_latency"},
        {&s_record_sent, "record_sent"},
        {&s_record_count, "record_count"},
        {&s_on_success, "on_success"},
        {&s_unmute, "unmute"},
        {&s_incomplete, "incomplete"},
        {&s_pool, "pool"},
        {&s_lock, "_lock"},
        {&s_batches, "_batches"},
        {&s_acquire, "acquire"},
        {&s_release, "release"},
        {&s_available, "_available"},
        {&s_total_bytes, "total_bytes"},
        {&s_waiters, "_waiters"},
        {&s_notify, "notify"},
        {&s_notify_watcher, "_notify"},
        {&s_complete_batch, "_complete_batch"},
        {&s_not_in_request, "_not_in_request"},
        {&s_not_answered, "_not_answered"},
        {&s_remove_in_flight, "_remove_in_flight"},
        {&s_deallocate, "deallocate"},
        {&s_complete, "complete"},
        {&s_remove, "remove"},
        {&s_run_callbacks, "_run_callbacks"},
        {&s_append, "append"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].name = PyUnicode_InternFromString(names[i].text);
        if (*names[i].name == NULL) {
            return NULL;
        }
    }
    minus_one = PyLong_FromLong(-1);
    zero = PyLong_FromLong(0);
    if (minus_one == NULL || zero == NULL || PyType_Ready(&AnswerMethodType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "AnswerMethod", (PyObject *)&AnswerMethodType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
