/*
 * kclient.sender._drain's ready check (see _drain.c): BatchDrainer.ready, step for step.
 * Sender thread, GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_drain.h"

/* The cluster's leaders (borrowed, a dict) and partitions-by-node cache, refreshed when the
 * cluster changes; NULL on error. A Cluster is immutable: only exact Clusters are kept. */
static PyObject *
cluster_leaders(Drainer *self, PyObject *cluster)
{
    if (cluster == self->cluster && self->leaders != NULL) {
        return self->leaders;
    }
    PyObject *leaders = PyObject_CallMethodNoArgs(cluster, s_leaders_by_partition);
    if (leaders == NULL) {
        return NULL;
    }
    if (Py_TYPE(cluster) != cfg.cluster) {
        Py_CLEAR(self->cluster);
        Py_CLEAR(self->parts_by_node);
        Py_XSETREF(self->leaders, leaders); /* kept only until the call returns */
        return leaders;
    }
    if (cluster != self->cluster) {
        Py_CLEAR(self->parts_by_node);
        Py_INCREF(cluster);
        Py_XSETREF(self->cluster, cluster);
    }
    Py_XSETREF(self->leaders, leaders);
    return leaders;
}


/* The Python reference with the call as it came (self first). */
PyObject *
kclient_drain_reference(PyObject *function, Drainer *self, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[16];
    PyObject **argv = total + 1 <= 16 ? small : PyMem_New(PyObject *, total + 1);
    if (argv == NULL) {
        return PyErr_NoMemory();
    }
    argv[0] = (PyObject *)self;
    for (Py_ssize_t i = 0; i < total; i++) {
        argv[i + 1] = args[i];
    }
    PyObject *out = PyObject_Vectorcall(function, argv, nargs + 1, kwnames);
    if (argv != small) {
        PyMem_Free(argv);
    }
    return out;
}

/* Whether `leader` is ready: in `seen` (the ready nodes, by identity) or in `ready_nodes`.
 * The first ready node is only in `seen` (the set is empty: ready() puts it in at the end,
 * see kclient_drain_ready) until another leader is asked about: then it joins the set,
 * which compares by equality from then on. -1 on error. */
static inline int
is_ready(PyObject *ready_nodes, PyObject **seen, int nseen, PyObject *leader)
{
    for (int i = 0; i < nseen; i++) {
        if (seen[i] == leader) {
            return 1;
        }
    }
    if (nseen == 1 && PySet_GET_SIZE(ready_nodes) == 0 && PySet_Add(ready_nodes, seen[0]) < 0) {
        return -1;
    }
    /* an empty set holds nothing: no need to hash (a Node's __hash__ is Python code) */
    return PySet_GET_SIZE(ready_nodes) ? PySet_Contains(ready_nodes, leader) : 0;
}

/* Whether tp is muted; -1 on error. */
static inline int
is_muted(PyObject *muted, PyObject *tp)
{
    if (PyAnySet_CheckExact(muted)) {
        return PySet_GET_SIZE(muted) ? PySet_Contains(muted, tp) : 0;
    }
    int truth = PyObject_IsTrue(muted);
    return truth <= 0 ? truth : PySequence_Contains(muted, tp);
}

#define SEEN_MAX 16

/* One topic's deques under its lock (held by the caller): ready_nodes, unknown and the
 * delays as BatchDrainer.ready's loop body. 0, or -1 with an exception. */
static int
ready_topic(PyObject *queues, PyObject *leaders, PyObject *muted, long long now_ms,
            long long linger_ms, long long timeout_ms, int all_ready, PyObject *ready_nodes,
            PyObject *unknown, PyObject **seen, int *nseen, long long *next_delay_ms,
            long long *next_expiry_ms)
{
    int rc = -1, err = 0;
    PyObject *tps = field(queues, cfg.queues, cfg.q_tps, s_tps);
    PyObject *deques = tps == NULL ? NULL : field(queues, cfg.queues, cfg.q_deques, s_deques);
    if (deques == NULL) {
        goto done;
    }
    if (!PyDict_Check(deques)) {
        PyErr_SetString(PyExc_TypeError, "TopicQueues.deques must be a dict");
        goto done;
    }
    Py_ssize_t pos = 0;
    PyObject *index, *dq;
    while (PyDict_Next(deques, &pos, &index, &dq)) {
        Py_ssize_t len = dq_len(dq);
        if (len <= 0) {
            if (len < 0) {
                goto done;
            }
            continue;
        }
        Py_INCREF(dq);
        Py_INCREF(index);
        PyObject *batch = PySequence_GetItem(dq, 0);
        PyObject *tp = NULL;
        int step = -1; /* 1: done with this deque, 0: error-free so far */
        if (batch == NULL) {
            goto next;
        }
        long long created_ms = int_field(batch, cfg.batch, cfg.b_created, s_created_ms, &err);
        if (err) {
            goto next;
        }
        long long expiry_ms = created_ms + timeout_ms - now_ms;
        if (expiry_ms < *next_expiry_ms) {
            *next_expiry_ms = expiry_ms;
        }
        tp = PyObject_GetItem(tps, index);
        if (tp == NULL) {
            goto next;
        }
        PyObject *leader = PyDict_GetItemWithError(leaders, tp);
        if (leader == NULL) {
            if (PyErr_Occurred()) {
                goto next;
            }
            PyObject *topic = PyTuple_Check(tp) && PyTuple_GET_SIZE(tp) == 2
                                  ? Py_NewRef(PyTuple_GET_ITEM(tp, 0))
                                  : PyObject_GetAttr(tp, s_topic);
            if (topic == NULL) {
                goto next;
            }
            int added = PySet_Add(unknown, topic);
            Py_DECREF(topic);
            step = added < 0 ? -1 : 1;
            goto next;
        }
        int skip = is_ready(ready_nodes, seen, *nseen, leader);
        if (skip == 0 && muted != Py_None) {
            skip = is_muted(muted, tp);
        }
        if (skip != 0) {
            step = skip < 0 ? -1 : 1;
            goto next;
        }
        int in_retry = bool_field(batch, cfg.batch, cfg.b_in_retry, s_in_retry);
        if (in_retry < 0) {
            goto next;
        }
        int make_ready;
        if (in_retry) {
            long long retry_at_ms =
                int_field(batch, cfg.batch, cfg.b_retry_at, s_retry_at_ms, &err);
            if (err) {
                goto next;
            }
            make_ready = retry_at_ms <= now_ms;
            if (!make_ready && retry_at_ms - now_ms < *next_delay_ms) {
                *next_delay_ms = retry_at_ms - now_ms;
            }
        }
        else {
            long long waited_ms = now_ms - created_ms;
            make_ready = waited_ms >= linger_ms || all_ready || len > 1;
            if (!make_ready) {
                make_ready = builder_is_full(batch);
                if (make_ready < 0) {
                    goto next;
                }
            }
            if (!make_ready && linger_ms - waited_ms < *next_delay_ms) {
                *next_delay_ms = linger_ms - waited_ms;
            }
        }
        if (make_ready) {
            if (*nseen == 0) { /* the first: into the set at the end (is_ready) */
                seen[(*nseen)++] = leader; /* held by `leaders` */
            }
            else {
                if (PySet_Add(ready_nodes, leader) < 0) {
                    goto next;
                }
                if (*nseen < SEEN_MAX) {
                    seen[(*nseen)++] = leader; /* held by ready_nodes */
                }
            }
        }
        step = 1;
    next:
        Py_XDECREF(tp);
        Py_XDECREF(batch);
        Py_DECREF(index);
        Py_DECREF(dq);
        if (step < 0) {
            goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(tps);
    Py_XDECREF(deques);
    return rc;
}

/* The one ready node into *ready_nodes (empty): a copy of the set the previous ready() made
 * when it had the same node (a set's copy keeps the stored hashes), else the node added
 * (hashed) and that set kept for the next. 0, or -1 with the exception. */
static int
one_ready_node(Drainer *self, PyObject **ready_nodes, PyObject *node)
{
    if (self->ready_node == node && self->ready_set != NULL) {
        PyObject *copy = PySet_New(self->ready_set);
        if (copy == NULL) {
            return -1;
        }
        Py_SETREF(*ready_nodes, copy);
        return 0;
    }
    if (PySet_Add(*ready_nodes, node) < 0) {
        return -1;
    }
    PyObject *kept = PySet_New(*ready_nodes);
    if (kept == NULL) {
        return -1;
    }
    Py_XSETREF(self->ready_set, kept);
    Py_XSETREF(self->ready_node, Py_NewRef(node));
    return 0;
}

/* ready(topics, cluster, now_ms, linger_ms, delivery_timeout_ms, all_ready) */
PyObject *
kclient_drain_ready(Drainer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames != NULL || nargs != 6 || !PyDict_Check(args[0])) {
        return kclient_drain_reference(cfg.py_ready, self, args, nargs, kwnames);
    }
    PyObject *topics = args[0], *cluster = args[1];
    long long now_ms = PyLong_AsLongLong(args[2]);
    long long linger_ms = PyLong_AsLongLong(args[3]);
    long long timeout_ms = PyLong_AsLongLong(args[4]);
    int all_ready = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred() || all_ready < 0) {
        return NULL;
    }
    PyObject *leaders = cluster_leaders(self, cluster);
    if (leaders == NULL) {
        return NULL;
    }
    if (!PyDict_Check(leaders)) {
        return kclient_drain_reference(cfg.py_ready, self, args, nargs, kwnames);
    }
    Py_INCREF(leaders);
    PyObject *muted = self->muted != NULL ? Py_NewRef(self->muted) : Py_NewRef(Py_None);
    PyObject *ready_nodes = PySet_New(NULL);
    PyObject *unknown = PySet_New(NULL);
    PyObject *seen[SEEN_MAX];
    int nseen = 0;
    long long next_delay_ms = timeout_ms, next_expiry_ms = timeout_ms;
    PyObject *result = NULL;
    if (ready_nodes == NULL || unknown == NULL) {
        goto done;
    }
    Py_ssize_t pos = 0;
    PyObject *name, *queues;
    Py_INCREF(topics);
    while (PyDict_Next(topics, &pos, &name, &queues)) {
        int queued = bool_field(queues, cfg.queues, cfg.q_queued, s_queued);
        if (queued <= 0) {
            if (queued < 0) {
                Py_DECREF(topics);
                goto done;
            }
            continue;
        }
        Py_INCREF(queues);
        PyObject *lock = field(queues, cfg.queues, cfg.q_lock, s_lock);
        int rc = -1;
        if (lock != NULL && lock_take(lock) == 0) {
            rc = ready_topic(queues, leaders, muted, now_ms, linger_ms, timeout_ms, all_ready,
                             ready_nodes, unknown, seen, &nseen, &next_delay_ms,
                             &next_expiry_ms);
            if (lock_give(lock) < 0) {
                rc = -1;
            }
        }
        Py_XDECREF(lock);
        Py_DECREF(queues);
        if (rc < 0) {
            Py_DECREF(topics);
            goto done;
        }
    }
    Py_DECREF(topics);
    if (nseen == 1 && PySet_GET_SIZE(ready_nodes) == 0 && one_ready_node(self, &ready_nodes, seen[0]) < 0) {
        goto done;
    }
    PyObject *expiry = PyLong_FromLongLong(now_ms + next_expiry_ms);
    if (expiry == NULL) {
        goto done;
    }
    Py_XSETREF(self->next_expiry_ms, expiry);
    long long delay_ms = next_delay_ms < next_expiry_ms ? next_delay_ms : next_expiry_ms;
    PyObject *delay = PyLong_FromLongLong(delay_ms > 0 ? delay_ms : 0);
    if (delay == NULL) {
        goto done;
    }
    PyObject *items = PyTuple_Pack(3, ready_nodes, delay, unknown);
    Py_DECREF(delay);
    if (items == NULL) {
        goto done;
    }
    /* ReadyCheckResult(...) without its Python __new__: tuple.__new__(cls, items) */
    PyObject *targs = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (targs != NULL) {
        result = PyTuple_Type.tp_new((PyTypeObject *)cfg.result_type, targs, NULL);
        Py_DECREF(targs);
    }
done:
    Py_XDECREF(ready_nodes);
    Py_XDECREF(unknown);
    Py_DECREF(muted);
    Py_DECREF(leaders);
    if (Py_TYPE(cluster) != cfg.cluster) {
        Py_CLEAR(self->leaders);
    }
    return result;
}

