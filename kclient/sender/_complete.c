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
 * This file: the answer's loops, AnswerMethod, configure() and the module; one batch's
 * success path is in _complete_batch.c, the shared declarations in _complete.h, and
 * BufferPool.try_allocate, IncompleteBatches.add and ProduceResult.watch (the send side's
 * small locked methods) in _complete_locked.c.
 *
 * Threads: the Sender thread, GIL held; a contended lock is waited for by its own acquire
 * (GIL released).
 */
#include "_complete.h"
#include "../_fallback_method.h"

CompleteConfig kclient_complete_cfg;
PyTypeObject *thread_lock_type;
PyObject *thread_lock_acquire, *thread_lock_release;
PyTypeObject *kclient_lock_type;
PyObject *s_accumulator, *s_tm, *s_guarantee_order, *s_in_flight_batches, *s_wakeups,
    *s_metrics, *s_version_mismatch, *s_disconnected, *s_body, *s_received_time_ms, *s_request,
    *s_created_time_ms, *s_responses, *s_name, *s_partition_responses, *s_index, *s_error_code,
    *s_base_offset, *s_log_append_time_ms, *s_record_latency, *s_record_sent, *s_record_count,
    *s_on_success, *s_unmute, *s_incomplete, *s_pool, *s_lock, *s_batches, *s_acquire,
    *s_release, *s_available, *s_total_bytes, *s_waiters, *s_notify, *s_notify_watcher,
    *s_complete_batch, *s_not_in_request, *s_not_answered, *s_remove_in_flight, *s_deallocate,
    *s_complete, *s_remove, *s_run_callbacks, *s_append, *s_add, *minus_one, *zero;

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
    status = kclient_complete_success(a, found, base_offset, append_ms);
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
    PyObject *mismatch = slot_get(response, cfg.c_version_mismatch, s_version_mismatch);
    PyObject *disconnected = mismatch == NULL ? NULL : slot_get(response, cfg.c_disconnected, s_disconnected);
    if (disconnected == NULL) {
        goto out;
    }
    if (mismatch == Py_None && disconnected == Py_False) {
        body = slot_get(response, cfg.c_body, s_body);
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
    a.now_ms = slot_get(response, cfg.c_received_time_ms, s_received_time_ms);
    request = a.now_ms == NULL ? NULL : slot_get(response, cfg.c_request, s_request);
    created = request == NULL ? NULL : PyObject_GetAttr(request, s_created_time_ms);
    latency = created == NULL ? NULL : PyNumber_Subtract(a.now_ms, created);
    a.metrics = latency == NULL ? NULL : attr_get(sender, s_metrics);
    if (a.metrics == NULL || done(call2(a.metrics, s_record_latency, latency, a.now_ms)) < 0) {
        goto out;
    }
    a.accumulator = attr_get(sender, s_accumulator);
    a.tm = a.accumulator == NULL ? NULL : attr_get(sender, s_tm);
    a.in_flight = a.tm == NULL ? NULL : attr_get(sender, s_in_flight_batches);
    a.wakeups = a.in_flight == NULL ? NULL : attr_get(sender, s_wakeups);
    PyObject *order = a.wakeups == NULL ? NULL : attr_get(sender, s_guarantee_order);
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

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))kclient_complete_configure, METH_FASTCALL,
     "configure(ClientResponse, ProducerBatch, ProduceResult, RecordAccumulator, "
     "IncompleteBatches, BufferPool, FinalState.SUCCEEDED, duplicate_sequence_code, Lock)"},
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
        {&s_add, "add"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].name = PyUnicode_InternFromString(names[i].text);
        if (*names[i].name == NULL) {
            return NULL;
        }
    }
    PyObject *thread = PyImport_ImportModule("_thread");
    PyObject *sample = thread == NULL ? NULL : PyObject_CallMethod(thread, "allocate_lock", NULL);
    Py_XDECREF(thread);
    if (sample == NULL) {
        return NULL;
    }
    thread_lock_type = (PyTypeObject *)Py_NewRef(Py_TYPE(sample));
    Py_DECREF(sample);
    thread_lock_acquire = PyObject_GetAttr((PyObject *)thread_lock_type, s_acquire);
    thread_lock_release = thread_lock_acquire == NULL ? NULL : PyObject_GetAttr((PyObject *)thread_lock_type, s_release);
    if (thread_lock_release == NULL) {
        return NULL;
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
    if (PyModule_AddObjectRef(module, "AnswerMethod", (PyObject *)&AnswerMethodType) < 0 ||
        kclient_complete_locked_init(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

