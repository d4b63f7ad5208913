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
 * was done. The requests are _step_request.c's.
 *
 * Threads: the Sender's (or the event loop's driving it), GIL held.
 */
#include "_step.h"

#define TOPIC_REFRESH_INTERVAL_MS 1000 /* sender.py's */
#define NO_TIMEOUT_MS INT64_MAX

static PyObject *str_metadata, *str_fetch, *str_last_cluster, *str_last_refresh,
    *str_accumulator, *str_topics, *str_queued, *str_send_producer_data, *str_pool,
    *str_waiters, *str_flushes, *str_appender, *str_closed, *str_tm, *str_is_completing,
    *str_drainer, *str_ready, *str_drain, *str_linger_ms, *str_delivery_timeout_ms,
    *str_unknown_leaders, *str_client, *str_poll_delay_ms, *str_max_request_size,
    *str_in_flight_batches, *str_next_expiry,
    *str_guarantee_order, *str_mute, *str_expire_batches, *str_more_ready, *str_tp,
    *str_created_ms, *str_next_expiry_ms;

/* getattr(obj, name) as a C long long (attr_get's read); -1 with an exception on error (check PyErr_Occurred). */
static long long
attr_ll(PyObject *obj, PyObject *name)
{
    PyObject *value = attr_get(obj, name);
    if (value == NULL) {
        return -1;
    }
    long long out = PyLong_AsLongLong(value);
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
        int queued = attr_truth(queues, str_queued);
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
    PyObject *pool = attr_get(accumulator, str_pool);
    if (pool == NULL) {
        return -1;
    }
    PyObject *waiters = attr_get(pool, str_waiters);
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
    PyObject *appender = attr_get(accumulator, str_appender);
    int closed = appender == NULL ? -1 : attr_truth(appender, str_closed);
    Py_XDECREF(appender);
    if (closed != 0) {
        return closed;
    }
    PyObject *tm = attr_get(accumulator, str_tm);
    if (tm == NULL) {
        return -1;
    }
    int completing = tm == Py_None ? 0 : attr_truth(tm, str_is_completing);
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
 * check (*expiry, sender._next_expiry_check_ms on entry) lowered to its delivery deadline
 * and stored when lower, its partition muted when order is guaranteed. */
static int
track_in_flight(PyObject *sender, PyObject *accumulator, PyObject *batches, long long timeout_ms,
                long long *expiry)
{
    PyObject *in_flight = attr_get(sender, str_in_flight_batches);
    if (in_flight == NULL) {
        return -1;
    }
    long long was = *expiry;
    int guarantee = attr_truth(sender, str_guarantee_order);
    int rc = guarantee < 0 || !PyDict_Check(in_flight) ? -1 : 0;
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
            PyObject *tp = kstep_batch_attr(batch, kstep_cfg.b_tp, str_tp);
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
            PyObject *created_obj = rc < 0 ? NULL : kstep_batch_attr(batch, kstep_cfg.b_created_ms, str_created_ms);
            long long created = created_obj == NULL ? -1 : PyLong_AsLongLong(created_obj);
            Py_XDECREF(created_obj);
            if (rc == 0 && created == -1 && PyErr_Occurred()) {
                rc = -1;
            }
            if (rc == 0 && created + timeout_ms < *expiry) {
                *expiry = created + timeout_ms;
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
    if (rc == 0 && *expiry != was) { /* unchanged (the usual case): nothing to store */
        PyObject *value = PyLong_FromLongLong(*expiry);
        rc = value == NULL ? -1 : PyObject_SetAttr(sender, str_next_expiry, value);
        Py_XDECREF(value);
    }
    return rc;
}

/* Sender._expire_batches(now_ms), unless it can find nothing: for exactly a Sender and a
 * RecordAccumulator, nothing in flight is due before sender._next_expiry_check_ms (`expiry`)
 * and nothing queued before the drainer's next_expiry_ms (which its ready() just set), so
 * before both the call fails no batch and changes nothing. *expiry is the
 * _next_expiry_check_ms after it. 0, or -1 with the exception. */
static int
expire_when_due(PyObject *sender, PyObject *accumulator, PyObject *drainer, PyObject *now,
                long long now_ms, long long *expiry)
{
    if (kstep_cfg.ready && now_ms < *expiry && Py_TYPE(sender) == kstep_cfg.sender &&
        Py_TYPE(accumulator) == kstep_cfg.accumulator) {
        PyObject *queued = PyObject_GetAttr(drainer, str_next_expiry_ms);
        long long queued_ms = queued == NULL ? -1 : PyLong_AsLongLong(queued);
        Py_XDECREF(queued);
        if (queued_ms == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (now_ms < queued_ms) {
            return 0;
        }
    }
    PyObject *expired = PyObject_CallMethodOneArg(sender, str_expire_batches, now);
    if (expired == NULL) {
        return -1;
    }
    Py_DECREF(expired);
    *expiry = attr_ll(sender, str_next_expiry);
    return *expiry == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The common case, from the ready check on; the return value of send_data. */
static PyObject *
send_ready(PyObject *sender, PyObject *accumulator, PyObject *topics, PyObject *cluster,
           PyObject *now, long long now_ms)
{
    int all = all_ready(accumulator);
    PyObject *drainer = all < 0 ? NULL : attr_get(accumulator, str_drainer);
    if (drainer == NULL) {
        return NULL;
    }
    PyObject *result = NULL, *client = NULL, *nodes = NULL, *batches = NULL, *out = NULL;
    PyObject *linger = attr_get(accumulator, str_linger_ms);
    PyObject *timeout = linger == NULL ? NULL : attr_get(accumulator, str_delivery_timeout_ms);
    long long timeout_ms = timeout == NULL ? -1 : PyLong_AsLongLong(timeout);
    if (timeout_ms != -1 || !PyErr_Occurred()) {
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
    client = attr_get(sender, str_client);
    nodes = client == NULL ? NULL : accepted_nodes(client, ready_nodes, now, &not_ready_ms);
    if (nodes == NULL) {
        goto done;
    }
    long long expiry = -1;
    if (PyList_GET_SIZE(nodes)) {
        PyObject *max_size = attr_get(sender, str_max_request_size);
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
        if (kstep_send_requests(sender, client, batches, now) < 0) {
            goto done;
        }
        expiry = attr_ll(sender, str_next_expiry);
        if ((expiry == -1 && PyErr_Occurred()) ||
            track_in_flight(sender, accumulator, batches, timeout_ms, &expiry) < 0) {
            goto done;
        }
    }
    else {
        expiry = attr_ll(sender, str_next_expiry);
        if (expiry == -1 && PyErr_Occurred()) {
            goto done;
        }
    }
    if (expire_when_due(sender, accumulator, drainer, now, now_ms, &expiry) < 0) {
        goto done;
    }
    long long poll_ms = next_check_ms < not_ready_ms ? next_check_ms : not_ready_ms;
    if (expiry - now_ms < poll_ms) {
        poll_ms = expiry - now_ms;
    }
    if (batches != NULL && PyDict_GET_SIZE(batches)) {
        int more = attr_truth(drainer, str_more_ready);
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
    PyObject *metadata = attr_get(sender, str_metadata);
    PyObject *cluster = metadata == NULL ? NULL : PyObject_CallMethodNoArgs(metadata, str_fetch);
    Py_XDECREF(metadata);
    if (cluster == NULL) {
        return NULL;
    }
    PyObject *last = attr_get(sender, str_last_cluster);
    long long refreshed = last == NULL ? -1 : attr_ll(sender, str_last_refresh);
    Py_XDECREF(last);
    if (PyErr_Occurred()) {
        Py_DECREF(cluster);
        return NULL;
    }
    int usual = last == cluster && now_ms - refreshed < TOPIC_REFRESH_INTERVAL_MS;
    PyObject *accumulator = NULL, *topics = NULL;
    if (usual) {
        accumulator = attr_get(sender, str_accumulator);
        topics = accumulator == NULL ? NULL : attr_get(accumulator, str_topics);
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
    {"configure", (PyCFunction)(void (*)(void))kstep_configure, METH_FASTCALL,
     "configure(new_client_request, produce_api_key, produce_min_version, "
     "produce_max_version, log, debug_level, Sender, RecordAccumulator, "
     "ProducerBatch): what the one-batch request needs and the types read the fast way "
     "(sender.py calls it)."},
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
    INTERN(str_in_flight_batches, "_in_flight_batches");
    INTERN(str_next_expiry, "_next_expiry_check_ms");
    INTERN(str_guarantee_order, "_guarantee_order");
    INTERN(str_mute, "mute");
    INTERN(str_expire_batches, "_expire_batches");
    INTERN(str_more_ready, "more_ready");
    INTERN(str_tp, "tp");
    INTERN(str_created_ms, "created_ms");
    INTERN(str_next_expiry_ms, "next_expiry_ms");
#undef INTERN
    if (kstep_request_init() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&step_module);
    if (module != NULL && kstep_run_init(module) < 0) {
        Py_CLEAR(module);
    }
    return module;
}
