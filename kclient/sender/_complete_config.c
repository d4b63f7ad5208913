/*
 * kclient.sender._complete's configure (the module's one function, kept apart from the
 * answer's code in _complete.c): the types the C reads the fast way, the slot offsets of
 * their members, FinalState.SUCCEEDED, the duplicate-sequence error code and the C Lock.
 */
#include "_complete.h"

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

PyObject *
kclient_complete_configure(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(ClientResponse, ProducerBatch, ProduceResult, "
                        "RecordAccumulator, IncompleteBatches, BufferPool, SUCCEEDED, "
                        "duplicate_sequence_code, Lock)");
        return NULL;
    }
    /* kclient.record._speedups.Lock (whose LockObject layout _lock.h gives), or None */
    PyObject *lock_type = args[8];
    if (lock_type != Py_None &&
        (!PyType_Check(lock_type) ||
         strcmp(((PyTypeObject *)lock_type)->tp_name, "kclient.record._speedups.Lock") != 0 ||
         ((PyTypeObject *)lock_type)->tp_basicsize != (Py_ssize_t)sizeof(LockObject))) {
        PyErr_SetString(PyExc_TypeError, "configure: Lock must be kclient.record._speedups.Lock or None");
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
        {&cfg.b_flush_id, cfg.batch, "flush_id"},
        {&cfg.p_available, cfg.pool, "_available"},
        {&cfg.p_closed, cfg.pool, "_closed"},
        {&cfg.p_lock, cfg.pool, "_lock"},
        {&cfg.p_waiters, cfg.pool, "_waiters"},
        {&cfg.p_total_bytes, cfg.pool, "total_bytes"},
        {&cfg.i_batches, cfg.incomplete, "_batches"},
        {&cfg.i_last_batch_id, cfg.incomplete, "_last_batch_id"},
        {&cfg.i_lock, cfg.incomplete, "_lock"},
        {&cfg.c_version_mismatch, cfg.response, "version_mismatch"},
        {&cfg.c_disconnected, cfg.response, "disconnected"},
        {&cfg.c_body, cfg.response, "body"},
        {&cfg.c_received_time_ms, cfg.response, "received_time_ms"},
        {&cfg.c_request, cfg.response, "request"},
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
    Py_XSETREF(kclient_lock_type, lock_type == Py_None ? NULL : (PyTypeObject *)Py_NewRef(lock_type));
    cfg.ready = 1;
    Py_RETURN_NONE;
}
