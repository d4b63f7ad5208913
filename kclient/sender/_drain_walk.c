/*
 * kclient.sender._drain's drain (see _drain.c): BatchDrainer.drain, _drain_node and
 * _close_all, step for step. Sender thread, GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_drain.h"

/* _close_all: each batch's close() (for a ProducerBatch, in C, with the C builder's build()
 * too when uncompressed). The list (stolen), or NULL. */
static PyObject *
close_all(PyObject *ready)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ready); i++) {
        PyObject *batch = PyList_GET_ITEM(ready, i);
        if (Py_TYPE(batch) != cfg.batch) {
            PyObject *out = PyObject_CallMethodNoArgs(batch, s_close);
            if (out == NULL) {
                goto error;
            }
            Py_DECREF(out);
            continue;
        }
        PyObject *records = SLOT(batch, cfg.b_records);
        PyObject *builder = SLOT(batch, cfg.b_builder);
        if (records == NULL || builder == NULL) {
            PyErr_SetString(PyExc_AttributeError, "ProducerBatch has no records or builder");
            goto error;
        }
        if (records != Py_None) {
            continue;
        }
        Py_INCREF(builder);
        PyObject *size = builder_size(builder);
        if (size == NULL) {
            Py_DECREF(builder);
            goto error;
        }
        set_field(batch, cfg.batch, cfg.b_uncompressed, NULL, size);
        Py_DECREF(size);
        PyObject *built = kclient_drain_build(builder);
        if (built == NULL && !PyErr_Occurred()) {
            built = PyObject_CallMethodNoArgs(builder, s_build);
        }
        Py_DECREF(builder);
        if (built == NULL) {
            goto error;
        }
        set_field(batch, cfg.batch, cfg.b_records, NULL, built);
        Py_DECREF(built);
        set_field(batch, cfg.batch, cfg.b_append, NULL, cfg.refuse);
    }
    return ready;
error:
    Py_DECREF(ready);
    return NULL;
}

/* _drain_index[node_id] = value; -1 on error. */
static int
set_index(Drainer *self, PyObject *node_id, Py_ssize_t value)
{
    PyObject *n = PyLong_FromSsize_t(value);
    if (n == NULL) {
        return -1;
    }
    int rc = PyObject_SetItem(self->drain_index, node_id, n);
    Py_DECREF(n);
    return rc;
}

/* The drain's state across a node's walk. */
typedef struct {
    Drainer *self;
    PyObject *topics, *node_id, *now, *ready;
    long long max_request_size, now_ms, size, pending;
    Py_ssize_t start, count;
} Walk;

/* One step of the walk: 1 to go on, 0 when the walk is over (ready is then final), -1 on
 * error. */
static int
walk_step(Walk *w, long long step, PyObject *info)
{
    Drainer *self = w->self;
    int rc = -1, locked = 0;
    PyObject *topic = NULL, *queues = NULL, *partition = NULL, *lock = NULL, *deques = NULL,
             *dq = NULL, *first = NULL, *batch = NULL;
    topic = field(info, cfg.info, cfg.i_topic, s_topic);
    if (topic == NULL) {
        goto done;
    }
    queues = PyDict_GetItemWithError(w->topics, topic);
    if (queues == NULL) {
        rc = PyErr_Occurred() ? -1 : 1;
        goto done;
    }
    Py_INCREF(queues);
    int queued = bool_field(queues, cfg.queues, cfg.q_queued, s_queued);
    if (queued <= 0) {
        rc = queued < 0 ? -1 : 1;
        goto done;
    }
    partition = field(info, cfg.info, cfg.i_partition, s_partition);
    if (partition == NULL) {
        goto done;
    }
    PyObject *muted = self->muted;
    if (muted != NULL && (!PyAnySet_CheckExact(muted) || PySet_GET_SIZE(muted))) {
        PyObject *key = PyTuple_Pack(2, topic, partition);
        if (key == NULL) {
            goto done;
        }
        int truth = PyAnySet_CheckExact(muted) ? 1 : PyObject_IsTrue(muted);
        int is_muted = truth <= 0 ? truth : PySequence_Contains(muted, key);
        Py_DECREF(key);
        if (is_muted != 0) {
            rc = is_muted < 0 ? -1 : 1;
            goto done;
        }
    }
    lock = field(queues, cfg.queues, cfg.q_lock, s_lock);
    if (lock == NULL || lock_take(lock) < 0) {
        goto done;
    }
    locked = 1;
    deques = field(queues, cfg.queues, cfg.q_deques, s_deques);
    if (deques == NULL) {
        goto done;
    }
    if (PyDict_Check(deques)) {
        dq = PyDict_GetItemWithError(deques, partition);
        Py_XINCREF(dq);
    }
    else {
        dq = PyObject_CallMethod(deques, "get", "O", partition);
        if (dq == Py_None) {
            Py_CLEAR(dq);
        }
    }
    if (dq == NULL) {
        rc = PyErr_Occurred() ? -1 : 1;
        goto done;
    }
    Py_ssize_t len = dq_len(dq);
    if (len <= 0) {
        rc = len < 0 ? -1 : 1;
        goto done;
    }
    first = PySequence_GetItem(dq, 0);
    if (first == NULL) {
        goto done;
    }
    int in_retry = bool_field(first, cfg.batch, cfg.b_in_retry, s_in_retry);
    if (in_retry < 0) {
        goto done;
    }
    if (in_retry) {
        int err = 0;
        long long retry_at_ms = int_field(first, cfg.batch, cfg.b_retry_at, s_retry_at_ms, &err);
        if (err) {
            goto done;
        }
        if (retry_at_ms > w->now_ms) {
            rc = 1;
            goto done;
        }
    }
    if (PyList_GET_SIZE(w->ready)) {
        long long first_size = estimated_size(first);
        if (first_size == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (w->size + first_size > w->max_request_size) {
            Py_XSETREF(self->more_ready, Py_NewRef(Py_True));
            Py_ssize_t at = (Py_ssize_t)((w->start + step) % w->count);
            rc = set_index(self, w->node_id, at < 0 ? at + w->count : at) < 0 ? -1 : 0;
            goto done;
        }
    }
    PyObject *tm = self->tm;
    if (tm != NULL && tm != Py_None) {
        PyObject *tps = field(queues, cfg.queues, cfg.q_tps, s_tps);
        PyObject *tp = tps == NULL ? NULL : PyObject_GetItem(tps, partition);
        Py_XDECREF(tps);
        if (tp == NULL) {
            goto done;
        }
        PyObject *out = PyObject_CallMethodObjArgs(tm, s_can_send, tp, first, NULL);
        Py_DECREF(tp);
        int can = out == NULL ? -1 : PyObject_IsTrue(out);
        Py_XDECREF(out);
        if (can <= 0) {
            rc = can < 0 ? -1 : 1;
            goto done;
        }
    }
    batch = PyObject_CallMethodNoArgs(dq, s_popleft);
    if (batch == NULL) {
        goto done;
    }
    int err = 0;
    long long queued_now = int_field(queues, cfg.queues, cfg.q_queued, s_queued, &err);
    PyObject *less = err ? NULL : PyLong_FromLongLong(queued_now - 1);
    if (less == NULL) {
        goto done;
    }
    int set = set_field(queues, cfg.queues, cfg.q_queued, s_queued, less);
    Py_DECREF(less);
    if (set < 0) {
        goto done;
    }
    len = dq_len(dq);
    if (len < 0) {
        goto done;
    }
    if (len > 0) {
        Py_XSETREF(self->more_ready, Py_NewRef(Py_True));
    }
    if (tm != NULL && tm != Py_None) {
        PyObject *out = PyObject_CallMethodOneArg(tm, s_assign_sequence, batch);
        if (out == NULL) {
            goto done;
        }
        Py_DECREF(out);
    }
    locked = 0;
    if (lock_give(lock) < 0) {
        goto done;
    }
    long long batch_size = estimated_size(batch);
    if (batch_size == -1 && PyErr_Occurred()) {
        goto done;
    }
    w->size += batch_size;
    PyObject *drained = field(batch, cfg.batch, cfg.b_drained, s_drained_ms);
    if (drained == NULL) {
        goto done;
    }
    int later = PyObject_RichCompareBool(w->now, drained, Py_GT); /* max(drained, now) */
    set = later < 0 ? -1
                    : set_field(batch, cfg.batch, cfg.b_drained, s_drained_ms,
                                later ? w->now : drained);
    Py_DECREF(drained);
    if (set < 0 || PyList_Append(w->ready, batch) < 0) {
        goto done;
    }
    w->pending -= 1;
    rc = w->pending > 0;
done:
    if (locked && lock_give(lock) < 0) {
        rc = -1;
    }
    Py_XDECREF(topic);
    Py_XDECREF(queues);
    Py_XDECREF(partition);
    Py_XDECREF(lock);
    Py_XDECREF(deques);
    Py_XDECREF(dq);
    Py_XDECREF(first);
    Py_XDECREF(batch);
    return rc;
}

/* _drain_node: the node's batches (a list, closed), or NULL. */
static PyObject *
drain_node(Drainer *self, PyObject *topics, PyObject *cluster, PyObject *node_id,
           long long max_request_size, PyObject *now, long long now_ms)
{
    PyObject *parts = kclient_drain_cluster_parts(self, cluster, node_id);
    if (parts == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(parts);
    PyObject *ready = PyList_New(0);
    if (count == 0 || ready == NULL) {
        Py_DECREF(parts);
        return ready;
    }
    Walk w = {self, topics, node_id, now, ready, max_request_size, now_ms, 0, 0, 0, count};
    if (count > 1) {
        PyObject *index = PyDict_Check(self->drain_index)
                              ? Py_XNewRef(PyDict_GetItemWithError(self->drain_index, node_id))
                              : PyObject_CallMethod(self->drain_index, "get", "O", node_id);
        if (index == NULL && PyErr_Occurred()) {
            goto error;
        }
        if (index != NULL && index != Py_None) {
            long long at = PyLong_AsLongLong(index);
            Py_DECREF(index);
            if (at == -1 && PyErr_Occurred()) {
                goto error;
            }
            at %= count;
            w.start = (Py_ssize_t)(at < 0 ? at + count : at);
        }
        else {
            Py_XDECREF(index);
        }
    }
    Py_ssize_t pos = 0;
    PyObject *name, *queues;
    while (PyDict_Next(topics, &pos, &name, &queues)) {
        int err = 0;
        w.pending += int_field(queues, cfg.queues, cfg.q_queued, s_queued, &err);
        if (err) {
            goto error;
        }
    }
    if (w.pending <= 0) {
        if (set_index(self, node_id, (w.start + 1) % count) < 0) {
            goto error;
        }
        Py_DECREF(parts);
        return ready;
    }
    int rc = 1;
    if (w.pending <= FEW_PENDING && count > MANY_PARTITIONS) {
        PyObject *start = PyLong_FromSsize_t(w.start);
        PyObject *steps =
            start == NULL ? NULL
                          : PyObject_CallMethodObjArgs((PyObject *)self, s_pending_steps, topics,
                                                       cluster, node_id, parts, start, NULL);
        Py_XDECREF(start);
        PyObject *fast = steps == NULL ? NULL : PySequence_Fast(steps, "_pending_steps");
        Py_XDECREF(steps);
        if (fast == NULL) {
            goto error;
        }
        for (Py_ssize_t i = 0; rc > 0 && i < PySequence_Fast_GET_SIZE(fast); i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
                PyErr_SetString(PyExc_TypeError, "_pending_steps must give (step, info) pairs");
                rc = -1;
                break;
            }
            long long step = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
            if (step == -1 && PyErr_Occurred()) {
                rc = -1;
                break;
            }
            PyObject *info = Py_NewRef(PyTuple_GET_ITEM(item, 1));
            rc = walk_step(&w, step, info);
            Py_DECREF(info);
        }
        Py_DECREF(fast);
    }
    else {
        for (Py_ssize_t step = 0; rc > 0 && step < count; step++) {
            PyObject *info = Py_NewRef(PySequence_Fast_GET_ITEM(parts, (w.start + step) % count));
            rc = walk_step(&w, step, info);
            Py_DECREF(info);
        }
    }
    if (rc < 0) {
        goto error;
    }
    /* the walk ended (not cut by the request size: walk_step set the index then) */
    if (!(rc == 0 && w.pending > 0) && set_index(self, node_id, (w.start + 1) % count) < 0) {
        goto error;
    }
    Py_DECREF(parts);
    return close_all(ready);
error:
    Py_DECREF(parts);
    Py_DECREF(ready);
    return NULL;
}

PyObject *
kclient_drain_drain(Drainer *self, PyObject *const *args, Py_ssize_t Py_UNUSED(nargs),
                    PyObject *Py_UNUSED(kwnames))
{
    PyObject *topics = args[0], *cluster = args[1], *nodes = args[2], *now = args[4];
    long long max_request_size = PyLong_AsLongLong(args[3]);
    long long now_ms = PyLong_AsLongLong(now);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *fast = PySequence_Fast(nodes, "nodes must be a sequence");
    if (fast == NULL) {
        return NULL;
    }
    PyObject *drained = PyDict_New();
    if (drained == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    Py_INCREF(topics);
    Py_XSETREF(self->more_ready, Py_NewRef(Py_False));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *node_id = PyObject_GetAttr(PySequence_Fast_GET_ITEM(fast, i), s_id);
        PyObject *batches = node_id == NULL ? NULL
                                            : drain_node(self, topics, cluster, node_id,
                                                         max_request_size, now, now_ms);
        int rc = batches == NULL ? -1 : 0;
        if (rc == 0 && PyList_GET_SIZE(batches)) {
            rc = PyDict_SetItem(drained, node_id, batches);
        }
        Py_XDECREF(batches);
        Py_XDECREF(node_id);
        if (rc < 0) {
            Py_DECREF(drained);
            drained = NULL;
            break;
        }
    }
    Py_DECREF(topics);
    Py_DECREF(fast);
    return drained;
}
