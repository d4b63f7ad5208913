/*
 * kclient.sender._complete: three small methods of the send side that take a lock, in C —
 * BufferPool.try_allocate(size), IncompleteBatches.add(batch) and ProduceResult.watch(watcher)
 * (buffer_pool.py, incomplete.py, future.py keep them as the reference). Each is a method
 * descriptor over the Python method (kclient/_fallback_method.h): called with one positional
 * argument it does what the Python does, in the same order, under the same lock (its acquire
 * and release: `with`); any other call goes to the Python method.
 *
 * Threads: any (callers' threads for try_allocate and add, the event loop's for watch), GIL
 * held; a contended lock is waited for by its own acquire (GIL released).
 */
#include "_complete.h"
#include "../_fallback_method.h"

static PyObject *s_closed, *s_last_batch_id, *s_flush_id, *s_watchers_attr;

/* The single argument of a `method(obj, arg)` call, or NULL: the Python method's call. */
static inline int
one_argument(size_t nargsf, PyObject *kwnames)
{
    return PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL;
}

/* ---- BufferPool.try_allocate ---------------------------------------------------------- */

/* With the pool's lock held: Py_True with `size` taken, Py_False, or NULL. */
static PyObject *
try_allocate_locked(PyObject *pool, PyObject *size)
{
    PyObject *closed = typed_get(pool, cfg.pool, cfg.p_closed, s_closed);
    int refused = closed == NULL ? -1 : PyObject_IsTrue(closed);
    Py_XDECREF(closed);
    if (refused == 0) {
        PyObject *waiters = typed_get(pool, cfg.pool, cfg.p_waiters, s_waiters);
        refused = waiters == NULL ? -1 : PyObject_IsTrue(waiters);
        Py_XDECREF(waiters);
    }
    if (refused != 0) {
        return refused < 0 ? NULL : Py_NewRef(Py_False);
    }
    PyObject *available = typed_get(pool, cfg.pool, cfg.p_available, s_available);
    if (available == NULL) {
        return NULL;
    }
    PyObject *answer = NULL;
    int too_big = PyObject_RichCompareBool(size, available, Py_GT);
    if (too_big != 0) {
        answer = too_big < 0 ? NULL : Py_NewRef(Py_False);
    }
    else {
        PyObject *left = PyNumber_Subtract(available, size);
        if (left != NULL && typed_set(pool, cfg.pool, cfg.p_available, s_available, left) == 0) {
            answer = Py_NewRef(Py_True);
        }
        Py_XDECREF(left);
    }
    Py_DECREF(available);
    return answer;
}

static PyObject *
try_allocate_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!one_argument(nargsf, kwnames)) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    return under_lock(args[0], args[1], try_allocate_locked);
}

static PyObject *
try_allocate_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)try_allocate_call,
                        "O:TryAllocateMethod");
}

/* ---- IncompleteBatches.add -------------------------------------------------------------- */

/* With the lock held: the batch joins the set and raises the last batch id. None, or NULL. */
static PyObject *
add_locked(PyObject *incomplete, PyObject *batch)
{
    PyObject *batches = typed_get(incomplete, cfg.incomplete, cfg.i_batches, s_batches);
    if (batches == NULL) {
        return NULL;
    }
    int status = PySet_CheckExact(batches) ? PySet_Add(batches, batch)
                                           : done(call1(batches, s_add, batch));
    Py_DECREF(batches);
    if (status < 0) {
        return NULL;
    }
    PyObject *last = typed_get(incomplete, cfg.incomplete, cfg.i_last_batch_id, s_last_batch_id);
    PyObject *id = last == NULL                                   ? NULL
                   : cfg.ready && Py_TYPE(batch) == cfg.batch && SLOT(batch, cfg.b_flush_id) != NULL
                       ? Py_NewRef(SLOT(batch, cfg.b_flush_id))
                       : PyObject_GetAttr(batch, s_flush_id);
    int newer = id == NULL ? -1 : PyObject_RichCompareBool(id, last, Py_GT); /* max() */
    status = newer < 0 ? -1
                       : typed_set(incomplete, cfg.incomplete, cfg.i_last_batch_id, s_last_batch_id,
                                   newer ? id : last);
    Py_XDECREF(last);
    Py_XDECREF(id);
    return status < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *
add_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!one_argument(nargsf, kwnames)) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    return under_lock(args[0], args[1], add_locked);
}

static PyObject *
add_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)add_call, "O:IncompleteAddMethod");
}

/* ---- ProduceResult.watch ---------------------------------------------------------------- */

/* With the lock held: Py_True with the watcher registered, Py_False when done or split, or
 * NULL. */
static PyObject *
watch_locked(PyObject *result, PyObject *watcher)
{
    PyObject *watchers = cfg.ready && Py_TYPE(result) == cfg.result && SLOT(result, cfg.r_watchers) != NULL
                             ? Py_NewRef(SLOT(result, cfg.r_watchers))
                             : PyObject_GetAttr(result, s_watchers_attr);
    if (watchers == NULL) {
        return NULL;
    }
    PyObject *answer = Py_False;
    if (watchers != Py_None) {
        int status = PyList_CheckExact(watchers) ? PyList_Append(watchers, watcher)
                                                 : done(call1(watchers, s_append, watcher));
        answer = status < 0 ? NULL : Py_True;
    }
    Py_DECREF(watchers);
    return Py_XNewRef(answer);
}

static PyObject *
watch_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!one_argument(nargsf, kwnames)) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    return under_lock(args[0], args[1], watch_locked);
}

static PyObject *
watch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)watch_call, "O:WatchMethod");
}

/* ---- the types ---------------------------------------------------------------------------- */

static PyGetSetDef locked_getset[] = {FALLBACK_GETSET};

static PyTypeObject TryAllocateMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._complete.TryAllocateMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = locked_getset,
    .tp_new = try_allocate_new,
};

static PyTypeObject IncompleteAddMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._complete.IncompleteAddMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = locked_getset,
    .tp_new = add_new,
};

static PyTypeObject WatchMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._complete.WatchMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = locked_getset,
    .tp_new = watch_new,
};

int
kclient_complete_locked_init(PyObject *module)
{
    s_closed = PyUnicode_InternFromString("_closed");
    s_last_batch_id = PyUnicode_InternFromString("_last_batch_id");
    s_flush_id = PyUnicode_InternFromString("flush_id");
    s_watchers_attr = PyUnicode_InternFromString("_watchers");
    if (s_closed == NULL || s_last_batch_id == NULL || s_flush_id == NULL ||
        s_watchers_attr == NULL) {
        return -1;
    }
    struct {
        PyTypeObject *type;
        const char *name;
    } types[] = {
        {&TryAllocateMethodType, "TryAllocateMethod"},
        {&IncompleteAddMethodType, "IncompleteAddMethod"},
        {&WatchMethodType, "WatchMethod"},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i].type) < 0 ||
            PyModule_AddObjectRef(module, types[i].name, (PyObject *)types[i].type) < 0) {
            return -1;
        }
    }
    return 0;
}
