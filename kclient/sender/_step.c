/*
 * kclient.sender._step: the Sender's send half of a step (Sender._send_producer_data, the
 * reference, in kclient/sender/sender.py) without its Python frame, for the common case.
 *
 * send_data(sender, now_ms) -> the poll timeout (ms), as _send_producer_data returns it.
 * The common case: the cluster is the one the accumulator last saw, no topic refresh is
 * due and a batch is queued. Then, as the Python does: the accumulator's ready check (the
 * drainer's, with `all_ready` worked out as RecordAccumulator.ready does), unknown leaders
 * to sender._unknown_leaders, the ready nodes the network client accepts, the drain,
 * one sender._send_produce_request per node, the in-flight bookkeeping, the expiry, the
 * timeout. Anything else (the first step after a metadata change, the periodic topic
 * refresh, nothing queued) is sender._send_producer_data(now_ms) itself, before anything
 * was done.
 *
 * Threads: the Sender's (or the event loop's driving it), GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define TOPIC_REFRESH_INTERVAL_MS 1000 /* sender.py's */
#define NO_TIMEOUT_MS INT64_MAX

static PyObject *str_metadata, *str_fetch, *str_last_cluster, *str_last_refresh,
    *str_accumulator, *str_topics, *str_queued, *str_send_producer_data, *str_pool,
    *str_waiters, *str_flushes, *str_appender, *str_closed, *str_tm, *str_is_completing,
    *str_drainer, *str_ready, *str_drain, *str_linger_ms, *str_delivery_timeout_ms,
    *str_unknown_leaders, *str_client, *str_poll_delay_ms, *str_max_request_size,
    *str_send_produce_request, *str_in_flight_batches, *str_next_expiry,
    *str_guarantee_order, *str_mute, *str_expire_batches, *str_more_ready, *str_tp,
    *str_created_ms, *str_records, *str_transactional_id, *str_acks, *str_request_timeout_ms,
    *str_index, *str_name, *str_partition_data, *str_transactional_id_key, *str_acks_key,
    *str_timeout_ms, *str_topic_data, *str_handle_produce_response, *str_produce_max_version,
    *str_send, *str_metrics, *str_uncompressed_bytes, *str_record_batch, *str_record_request,
    *str_is_enabled_for, *str_prefix, *str_debug, *str_builder, *str_record_count;

/* getattr(obj, name) as a C long long; -1 with an exception on error (check PyErr_Occurred). */
static long long
attr_ll(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) {
        return -1;
    }
    long long out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return out;
}

/* Whether getattr(obj, name) is true: 1, 0, or -1 on error. */
static int
attr_true(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) {
        return -1;
    }
    int out = PyObject_IsTrue(value);
    Py_DECREF(value);
    return out;
}

/* RecordAccumulator.has_undrained: whether a topic has a batch queued. 1, 0, -1. */
static int
has_undrained(PyObject *topics)
{
    if (!PyDict_Check(topics)) {
        PyErr_SetString(PyExc_TypeError, "the accumulator's _topics must be a dict");
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *queues;
    while (PyDict_Next(topics, &pos, &key, &queues)) {
        int queued = attr_true(queues, str_queued);
        if (queued != 0) {
            return queued;
        }
    }
    return 0;
}

/* RecordAccumulator.ready's all_ready: memory short, a flush, closing, or a transaction
 * completing. 1, 0, -1. */
static int
all_ready(PyObject *accumulator)
{
    PyObject *pool = PyObject_GetAttr(accumulator, str_pool);
    if (pool == NULL) {
        return -1;
    }
    PyObject *waiters = PyObject_GetAttr(pool, str_waiters);
    Py_DECREF(pool);
    if (waiters == NULL) {
        return -1;
    }
    Py_ssize_t queued = PyObject_Length(waiters);
    Py_DECREF(waiters);
    if (queued != 0) {
        return queued < 0 ? -1 : 1;
    }
    long long flushes = attr_ll(accumulator, str_flushes);
    if (flushes != 0) {
        return flushes == -1 && PyErr_Occurred() ? -1 : flushes > 0;
    }
    PyObject *appender = PyObject_GetAttr(accumulator, str_appender);
    int closed = appender == NULL ? -1 : attr_true(appender, str_closed);
    Py_XDECREF(appender);
    if (closed != 0) {
        return closed;
    }
    PyObject *tm = PyObject_GetAttr(accumulator, str_tm);
    if (tm == NULL) {
        return -1;
    }
    int completing = tm == Py_None ? 0 : attr_true(tm, str_is_completing);
    Py_DECREF(tm);
    return completing;
}

/* The ready nodes the network client accepts (a new list); *not_ready_ms lowered to the
 * poll delay of those it refuses. */
static PyObject *
accepted_nodes(PyObject *client, PyObject *ready_nodes, PyObject *now, long long *not_ready_ms)
{
    PyObject *nodes = PyList_New(0);
    PyObject *it = nodes == NULL ? NULL : PyObject_GetIter(ready_nodes);
    if (it == NULL) {
        Py_XDECREF(nodes);
        return NULL;
    }
    PyObject *node;
    while ((node = PyIter_Next(it)) != NULL) {
        PyObject *args[3] = {client, node, now};
        PyObject *ok = PyObject_VectorcallMethod(str_ready, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        int is_ok = ok == NULL ? -1 : PyObject_IsTrue(ok);
        Py_XDECREF(ok);
        int rc = is_ok;
        if (is_ok == 1) {
            rc = PyList_Append(nodes, node);
        }
        else if (is_ok == 0) {
            PyObject *delay = PyObject_VectorcallMethod(str_poll_delay_ms, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            long long ms = delay == NULL ? -1 : PyLong_AsLongLong(delay);
            Py_XDECREF(delay);
            rc = ms == -1 && PyErr_Occurred() ? -1 : 0;
            if (rc == 0 && ms < *not_ready_ms) {
                *not_ready_ms = ms;
            }
        }
        Py_DECREF(node);
        if (rc < 0) {
            Py_DECREF(it);
            Py_DECREF(nodes);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        Py_DECREF(nodes);
        return NULL;
    }
    return nodes;
}

/* After the requests: each drained batch in sender._in_flight_batches[tp], the next expiry
 * check lowered to its delivery deadline, its partition muted when order is guaranteed. */
static int
track_in_flight(PyObject *sender, PyObject *accumulator, PyObject *batches)
{
    PyObject *in_flight = PyObject_GetAttr(sender, str_in_flight_batches);
    if (in_flight == NULL) {
        return -1;
    }
    long long expiry = attr_ll(sender, str_next_expiry);
    long long timeout_ms = expiry == -1 && PyErr_Occurred() ? -1 : attr_ll(accumulator, str_delivery_timeout_ms);
    int guarantee = PyErr_Occurred() ? -1 : attr_true(sender, str_guarantee_order);
    int rc = guarantee < 0 || !PyDict_Check(in_flight) ? -1 : 0;
    if (rc == 0 && !PyDict_Check(batches)) {
        PyErr_SetString(PyExc_TypeError, "drain() must return a dict");
        rc = -1;
    }
    Py_ssize_t pos = 0;
    PyObject *node_id, *node_batches;
    while (rc == 0 && PyDict_Next(batches, &pos, &node_id, &node_batches)) {
        if (!PyList_Check(node_batches)) {
            PyErr_SetString(PyExc_TypeError, "drain() must map node ids to lists");
            rc = -1;
            break;
        }
        for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(node_batches); i++) {
            PyObject *batch = PyList_GET_ITEM(node_batches, i);
            PyObject *tp = PyObject_GetAttr(batch, str_tp);
            if (tp == NULL) {
                rc = -1;
                break;
            }
            PyObject *tp_batches = PyDict_GetItemWithError(in_flight, tp);
            if (tp_batches != NULL) {
                rc = PyList_Check(tp_batches) ? PyList_Append(tp_batches, batch) : -1;
            }
            else if (PyErr_Occurred()) {
                rc = -1;
            }
            else {
                PyObject *one = PyList_New(1);
                if (one == NULL) {
                    rc = -1;
                }
                else {
                    PyList_SET_ITEM(one, 0, Py_NewRef(batch));
                    rc = PyDict_SetItem(in_flight, tp, one);
                    Py_DECREF(one);
                }
            }
            long long created = rc < 0 ? -1 : attr_ll(batch, str_created_ms);
            if (rc == 0 && created == -1 && PyErr_Occurred()) {
                rc = -1;
            }
            if (rc == 0 && created + timeout_ms < expiry) {
                expiry = created + timeout_ms;
            }
            if (rc == 0 && guarantee) {
                PyObject *done = PyObject_CallMethodOneArg(accumulator, str_mute, tp);
                rc = done == NULL ? -1 : 0;
                Py_XDECREF(done);
            }
            Py_DECREF(tp);
            if (rc < 0 && !PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "_in_flight_batches must hold lists");
            }
        }
    }
    Py_DECREF(in_flight);
    if (rc == 0) {
        PyObject *value = PyLong_FromLongLong(expiry);
        rc = value == NULL ? -1 : PyObject_SetAttr(sender, str_next_expiry, value);
        Py_XDECREF(value);
    }
    return rc;
}

/* configure(new_client_request, produce_api_key, produce_min_version, partial, log,
 * debug_level): what send_one needs of sender.py and its imports. */
static PyObject *new_request, *produce_key, *min_version, *partial_type, *logger, *debug_level;
static PyObject *one, *debug_format; /* 1, and _send_produce_request's debug line */

static PyObject *
step_configure(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "configure(new_client_request, produce_api_key, "
                                         "produce_min_version, partial, log, debug_level)");
        return NULL;
    }
    PyObject **slots[6] = {&new_request, &produce_key, &min_version, &partial_type, &logger,
                           &debug_level};
    for (int i = 0; i < 6; i++) {
        Py_XSETREF(*slots[i], Py_NewRef(args[i]));
    }
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

/* After the request: metrics.record_batch(size, uncompressed, now) and
 * metrics.record_request(1, records, size, now), as _send_produce_request records them. */
static int
record_metrics(PyObject *sender, PyObject *batch, PyObject *records_count, PyObject *size,
               PyObject *now)
{
    PyObject *metrics = PyObject_GetAttr(sender, str_metrics);
    PyObject *uncompressed = metrics == NULL ? NULL : PyObject_GetAttr(batch, str_uncompressed_bytes);
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
    PyObject *enabled = PyObject_CallMethodOneArg(logger, str_is_enabled_for, debug_level);
    int on = enabled == NULL ? -1 : PyObject_IsTrue(enabled);
    Py_XDECREF(enabled);
    if (on <= 0) {
        return on;
    }
    PyObject *prefix = PyObject_GetAttr(sender, str_prefix);
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
send_one(PyObject *sender, PyObject *node_id, PyObject *node_batches, PyObject *now)
{
    PyObject *batch = PyList_GET_ITEM(node_batches, 0);
    PyObject *tp = PyObject_GetAttr(batch, str_tp);
    PyObject *data = tp == NULL ? NULL : PyObject_GetAttr(batch, str_records);
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
    PyObject *topic_data = NULL, *body = NULL, *by_tp = NULL, *handler = NULL;
    PyObject *callback = NULL, *max_version = NULL, *request = NULL, *client = NULL;
    PyObject *builder = NULL, *records_count = NULL, *size = NULL;
    PyObject *txn_id = PyObject_GetAttr(sender, str_transactional_id);
    PyObject *acks = txn_id == NULL ? NULL : PyObject_GetAttr(sender, str_acks);
    PyObject *timeout = acks == NULL ? NULL : PyObject_GetAttr(sender, str_request_timeout_ms);
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
    handler = PyObject_GetAttr(sender, str_handle_produce_response);
    PyObject *partial_args[2] = {handler, by_tp};
    callback = handler == NULL ? NULL : PyObject_Vectorcall(partial_type, partial_args, 2, NULL);
    max_version = callback == NULL ? NULL : PyObject_CallMethodNoArgs(sender, str_produce_max_version);
    builder = max_version == NULL ? NULL : PyObject_GetAttr(batch, str_builder);
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
    client = request == NULL ? NULL : PyObject_GetAttr(sender, str_client);
    if (client == NULL) {
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
    Py_XDECREF(client);
    Py_XDECREF(request);
    Py_XDECREF(max_version);
    Py_XDECREF(callback);
    Py_XDECREF(handler);
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
static int
send_requests(PyObject *sender, PyObject *batches, PyObject *now)
{
    Py_ssize_t pos = 0;
    PyObject *node_id, *node_batches;
    while (PyDict_Next(batches, &pos, &node_id, &node_batches)) {
        if (new_request != NULL && PyList_Check(node_batches) && PyList_GET_SIZE(node_batches) == 1) {
            if (send_one(sender, node_id, node_batches, now) < 0) {
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

/* The common case, from the ready check on; the return value of send_data. */
static PyObject *
send_ready(PyObject *sender, PyObject *accumulator, PyObject *topics, PyObject *cluster,
           PyObject *now, long long now_ms)
{
    int all = all_ready(accumulator);
    PyObject *drainer = all < 0 ? NULL : PyObject_GetAttr(accumulator, str_drainer);
    if (drainer == NULL) {
        return NULL;
    }
    PyObject *result = NULL, *client = NULL, *nodes = NULL, *batches = NULL, *out = NULL;
    PyObject *linger = PyObject_GetAttr(accumulator, str_linger_ms);
    PyObject *timeout = PyObject_GetAttr(accumulator, str_delivery_timeout_ms);
    if (linger != NULL && timeout != NULL) {
        PyObject *args[7] = {drainer, topics, cluster, now, linger, timeout, all ? Py_True : Py_False};
        result = PyObject_VectorcallMethod(str_ready, args, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    Py_XDECREF(linger);
    Py_XDECREF(timeout);
    if (result == NULL) {
        goto done;
    }
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 3) {
        PyErr_SetString(PyExc_TypeError, "ready() must return a ReadyCheckResult");
        goto done;
    }
    PyObject *ready_nodes = PyTuple_GET_ITEM(result, 0);
    long long next_check_ms = PyLong_AsLongLong(PyTuple_GET_ITEM(result, 1));
    PyObject *unknown = PyTuple_GET_ITEM(result, 2);
    if (next_check_ms == -1 && PyErr_Occurred()) {
        goto done;
    }
    int some_unknown = PyObject_IsTrue(unknown);
    if (some_unknown < 0) {
        goto done;
    }
    if (some_unknown) {
        PyObject *args[3] = {sender, unknown, now};
        PyObject *asked = PyObject_VectorcallMethod(str_unknown_leaders, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (asked == NULL) {
            goto done;
        }
        Py_DECREF(asked);
    }
    long long not_ready_ms = NO_TIMEOUT_MS;
    client = PyObject_GetAttr(sender, str_client);
    nodes = client == NULL ? NULL : accepted_nodes(client, ready_nodes, now, &not_ready_ms);
    if (nodes == NULL) {
        goto done;
    }
    if (PyList_GET_SIZE(nodes)) {
        PyObject *max_size = PyObject_GetAttr(sender, str_max_request_size);
        if (max_size == NULL) {
            goto done;
        }
        PyObject *args[6] = {drainer, topics, cluster, nodes, max_size, now};
        batches = PyObject_VectorcallMethod(str_drain, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(max_size);
        if (batches == NULL || !PyDict_Check(batches)) {
            if (batches != NULL) {
                PyErr_SetString(PyExc_TypeError, "drain() must return a dict");
            }
            goto done;
        }
        /* requests first (on the wire at once), then the bookkeeping: as the Python */
        if (send_requests(sender, batches, now) < 0 ||
            track_in_flight(sender, accumulator, batches) < 0) {
            goto done;
        }
    }
    PyObject *expired = PyObject_CallMethodOneArg(sender, str_expire_batches, now);
    if (expired == NULL) {
        goto done;
    }
    Py_DECREF(expired);
    long long expiry = attr_ll(sender, str_next_expiry);
    if (expiry == -1 && PyErr_Occurred()) {
        goto done;
    }
    long long poll_ms = next_check_ms < not_ready_ms ? next_check_ms : not_ready_ms;
    if (expiry - now_ms < poll_ms) {
        poll_ms = expiry - now_ms;
    }
    if (batches != NULL && PyDict_GET_SIZE(batches)) {
        int more = attr_true(drainer, str_more_ready);
        if (more < 0) {
            goto done;
        }
        if (more) {
            poll_ms = 0; /* more to drain once these are written */
        }
    }
    out = PyLong_FromLongLong(poll_ms > 0 ? poll_ms : 0);
done:
    Py_XDECREF(batches);
    Py_XDECREF(nodes);
    Py_XDECREF(client);
    Py_XDECREF(result);
    Py_DECREF(drainer);
    return out;
}

static PyObject *
step_send_data(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send_data(sender, now_ms)");
        return NULL;
    }
    PyObject *sender = args[0], *now = args[1];
    long long now_ms = PyLong_AsLongLong(now);
    if (now_ms == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *metadata = PyObject_GetAttr(sender, str_metadata);
    PyObject *cluster = metadata == NULL ? NULL : PyObject_CallMethodNoArgs(metadata, str_fetch);
    Py_XDECREF(metadata);
    if (cluster == NULL) {
        return NULL;
    }
    PyObject *last = PyObject_GetAttr(sender, str_last_cluster);
    long long refreshed = last == NULL ? -1 : attr_ll(sender, str_last_refresh);
    Py_XDECREF(last);
    if (PyErr_Occurred()) {
        Py_DECREF(cluster);
        return NULL;
    }
    int usual = last == cluster && now_ms - refreshed < TOPIC_REFRESH_INTERVAL_MS;
    PyObject *accumulator = NULL, *topics = NULL;
    if (usual) {
        accumulator = PyObject_GetAttr(sender, str_accumulator);
        topics = accumulator == NULL ? NULL : PyObject_GetAttr(accumulator, str_topics);
        int queued = topics == NULL ? -1 : has_undrained(topics);
        if (queued < 0) {
            Py_XDECREF(topics);
            Py_XDECREF(accumulator);
            Py_DECREF(cluster);
            return NULL;
        }
        usual = queued;
    }
    PyObject *out;
    if (usual) {
        out = send_ready(sender, accumulator, topics, cluster, now, now_ms);
    }
    else {
        out = PyObject_CallMethodOneArg(sender, str_send_producer_data, now);
    }
    Py_XDECREF(topics);
    Py_XDECREF(accumulator);
    Py_DECREF(cluster);
    return out;
}

static PyMethodDef step_methods[] = {
    {"send_data", (PyCFunction)(void (*)(void))step_send_data, METH_FASTCALL,
     "send_data(sender, now_ms) -> poll timeout ms: Sender._send_producer_data in C."},
    {"configure", (PyCFunction)(void (*)(void))step_configure, METH_FASTCALL,
     "configure(new_client_request, produce_api_key, produce_min_version, partial, log, "
     "debug_level): what the one-batch request needs (sender.py calls it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef step_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.sender._step",
    .m_doc = "The Sender's send half of a step in C (see sender.py).",
    .m_size = -1,
    .m_methods = step_methods,
};

PyMODINIT_FUNC
PyInit__step(void)
{
#define INTERN(var, text)                                                                      \
    if (var == NULL && (var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(str_metadata, "_metadata");
    INTERN(str_fetch, "fetch");
    INTERN(str_last_cluster, "_last_cluster");
    INTERN(str_last_refresh, "_last_topic_refresh_ms");
    INTERN(str_accumulator, "_accumulator");
    INTERN(str_topics, "_topics");
    INTERN(str_queued, "queued");
    INTERN(str_send_producer_data, "_send_producer_data");
    INTERN(str_pool, "pool");
    INTERN(str_waiters, "_waiters");
    INTERN(str_flushes, "_flushes_in_progress");
    INTERN(str_appender, "appender");
    INTERN(str_closed, "closed");
    INTERN(str_tm, "_tm");
    INTERN(str_is_completing, "is_completing");
    INTERN(str_drainer, "_drainer");
    INTERN(str_ready, "ready");
    INTERN(str_drain, "drain");
    INTERN(str_linger_ms, "linger_ms");
    INTERN(str_delivery_timeout_ms, "delivery_timeout_ms");
    INTERN(str_unknown_leaders, "_unknown_leaders");
    INTERN(str_client, "_client");
    INTERN(str_poll_delay_ms, "poll_delay_ms");
    INTERN(str_max_request_size, "_max_request_size");
    INTERN(str_send_produce_request, "_send_produce_request");
    INTERN(str_in_flight_batches, "_in_flight_batches");
    INTERN(str_next_expiry, "_next_expiry_check_ms");
    INTERN(str_guarantee_order, "_guarantee_order");
    INTERN(str_mute, "mute");
    INTERN(str_expire_batches, "_expire_batches");
    INTERN(str_more_ready, "more_ready");
    INTERN(str_tp, "tp");
    INTERN(str_created_ms, "created_ms");
    INTERN(str_records, "records");
    INTERN(str_transactional_id, "_transactional_id");
    INTERN(str_acks, "_acks");
    INTERN(str_request_timeout_ms, "_request_timeout_ms");
    INTERN(str_index, "index");
    INTERN(str_name, "name");
    INTERN(str_partition_data, "partition_data");
    INTERN(str_transactional_id_key, "transactional_id");
    INTERN(str_acks_key, "acks");
    INTERN(str_timeout_ms, "timeout_ms");
    INTERN(str_topic_data, "topic_data");
    INTERN(str_handle_produce_response, "_handle_produce_response");
    INTERN(str_produce_max_version, "_produce_max_version");
    INTERN(str_send, "send");
    INTERN(str_metrics, "metrics");
    INTERN(str_uncompressed_bytes, "uncompressed_bytes");
    INTERN(str_record_batch, "record_batch");
    INTERN(str_record_request, "record_request");
    INTERN(str_is_enabled_for, "isEnabledFor");
    INTERN(str_prefix, "_prefix");
    INTERN(str_debug, "debug");
    INTERN(str_builder, "builder");
    INTERN(str_record_count, "record_count");
    INTERN(debug_format, "%sproduce request to node %d: %d batches, %d bytes");
#undef INTERN
    if (one == NULL && (one = PyLong_FromLong(1)) == NULL) {
        return NULL;
    }
    return PyModule_Create(&step_module);
}
