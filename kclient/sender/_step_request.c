/*
 * kclient.sender._step, the request half (see _step.c): the one-batch ProduceRequest of
 * Sender._send_produce_request (the reference, in sender.py) in C — the body, the
 * callback, the ClientRequest, the network client's send, then the metrics and the debug
 * line — and configure(), which hands it what it is made of.
 *
 * Threads: the Sender's (or the event loop's driving it), GIL held.
 */
#include "_step.h"

static PyObject *str_acks, *str_acks_key, *str_builder, *str_client, *str_debug,
    *str_handle_produce_response, *str_index, *str_metrics, *str_name,
    *str_partition_data, *str_prefix, *str_produce_max_version, *str_record_batch,
    *str_record_count, *str_record_request, *str_records, *str_request_timeout_ms, *str_send,
    *str_send_produce_request, *str_timeout_ms, *str_topic_data, *str_tp, *str_transactional_id,
    *str_transactional_id_key, *str_uncompressed_bytes, *str_txn;

/* configure(new_client_request, produce_api_key, produce_min_version, produce_max_version,
 * log, debug_level, Sender, RecordAccumulator, ProducerBatch): what send_one needs of
 * sender.py and its imports, and the types the step reads the fast way. */
static PyObject *new_request, *produce_key, *min_version, *max_version_plain, *logger,
    *debug_level;
static PyObject *one, *debug_format; /* 1, and _send_produce_request's debug line */
StepConfig kstep_cfg;

PyObject *
kstep_configure(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "configure(new_client_request, produce_api_key, "
                                         "produce_min_version, produce_max_version, log, "
                                         "debug_level, Sender, RecordAccumulator, "
                                         "ProducerBatch)");
        return NULL;
    }
    for (int i = 6; i < 9; i++) {
        if (!PyType_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "configure: argument %d must be a type", i);
            return NULL;
        }
    }
    kstep_cfg.ready = 0;
    PyTypeObject *batch = (PyTypeObject *)args[8];
    struct {
        Py_ssize_t *offset;
        const char *name;
    } slots[] = {
        {&kstep_cfg.b_tp, "tp"},
        {&kstep_cfg.b_created_ms, "created_ms"},
        {&kstep_cfg.b_records, "records"},
        {&kstep_cfg.b_builder, "builder"},
        {&kstep_cfg.b_uncompressed_bytes, "uncompressed_bytes"},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        *slots[i].offset = slot_offset(batch, slots[i].name);
        if (*slots[i].offset < 0) {
            return NULL;
        }
    }
    PyObject **objects[6] = {&new_request, &produce_key, &min_version, &max_version_plain,
                             &logger, &debug_level};
    for (int i = 0; i < 6; i++) {
        Py_XSETREF(*objects[i], Py_NewRef(args[i]));
    }
    PyTypeObject **types[3] = {&kstep_cfg.sender, &kstep_cfg.accumulator, &kstep_cfg.batch};
    for (int i = 0; i < 3; i++) {
        Py_XSETREF(*types[i], (PyTypeObject *)Py_NewRef(args[6 + i]));
    }
    kstep_cfg.ready = 1;
    Py_RETURN_NONE;
}

/* dict(key0=v0, ...) from n interned keys and values; NULL on error. */
static PyObject *
make_dict(PyObject **keys, PyObject **values, int n)
{
    PyObject *dict = PyDict_New();
    for (int i = 0; dict != NULL && i < n; i++) {
        if (values[i] == NULL || PyDict_SetItem(dict, keys[i], values[i]) < 0) {
            Py_CLEAR(dict);
        }
    }
    return dict;
}

/* [dict(...)]: a one-item list of make_dict's; NULL on error. */
static PyObject *
list_of_dict(PyObject **keys, PyObject **values, int n)
{
    PyObject *dict = make_dict(keys, values, n);
    if (dict == NULL) {
        return NULL;
    }
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(dict);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, dict);
    return list;
}

/* ---- the request's callback ---------------------------------------------------------------
 * AnswerCallback: functools.partial(sender._handle_produce_response, by_tp) without the
 * partial and the bound method: called with the response it calls the method the sender's
 * type has (the descriptor, with the sender first) or, when the sender's own attributes or an
 * unusual descriptor decide, the bound method getattr gives. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *method; /* a method descriptor or function: called with self first; or bound */
    PyObject *self;   /* the sender, or NULL when `method` is bound */
    PyObject *by_tp;
} AnswerCallback;

static PyObject *
callback_call(AnswerCallback *cb, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *small[6];
    PyObject **stack = nargs + nkw + 2 <= 6 ? small : PyMem_Malloc((nargs + nkw + 2) * sizeof(PyObject *));
    if (stack == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t n = 0;
    if (cb->self != NULL) {
        stack[n++] = cb->self;
    }
    stack[n++] = cb->by_tp;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        stack[n + i] = args[i];
    }
    PyObject *out = PyObject_Vectorcall(cb->method, stack, n + nargs, kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return out;
}

static int
callback_traverse(AnswerCallback *cb, visitproc visit, void *arg)
{
    Py_VISIT(cb->method);
    Py_VISIT(cb->self);
    Py_VISIT(cb->by_tp);
    return 0;
}

static int
callback_clear(AnswerCallback *cb)
{
    Py_CLEAR(cb->method);
    Py_CLEAR(cb->self);
    Py_CLEAR(cb->by_tp);
    return 0;
}

static void
callback_dealloc(AnswerCallback *cb)
{
    PyObject_GC_UnTrack(cb);
    callback_clear(cb);
    PyObject_GC_Del(cb);
}

static PyTypeObject AnswerCallbackType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._step.AnswerCallback",
    .tp_basicsize = sizeof(AnswerCallback),
    .tp_dealloc = (destructor)callback_dealloc,
    .tp_vectorcall_offset = offsetof(AnswerCallback, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "functools.partial(sender._handle_produce_response, by_tp), lighter.",
    .tp_traverse = (traverseproc)callback_traverse,
    .tp_clear = (inquiry)callback_clear,
};

/* The request's callback: sender._handle_produce_response bound to by_tp. The method found
 * on the sender's type is used unbound when it is a method descriptor (a function or
 * AnswerMethod: what getattr would bind to the sender) and the sender's __dict__ has no
 * such name; otherwise getattr's answer. A new reference, or NULL. */
static PyObject *
answer_callback(PyObject *sender, PyObject *by_tp)
{
    PyObject *method = _PyType_Lookup(Py_TYPE(sender), str_handle_produce_response);
    PyObject *self = sender;
    int own = 0;
    if (method != NULL && PyType_HasFeature(Py_TYPE(method), Py_TPFLAGS_METHOD_DESCRIPTOR) &&
        Py_TYPE(sender)->tp_dictoffset != 0) {
        PyObject *dict = PyObject_GenericGetDict(sender, NULL);
        if (dict == NULL) {
            return NULL;
        }
        own = PyDict_Contains(dict, str_handle_produce_response);
        Py_DECREF(dict);
        if (own < 0) {
            return NULL;
        }
    }
    if (method == NULL || !PyType_HasFeature(Py_TYPE(method), Py_TPFLAGS_METHOD_DESCRIPTOR) || own) {
        method = PyObject_GetAttr(sender, str_handle_produce_response);
        self = NULL;
        if (method == NULL) {
            return NULL;
        }
    }
    else {
        Py_INCREF(method);
    }
    AnswerCallback *cb = PyObject_GC_New(AnswerCallback, &AnswerCallbackType);
    if (cb == NULL) {
        Py_DECREF(method);
        return NULL;
    }
    cb->vectorcall = (vectorcallfunc)callback_call;
    cb->method = method;
    cb->self = Py_XNewRef(self);
    cb->by_tp = Py_NewRef(by_tp);
    PyObject_GC_Track(cb);
    return (PyObject *)cb;
}

/* After the request: metrics.record_batch(size, uncompressed, now) and
 * metrics.record_request(1, records, size, now), as _send_produce_request records them. */
static int
record_metrics(PyObject *sender, PyObject *batch, PyObject *records_count, PyObject *size,
               PyObject *now)
{
    PyObject *metrics = attr_get(sender, str_metrics);
    PyObject *uncompressed = metrics == NULL ? NULL
                                             : kstep_batch_attr(batch, kstep_cfg.b_uncompressed_bytes,
                                                                str_uncompressed_bytes);
    PyObject *done = NULL;
    if (uncompressed != NULL) {
        PyObject *args[4] = {metrics, size, uncompressed, now};
        done = PyObject_VectorcallMethod(str_record_batch, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (done != NULL) {
        Py_DECREF(done);
        PyObject *args[5] = {metrics, one, records_count, size, now};
        done = PyObject_VectorcallMethod(str_record_request, args, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    Py_XDECREF(done);
    Py_XDECREF(uncompressed);
    Py_XDECREF(metrics);
    return done == NULL ? -1 : 0;
}

/* _send_produce_request's debug line, when the logger is enabled for debug. */
static int
debug_line(PyObject *sender, PyObject *node_id, PyObject *size)
{
    int on = logger_enabled_for(logger, debug_level);
    if (on <= 0) {
        return on;
    }
    PyObject *prefix = attr_get(sender, str_prefix);
    if (prefix == NULL) {
        return -1;
    }
    PyObject *args[6] = {logger, debug_format, prefix, node_id, one, size};
    PyObject *done = PyObject_VectorcallMethod(str_debug, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(prefix);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* sender._send_produce_request(node_id, [batch], now_ms) for one built batch, as the Python
 * does it (its one-batch branch): the request on its way, then the metrics and the debug
 * line. A batch not built goes to the Python (which raises). */
static int
send_one(PyObject *sender, PyObject *client, PyObject *node_id, PyObject *node_batches,
         PyObject *now)
{
    PyObject *batch = PyList_GET_ITEM(node_batches, 0);
    PyObject *tp = kstep_batch_attr(batch, kstep_cfg.b_tp, str_tp);
    PyObject *data = tp == NULL ? NULL : kstep_batch_attr(batch, kstep_cfg.b_records, str_records);
    if (data == NULL) {
        Py_XDECREF(tp);
        return -1;
    }
    if (!PyBytes_Check(data) || !PyTuple_Check(tp) || PyTuple_GET_SIZE(tp) != 2) {
        Py_DECREF(data);
        Py_DECREF(tp);
        PyObject *args[4] = {sender, node_id, node_batches, now};
        PyObject *done = PyObject_VectorcallMethod(str_send_produce_request, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    int rc = -1;
    PyObject *topic_data = NULL, *body = NULL, *by_tp = NULL;
    PyObject *callback = NULL, *max_version = NULL, *request = NULL;
    PyObject *builder = NULL, *records_count = NULL, *size = NULL;
    PyObject *txn_id = attr_get(sender, str_transactional_id);
    PyObject *acks = txn_id == NULL ? NULL : attr_get(sender, str_acks);
    PyObject *timeout = acks == NULL ? NULL : attr_get(sender, str_request_timeout_ms);
    if (timeout == NULL) {
        goto done;
    }
    PyObject *part_keys[2] = {str_index, str_records};
    PyObject *part_values[2] = {PyTuple_GET_ITEM(tp, 1), data};
    PyObject *partition_data = list_of_dict(part_keys, part_values, 2);
    PyObject *topic_keys[2] = {str_name, str_partition_data};
    PyObject *topic_values[2] = {PyTuple_GET_ITEM(tp, 0), partition_data};
    topic_data = partition_data == NULL ? NULL : list_of_dict(topic_keys, topic_values, 2);
    Py_XDECREF(partition_data);
    PyObject *body_keys[4] = {str_transactional_id_key, str_acks_key, str_timeout_ms, str_topic_data};
    PyObject *body_values[4] = {txn_id, acks, timeout, topic_data};
    body = topic_data == NULL ? NULL : make_dict(body_keys, body_values, 4);
    by_tp = body == NULL ? NULL : PyDict_New();
    if (by_tp == NULL || PyDict_SetItem(by_tp, tp, batch) < 0) {
        goto done;
    }
    callback = answer_callback(sender, by_tp);
    /* sender._produce_max_version(): the plain maximum unless a transaction sender decides */
    PyObject *txn = callback == NULL ? NULL : attr_get(sender, str_txn);
    if (txn != NULL) {
        max_version = txn == Py_None ? Py_NewRef(max_version_plain)
                                     : PyObject_CallMethodNoArgs(sender, str_produce_max_version);
        Py_DECREF(txn);
    }
    builder = max_version == NULL ? NULL : kstep_batch_attr(batch, kstep_cfg.b_builder, str_builder);
    records_count = builder == NULL ? NULL : PyObject_GetAttr(builder, str_record_count);
    size = records_count == NULL ? NULL : PyLong_FromSsize_t(PyBytes_GET_SIZE(data));
    long acks_value = size == NULL ? -1 : PyLong_AsLong(acks);
    if (size == NULL || (acks_value == -1 && PyErr_Occurred())) {
        goto done;
    }
    int expect = acks_value != 0;
    PyObject *request_args[9] = {node_id,  produce_key, body,        now,        expect ? Py_True : Py_False,
                                 callback, timeout,     min_version, max_version};
    request = PyObject_Vectorcall(new_request, request_args, 9, NULL);
    if (request == NULL) {
        goto done;
    }
    PyObject *send_args[3] = {client, request, now};
    PyObject *sent = PyObject_VectorcallMethod(str_send, send_args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (sent == NULL) {
        goto done;
    }
    Py_DECREF(sent);
    rc = record_metrics(sender, batch, records_count, size, now);
    if (rc == 0) {
        rc = debug_line(sender, node_id, size);
    }
done:
    Py_XDECREF(size);
    Py_XDECREF(records_count);
    Py_XDECREF(builder);
    Py_XDECREF(request);
    Py_XDECREF(max_version);
    Py_XDECREF(callback);
    Py_XDECREF(by_tp);
    Py_XDECREF(body);
    Py_XDECREF(topic_data);
    Py_XDECREF(timeout);
    Py_XDECREF(acks);
    Py_XDECREF(txn_id);
    Py_DECREF(data);
    Py_DECREF(tp);
    return rc;
}

/* One request per node: sender._send_produce_request(node_id, batches, now_ms), in C for a
 * node with one batch once configure() was called. */
int
kstep_send_requests(PyObject *sender, PyObject *client, PyObject *batches, PyObject *now)
{
    Py_ssize_t pos = 0;
    PyObject *node_id, *node_batches;
    while (PyDict_Next(batches, &pos, &node_id, &node_batches)) {
        if (kstep_cfg.ready && PyList_Check(node_batches) && PyList_GET_SIZE(node_batches) == 1) {
            if (send_one(sender, client, node_id, node_batches, now) < 0) {
                return -1;
            }
            continue;
        }
        PyObject *args[4] = {sender, node_id, node_batches, now};
        PyObject *done = PyObject_VectorcallMethod(str_send_produce_request, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (done == NULL) {
            return -1;
        }
        Py_DECREF(done);
    }
    return 0;
}

int
kstep_request_init(void)
{
#define INTERN(var, text)                                                                      \
    if (var == NULL && (var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_acks, "_acks");
    INTERN(str_acks_key, "acks");
    INTERN(str_builder, "builder");
    INTERN(str_client, "_client");
    INTERN(str_debug, "debug");
    INTERN(str_handle_produce_response, "_handle_produce_response");
    INTERN(str_index, "index");
    INTERN(str_metrics, "metrics");
    INTERN(str_name, "name");
    INTERN(str_partition_data, "partition_data");
    INTERN(str_prefix, "_prefix");
    INTERN(str_produce_max_version, "_produce_max_version");
    INTERN(str_record_batch, "record_batch");
    INTERN(str_record_count, "record_count");
    INTERN(str_record_request, "record_request");
    INTERN(str_records, "records");
    INTERN(str_request_timeout_ms, "_request_timeout_ms");
    INTERN(str_send, "send");
    INTERN(str_send_produce_request, "_send_produce_request");
    INTERN(str_timeout_ms, "timeout_ms");
    INTERN(str_topic_data, "topic_data");
    INTERN(str_tp, "tp");
    INTERN(str_transactional_id, "_transactional_id");
    INTERN(str_transactional_id_key, "transactional_id");
    INTERN(str_uncompressed_bytes, "uncompressed_bytes");
    INTERN(str_txn, "_txn");
    INTERN(debug_format, "%sproduce request to node %d: %d batches, %d bytes");
#undef INTERN
    if (one == NULL && (one = PyLong_FromLong(1)) == NULL) {
        return -1;
    }
    if (PyType_Ready(&AnswerCallbackType) < 0) {
        return -1;
    }
    return 0;
}
