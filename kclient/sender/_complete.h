/*
 * kclient.sender._complete's shared declarations: its configuration (the Python types it
 * takes the fast way, their __slots__ offsets), its interned names and one answer's state
 * (the call helpers are kclient/_pycall.h's). See _complete.c.
 */
#ifndef KCLIENT_COMPLETE_H
#define KCLIENT_COMPLETE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_slots.h"
#include "../_pycall.h"
#include "../record/_lock.h"

typedef struct {
    PyTypeObject *response, *batch, *result, *accumulator, *incomplete, *pool;
    PyObject *succeeded; /* FinalState.SUCCEEDED */
    long duplicate_sequence;
    /* ProducerBatch slots */
    Py_ssize_t b_tp, b_builder, b_result, b_thunks, b_final_state, b_reserved_bytes, b_flush_id;
    /* BufferPool slots */
    Py_ssize_t p_available, p_closed, p_lock, p_waiters, p_total_bytes;
    /* IncompleteBatches slots */
    Py_ssize_t i_batches, i_last_batch_id, i_lock;
    /* ClientResponse slots */
    Py_ssize_t c_version_mismatch, c_disconnected, c_body, c_received_time_ms, c_request;
    /* ProduceResult slots */
    Py_ssize_t r_lock, r_done, r_base_offset, r_log_append_time_ms, r_error, r_record_errors,
        r_watchers, r_gate, r_finished;
    int ready;
} CompleteConfig;

extern CompleteConfig kclient_complete_cfg;
#define cfg kclient_complete_cfg

extern PyObject *s_accumulator, *s_tm, *s_guarantee_order, *s_in_flight_batches, *s_wakeups,
    *s_metrics, *s_version_mismatch, *s_disconnected, *s_body, *s_received_time_ms, *s_request,
    *s_created_time_ms, *s_responses, *s_name, *s_partition_responses, *s_index, *s_error_code,
    *s_base_offset, *s_log_append_time_ms, *s_record_latency, *s_record_sent, *s_record_count,
    *s_on_success, *s_unmute, *s_incomplete, *s_pool, *s_lock, *s_batches, *s_acquire,
    *s_release, *s_available, *s_total_bytes, *s_waiters, *s_notify, *s_notify_watcher,
    *s_complete_batch, *s_not_in_request, *s_not_answered, *s_remove_in_flight, *s_deallocate,
    *s_complete, *s_remove, *s_run_callbacks, *s_append, *s_add, *minus_one, *zero;

/* One Produce answer's state: the Sender's attributes read once. */
typedef struct {
    PyObject *sender, *accumulator, *tm, *in_flight, *wakeups, *metrics, *now_ms;
    int guarantee_order;
} Answer;

/* A __slots__ member of an object of a configured type, or by name when it is unset (which
 * raises its AttributeError). A new reference, or NULL. */
static inline PyObject *
slot_get(PyObject *obj, Py_ssize_t offset, PyObject *name)
{
    PyObject *value = SLOT(obj, offset);
    return value != NULL ? Py_NewRef(value) : PyObject_GetAttr(obj, name);
}

/* obj.name: at its slot offset for an object of exactly `type` (a configured one), else
 * attr_get's. A new reference, or NULL. */
static inline PyObject *
typed_get(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name)
{
    if (cfg.ready && Py_TYPE(obj) == type) {
        PyObject *value = SLOT(obj, offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return attr_get(obj, name);
}

/* Replace a slot's value (a new reference to `value` is taken). */
static inline void
slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    SLOT(obj, offset) = Py_NewRef(value);
    Py_XDECREF(old);
}

/* threading.Lock's type and its acquire and release (method descriptors), called without
 * looking them up for a lock of exactly that type (_complete.c's module init). */
extern PyTypeObject *thread_lock_type;
extern PyObject *thread_lock_acquire, *thread_lock_release;
/* kclient.record._speedups.Lock, as configure() was given it (NULL: None), taken and given
 * without a call */
extern PyTypeObject *kclient_lock_type;

/* configure(ClientResponse, ProducerBatch, ProduceResult, RecordAccumulator,
 * IncompleteBatches, BufferPool, SUCCEEDED, duplicate_sequence_code, Lock)
 * (_complete_config.c). */
PyObject *kclient_complete_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* obj.name = value: at its slot offset for an object of exactly `type`, else setattr.
 * 0, or -1 with the exception. */
static inline int
typed_set(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name, PyObject *value)
{
    if (cfg.ready && Py_TYPE(obj) == type) {
        slot_set(obj, offset, value);
        return 0;
    }
    return PyObject_SetAttr(obj, name, value);
}

/* `with lock:`'s two halves: 0, or -1 with the exception. */
static inline int
lock_acquire(PyObject *lock)
{
    if (Py_TYPE(lock) == kclient_lock_type) {
        kclient_lock_take_inline((LockObject *)lock, -1);
        return 0;
    }
    if (Py_TYPE(lock) == thread_lock_type) {
        return done(PyObject_Vectorcall(thread_lock_acquire, &lock, 1, NULL));
    }
    return done(call0(lock, s_acquire));
}

static inline int
lock_release(PyObject *lock)
{
    if (Py_TYPE(lock) == kclient_lock_type) {
        if (!((LockObject *)lock)->locked) {
            PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
            return -1;
        }
        kclient_lock_give_inline((LockObject *)lock);
        return 0;
    }
    if (Py_TYPE(lock) == thread_lock_type) {
        return done(PyObject_Vectorcall(thread_lock_release, &lock, 1, NULL));
    }
    return done(call0(lock, s_release));
}

/* Release `lock` keeping the exception being raised (-1), or the release's own. */
static inline int
lock_release_raising(PyObject *lock)
{
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
    return -1;
}

/* ProduceResponses._complete_success for a batch of exactly ProducerBatch (_complete_batch.c). */
int kclient_complete_success(Answer *a, PyObject *batch, PyObject *base_offset,
                             PyObject *log_append_time_ms);

/* Readies TryAllocateMethod, IncompleteAddMethod and WatchMethod and adds them to the module
 * (_complete_locked.c); 0 or -1. */
int kclient_complete_locked_init(PyObject *module);

/* obj's `_lock` held around locked(obj, arg), as the Python's `with self._lock:`: its
 * answer (a new reference), or NULL with the exception. */
static inline PyObject *
under_lock(PyObject *obj, PyObject *arg, PyObject *(*locked)(PyObject *, PyObject *))
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject *lock = type == cfg.result ? typed_get(obj, cfg.result, cfg.r_lock, s_lock)
                     : type == cfg.pool ? typed_get(obj, cfg.pool, cfg.p_lock, s_lock)
                                        : typed_get(obj, cfg.incomplete, cfg.i_lock, s_lock);
    if (lock == NULL) {
        return NULL;
    }
    if (lock_acquire(lock) < 0) {
        Py_DECREF(lock);
        return NULL;
    }
    PyObject *answer = locked(obj, arg);
    if ((answer == NULL ? lock_release_raising(lock) : lock_release(lock)) < 0) {
        Py_CLEAR(answer);
    }
    Py_DECREF(lock);
    return answer;
}

#endif
