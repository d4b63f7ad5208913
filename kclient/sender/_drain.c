/*
 * kclient.sender._drain: the accumulator's ready check and drain (kclient/sender/drain.py's
 * BatchDrainer.ready, drain, _drain_node and _close_all) in C, Java's
 * RecordAccumulator.ready/drain.
 *
 * Optional: drain.py keeps PyBatchDrainer, the reference, and runs it when this module is
 * not built or KCLIENT_PURE_PYTHON is set. Drainer does what it does step for step: the same
 * ready nodes, delays, unknown-leader topics, next_expiry_ms, more_ready, drain index
 * rotation and batch state, the same Python calls (tm.can_send, tm.assign_sequence, a
 * Python builder's is_full and build, _pending_steps: the few-batches-many-partitions walk
 * stays Python). TopicQueues, ProducerBatch and PartitionInfo keep their state in __slots__:
 * for objects of exactly those types the slots are read at their descriptors' offsets (as
 * _append.c does), anything else through getattr. A TopicQueues' C Lock (_lock.h) is taken
 * without a Python call; any other lock with `with`'s __enter__/__exit__.
 *
 * This file: the Drainer type, configure() and the module; the ready check is in
 * _drain_ready.c, the drain in _drain_walk.c, an uncompressed batch's build in _drain_build.c.
 *
 * Threads: the Sender thread, GIL held; a contended lock is waited for with the GIL
 * released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_drain.h"

DrainConfig cfg;
PyObject *s_leaders_by_partition, *s_partitions_for_node, *s_pending_steps, *s_id,
    *s_is_full, *s_build, *s_close, *s_can_send, *s_assign_sequence, *s_popleft, *s_enter,
    *s_exit, *s_size_in_bytes, *s_estimated, *s_in_retry, *s_retry_at_ms, *s_created_ms,
    *s_builder, *s_drained_ms, *s_lock, *s_deques, *s_queued, *s_tps, *s_topic, *s_partition,
    *s_close_framed;

/* cluster.partitions_for_node(node_id), as a list or tuple (new reference). */
PyObject *
kclient_drain_cluster_parts(Drainer *self, PyObject *cluster, PyObject *node_id)
{
    PyObject *parts;
    int cache = Py_TYPE(cluster) == cfg.cluster;
    if (cache && cluster == self->cluster && self->parts_by_node != NULL) {
        parts = PyDict_GetItemWithError(self->parts_by_node, node_id);
        if (parts != NULL) {
            Py_INCREF(parts);
            return parts;
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *out = PyObject_CallMethodOneArg(cluster, s_partitions_for_node, node_id);
    if (out == NULL) {
        return NULL;
    }
    parts = PySequence_Fast(out, "partitions_for_node must return a sequence");
    Py_DECREF(out);
    if (parts == NULL || !cache) {
        return parts;
    }
    if (cluster != self->cluster) {
        Py_CLEAR(self->leaders);
        Py_INCREF(cluster);
        Py_XSETREF(self->cluster, cluster);
        Py_CLEAR(self->parts_by_node);
    }
    if (self->parts_by_node == NULL && (self->parts_by_node = PyDict_New()) == NULL) {
        Py_DECREF(parts);
        return NULL;
    }
    if (PyDict_SetItem(self->parts_by_node, node_id, parts) < 0) {
        Py_DECREF(parts);
        return NULL;
    }
    return parts;
}

static PyObject *
drainer_drain(Drainer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames != NULL || nargs != 5 || !PyDict_Check(args[0])) {
        return kclient_drain_reference(cfg.py_drain, self, args, nargs, kwnames);
    }
    return kclient_drain_drain(self, args, nargs, kwnames);
}

static int
drainer_init(Drainer *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"transaction_manager", NULL};
    PyObject *tm;
    if (!cfg.ready) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.sender._drain.configure() was not called");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Drainer", names, &tm)) {
        return -1;
    }
    PyObject *index = PyDict_New(), *positions = PyDict_New(), *muted = PySet_New(NULL);
    PyObject *zero = PyLong_FromLong(0);
    if (index == NULL || positions == NULL || muted == NULL || zero == NULL) {
        Py_XDECREF(index);
        Py_XDECREF(positions);
        Py_XDECREF(muted);
        Py_XDECREF(zero);
        return -1;
    }
    Py_XSETREF(self->tm, Py_NewRef(tm));
    Py_XSETREF(self->drain_index, index);
    Py_XSETREF(self->positions_cluster, Py_NewRef(Py_None));
    Py_XSETREF(self->positions, positions);
    Py_XSETREF(self->muted, muted);
    Py_XSETREF(self->next_expiry_ms, zero);
    Py_XSETREF(self->more_ready, Py_NewRef(Py_False));
    Py_CLEAR(self->cluster);
    Py_CLEAR(self->leaders);
    Py_CLEAR(self->parts_by_node);
    Py_CLEAR(self->ready_node);
    Py_CLEAR(self->ready_set);
    return 0;
}

static int
drainer_traverse(Drainer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tm);
    Py_VISIT(self->drain_index);
    Py_VISIT(self->positions_cluster);
    Py_VISIT(self->positions);
    Py_VISIT(self->muted);
    Py_VISIT(self->next_expiry_ms);
    Py_VISIT(self->more_ready);
    Py_VISIT(self->cluster);
    Py_VISIT(self->leaders);
    Py_VISIT(self->parts_by_node);
    Py_VISIT(self->ready_node);
    Py_VISIT(self->ready_set);
    return 0;
}

static int
drainer_clear(Drainer *self)
{
    Py_CLEAR(self->tm);
    Py_CLEAR(self->drain_index);
    Py_CLEAR(self->positions_cluster);
    Py_CLEAR(self->positions);
    Py_CLEAR(self->muted);
    Py_CLEAR(self->next_expiry_ms);
    Py_CLEAR(self->more_ready);
    Py_CLEAR(self->cluster);
    Py_CLEAR(self->leaders);
    Py_CLEAR(self->parts_by_node);
    Py_CLEAR(self->ready_node);
    Py_CLEAR(self->ready_set);
    return 0;
}

static void
drainer_dealloc(Drainer *self)
{
    /* a Python subclass's instance: subtype_dealloc drops the reference to its type */
    PyObject_GC_UnTrack(self);
    drainer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef drainer_methods[] = {
    {"ready", (PyCFunction)(void (*)(void))kclient_drain_ready, METH_FASTCALL | METH_KEYWORDS,
     "ready(topics, cluster, now_ms, linger_ms, delivery_timeout_ms, all_ready) -> "
     "ReadyCheckResult"},
    {"drain", (PyCFunction)(void (*)(void))drainer_drain, METH_FASTCALL | METH_KEYWORDS,
     "drain(topics, cluster, nodes, max_request_size, now_ms) -> {node id: [batch]}"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef drainer_members[] = {
    {"_tm", T_OBJECT_EX, offsetof(Drainer, tm), 0, NULL},
    {"_drain_index", T_OBJECT_EX, offsetof(Drainer, drain_index), 0, NULL},
    {"_positions_cluster", T_OBJECT_EX, offsetof(Drainer, positions_cluster), 0, NULL},
    {"_positions", T_OBJECT_EX, offsetof(Drainer, positions), 0, NULL},
    {"muted", T_OBJECT_EX, offsetof(Drainer, muted), 0, NULL},
    {"next_expiry_ms", T_OBJECT_EX, offsetof(Drainer, next_expiry_ms), 0, NULL},
    {"more_ready", T_OBJECT_EX, offsetof(Drainer, more_ready), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject DrainerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._drain.Drainer",
    .tp_basicsize = sizeof(Drainer),
    .tp_dealloc = (destructor)drainer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "BatchDrainer's ready and drain in C (see kclient/sender/drain.py).",
    .tp_traverse = (traverseproc)drainer_traverse,
    .tp_clear = (inquiry)drainer_clear,
    .tp_methods = drainer_methods,
    .tp_members = drainer_members,
    .tp_init = (initproc)drainer_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module -------------------------------------------------------------------------------- */

/* configure(topic_queues, producer_batch, partition_info, cluster, c_builder, lock, deque,
 *           ready_result, refuse, py_ready, py_drain, none_codec, crc32c) */
static PyObject *
drain_configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyTypeObject *q, *b, *i, *c, *dq;
    PyObject *builder, *lock, *result, *refuse, *py_ready, *py_drain, *none_codec, *crc;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOO!OOOOOO:configure", &PyType_Type, &q, &PyType_Type,
                          &b, &PyType_Type, &i, &PyType_Type, &c, &builder, &lock,
                          &PyType_Type, &dq, &result, &refuse, &py_ready, &py_drain,
                          &none_codec, &crc)) {
        return NULL;
    }
    PyObject *writer = NULL, *c_lock = NULL;
    if (builder != Py_None || lock != Py_None) {
        PyObject *speedups = PyImport_ImportModule("kclient.record._speedups");
        if (speedups == NULL) {
            return NULL;
        }
        writer = PyObject_GetAttrString(speedups, "RecordsWriter");
        c_lock = writer == NULL ? NULL : PyObject_GetAttrString(speedups, "Lock");
        Py_DECREF(speedups);
        Py_XDECREF(writer); /* the module keeps both */
        Py_XDECREF(c_lock);
        if (c_lock == NULL) {
            return NULL;
        }
    }
    if (builder != Py_None &&
        !(PyType_Check(builder) &&
          PyType_IsSubtype((PyTypeObject *)builder, (PyTypeObject *)writer))) {
        PyErr_SetString(PyExc_TypeError, "c_builder must be a RecordsWriter subclass or None");
        return NULL;
    }
    if (lock != Py_None && lock != c_lock) {
        PyErr_SetString(PyExc_TypeError, "lock must be kclient.record._speedups.Lock or None");
        return NULL;
    }
    if (!PyType_Check(result) || !PyType_IsSubtype((PyTypeObject *)result, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "ready_result must be a tuple subclass");
        return NULL;
    }
    if ((cfg.q_lock = slot_offset(q, "lock")) < 0 ||
        (cfg.q_deques = slot_offset(q, "deques")) < 0 ||
        (cfg.q_queued = slot_offset(q, "queued")) < 0 ||
        (cfg.q_tps = slot_offset(q, "tps")) < 0 ||
        (cfg.b_in_retry = slot_offset(b, "in_retry")) < 0 ||
        (cfg.b_retry_at = slot_offset(b, "retry_at_ms")) < 0 ||
        (cfg.b_created = slot_offset(b, "created_ms")) < 0 ||
        (cfg.b_builder = slot_offset(b, "builder")) < 0 ||
        (cfg.b_records = slot_offset(b, "records")) < 0 ||
        (cfg.b_drained = slot_offset(b, "drained_ms")) < 0 ||
        (cfg.b_uncompressed = slot_offset(b, "uncompressed_bytes")) < 0 ||
        (cfg.b_append = slot_offset(b, "_append")) < 0 ||
        (cfg.i_topic = slot_offset(i, "topic")) < 0 ||
        (cfg.i_partition = slot_offset(i, "partition")) < 0) {
        return NULL;
    }
    PyTypeObject *w = (PyTypeObject *)builder;
    if (builder != Py_None &&
        ((cfg.w_built = slot_offset(w, "_built")) < 0 ||
         (cfg.w_base_offset = slot_offset(w, "_base_offset")) < 0 ||
         (cfg.w_base_sequence = slot_offset(w, "_base_sequence")) < 0 ||
         (cfg.w_codec = slot_offset(w, "_codec")) < 0 ||
         (cfg.w_transactional = slot_offset(w, "_is_transactional")) < 0 ||
         (cfg.w_leader_epoch = slot_offset(w, "_partition_leader_epoch")) < 0 ||
         (cfg.w_producer_epoch = slot_offset(w, "_producer_epoch")) < 0 ||
         (cfg.w_producer_id = slot_offset(w, "_producer_id")) < 0)) {
        return NULL;
    }
    cfg.queues = (PyTypeObject *)Py_NewRef(q);
    cfg.batch = (PyTypeObject *)Py_NewRef(b);
    cfg.info = (PyTypeObject *)Py_NewRef(i);
    cfg.cluster = (PyTypeObject *)Py_NewRef(c);
    cfg.deque = (PyTypeObject *)Py_NewRef(dq);
    cfg.builder = builder == Py_None ? NULL : (PyTypeObject *)Py_NewRef(builder);
    cfg.lock = lock == Py_None ? NULL : (PyTypeObject *)Py_NewRef(lock);
    cfg.result_type = Py_NewRef(result);
    cfg.refuse = Py_NewRef(refuse);
    cfg.py_ready = Py_NewRef(py_ready);
    cfg.py_drain = Py_NewRef(py_drain);
    cfg.none_codec = Py_NewRef(none_codec);
    cfg.crc32c = Py_NewRef(crc);
    cfg.ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", drain_configure, METH_VARARGS,
     "configure(topic_queues, producer_batch, partition_info, cluster, c_builder, lock, "
     "deque, ready_result, refuse, py_ready, py_drain, none_codec, crc32c): the types whose slots Drainer reads "
     "and the Python reference; once, before the first Drainer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.sender._drain",
    .m_doc = "The accumulator's ready check and drain (see kclient/sender/drain.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

static int
intern(PyObject **slot, const char *name)
{
    *slot = PyUnicode_InternFromString(name);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__drain(void)
{
    if (intern(&s_leaders_by_partition, "leaders_by_partition") < 0 ||
        intern(&s_partitions_for_node, "partitions_for_node") < 0 ||
        intern(&s_pending_steps, "_pending_steps") < 0 || intern(&s_id, "id") < 0 ||
        intern(&s_is_full, "is_full") < 0 || intern(&s_build, "build") < 0 ||
        intern(&s_close, "close") < 0 || intern(&s_can_send, "can_send") < 0 ||
        intern(&s_assign_sequence, "assign_sequence") < 0 ||
        intern(&s_popleft, "popleft") < 0 || intern(&s_enter, "__enter__") < 0 ||
        intern(&s_exit, "__exit__") < 0 || intern(&s_size_in_bytes, "size_in_bytes") < 0 ||
        intern(&s_estimated, "estimated_size_bytes") < 0 ||
        intern(&s_in_retry, "in_retry") < 0 || intern(&s_retry_at_ms, "retry_at_ms") < 0 ||
        intern(&s_created_ms, "created_ms") < 0 || intern(&s_builder, "builder") < 0 ||
        intern(&s_drained_ms, "drained_ms") < 0 || intern(&s_lock, "lock") < 0 ||
        intern(&s_deques, "deques") < 0 || intern(&s_queued, "queued") < 0 ||
        intern(&s_tps, "tps") < 0 || intern(&s_topic, "topic") < 0 ||
        intern(&s_partition, "partition") < 0 || intern(&s_close_framed, "_close_framed") < 0) {
        return NULL;
    }
    if (PyType_Ready(&DrainerType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Drainer", (PyObject *)&DrainerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
