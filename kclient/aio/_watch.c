/*
 * kclient.aio._future's BatchWatch and new_group: a batch's group of record futures, made
 * and settled without a Python frame (completions.py's _BatchWatch and _new_group are the
 * reference, and the path for everything unusual).
 *
 * new_group(completions, record): track() of the first record of a batch. The batch gets
 * a group (completions._groups[result] = []) and a BatchWatch over its ProduceResult
 * (result.watch(...)); then completions.track(record). A result already done or
 * superseded goes to completions._new_group.
 *
 * BatchWatch(completions, result)._notify() (also _watch): the batch completed. Its group
 * is popped and settled (settle_ok or settle_error, callbacks to completions.pending);
 * then, if callbacks are pending and no Sender step is running (completions._in_step()),
 * completions._settled() runs them. A split batch, record errors or a missing group go to
 * completions._settle. An Exception on the way goes to completions._settle_failed(result,
 * exc) (logged there): settling never takes the Sender's step down.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"

static PyObject *str_groups, *str_pending, *str_settle, *str_settled, *str_in_step,
    *str_settle_failed, *str_new_group, *str_track, *str_watch, *str_superseded,
    *str_record_errors, *str_error, *str_tp, *str_base_offset, *str_log_append_time_ms,
    *str_done;

typedef struct {
    PyObject_HEAD
    PyObject *completions;
    PyObject *result;
} WatchObject;

static int
watch_traverse(WatchObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->completions);
    Py_VISIT(self->result);
    return 0;
}

static int
watch_clear(WatchObject *self)
{
    Py_CLEAR(self->completions);
    Py_CLEAR(self->result);
    return 0;
}

static void
watch_dealloc(WatchObject *self)
{
    PyObject_GC_UnTrack(self);
    watch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
watch_create(PyTypeObject *type, PyObject *completions, PyObject *result)
{
    WatchObject *self = PyObject_GC_New(WatchObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->completions = Py_NewRef(completions);
    self->result = Py_NewRef(result);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
watch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *completions, *result;
    if (!PyArg_ParseTuple(args, "OO:BatchWatch", &completions, &result)) {
        return NULL;
    }
    return watch_create(type, completions, result);
}

/* Whether the group must take completions._settle (the Python): 1 yes, 0 no, -1 error. */
static int
unusual(PyObject *result)
{
    PyObject *superseded = PyObject_GetAttr(result, str_superseded);
    if (superseded == NULL) {
        return -1;
    }
    int split = PyObject_IsTrue(superseded);
    Py_DECREF(superseded);
    if (split != 0) {
        return split;
    }
    PyObject *record_errors = PyObject_GetAttr(result, str_record_errors);
    if (record_errors == NULL) {
        return -1;
    }
    int some = record_errors != Py_None;
    Py_DECREF(record_errors);
    return some;
}

/* settle_ok/settle_error of rows by result's outcome, callbacks to pending. */
static int
settle_rows(PyObject *result, PyObject *rows, PyObject *pending)
{
    PyObject *error = PyObject_GetAttr(result, str_error);
    if (error == NULL) {
        return -1;
    }
    PyObject *done;
    if (error != Py_None) {
        PyObject *args[3] = {rows, error, pending};
        done = aio_settle_error(NULL, args, 3);
    }
    else {
        PyObject *tp = PyObject_GetAttr(result, str_tp);
        PyObject *base = PyObject_GetAttr(result, str_base_offset);
        PyObject *append = PyObject_GetAttr(result, str_log_append_time_ms);
        done = NULL;
        if (tp != NULL && base != NULL && append != NULL) {
            if (PyTuple_Check(tp) && PyTuple_GET_SIZE(tp) == 2) { /* a TopicPartition */
                PyObject *args[6] = {rows, PyTuple_GET_ITEM(tp, 0), PyTuple_GET_ITEM(tp, 1),
                                     base, append, pending};
                done = aio_settle_ok(NULL, args, 6);
            }
            else {
                PyErr_SetString(PyExc_TypeError, "a ProduceResult's tp must be a TopicPartition");
            }
        }
        Py_XDECREF(tp);
        Py_XDECREF(base);
        Py_XDECREF(append);
    }
    Py_DECREF(error);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* The common case of _notify; -1 with an exception set on error. */
static int
notify(WatchObject *self)
{
    PyObject *completions = self->completions, *result = self->result;
    int slow = unusual(result);
    if (slow < 0) {
        return -1;
    }
    PyObject *groups = PyObject_GetAttr(completions, str_groups);
    if (groups == NULL) {
        return -1;
    }
    PyObject *rows = NULL;
    if (!slow) {
        if (!PyDict_CheckExact(groups)) {
            Py_DECREF(groups);
            PyErr_SetString(PyExc_TypeError, "BatchCompletions._groups must be a dict");
            return -1;
        }
        rows = PyDict_GetItemWithError(groups, result);
        if (rows == NULL && PyErr_Occurred()) {
            Py_DECREF(groups);
            return -1;
        }
        slow = rows == NULL;
    }
    if (slow) { /* the Python: a split batch, record errors, no group */
        Py_DECREF(groups);
        PyObject *done = PyObject_CallMethodOneArg(completions, str_settle, result);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    Py_INCREF(rows);
    int rc = PyDict_DelItem(groups, result);
    Py_DECREF(groups);
    PyObject *pending = rc < 0 ? NULL : PyObject_GetAttr(completions, str_pending);
    if (pending != NULL) {
        rc = settle_rows(result, rows, pending);
        if (rc == 0 && PyList_Check(pending) && PyList_GET_SIZE(pending) > 0) {
            /* completions._settled(): only outside a Sender step does it do anything */
            PyObject *in_step = PyObject_GetAttr(completions, str_in_step);
            PyObject *running = in_step == NULL ? NULL : PyObject_CallNoArgs(in_step);
            Py_XDECREF(in_step);
            int inside = running == NULL ? -1 : PyObject_IsTrue(running);
            Py_XDECREF(running);
            rc = inside < 0 ? -1 : 0;
            if (inside == 0) {
                PyObject *done = PyObject_CallMethodNoArgs(completions, str_settled);
                Py_XDECREF(done);
                rc = done == NULL ? -1 : 0;
            }
        }
        Py_DECREF(pending);
    }
    else {
        rc = -1;
    }
    Py_DECREF(rows);
    return rc;
}

static PyObject *
watch_notify(WatchObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->completions == NULL) {
        Py_RETURN_NONE;
    }
    if (notify(self) == 0) {
        Py_RETURN_NONE;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return NULL; /* KeyboardInterrupt, SystemExit: not ours to swallow */
    }
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyObject *args[3] = {self->completions, self->result, exc};
    PyObject *done = PyObject_VectorcallMethod(str_settle_failed, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(exc);
    if (done == NULL) {
        return NULL;
    }
    Py_DECREF(done);
    Py_RETURN_NONE;
}

static PyMethodDef watch_methods[] = {
    {"_notify", (PyCFunction)watch_notify, METH_NOARGS, "The batch completed: settle its group."},
    {"_watch", (PyCFunction)watch_notify, METH_NOARGS, "The batch was split: follow its records."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject kaio_WatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.BatchWatch",
    .tp_doc = "A group's watch over its batch (completions._BatchWatch, in C).",
    .tp_basicsize = sizeof(WatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = watch_new,
    .tp_dealloc = (destructor)watch_dealloc,
    .tp_traverse = (traverseproc)watch_traverse,
    .tp_clear = (inquiry)watch_clear,
    .tp_methods = watch_methods,
};

/* Whether result is done or superseded (then completions._new_group answers): 1, 0, -1. */
static int
settled_already(PyObject *result)
{
    PyObject *done = PyObject_GetAttr(result, str_done);
    if (done == NULL) {
        return -1;
    }
    int is_done = PyObject_IsTrue(done);
    Py_DECREF(done);
    if (is_done != 0) {
        return is_done;
    }
    PyObject *superseded = PyObject_GetAttr(result, str_superseded);
    if (superseded == NULL) {
        return -1;
    }
    int split = PyObject_IsTrue(superseded);
    Py_DECREF(superseded);
    return split;
}

PyObject *
aio_new_group(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "new_group(completions, record)");
        return NULL;
    }
    PyObject *completions = args[0], *record = args[1];
    PyObject *result = PyObject_GetAttr(record, kaio_str_produce_result);
    if (result == NULL) {
        return NULL;
    }
    int slow = settled_already(result);
    PyObject *groups = slow ? NULL : PyObject_GetAttr(completions, str_groups);
    if (slow < 0 || (!slow && groups == NULL)) {
        Py_DECREF(result);
        return NULL;
    }
    if (slow || !PyDict_CheckExact(groups)) { /* not expected: completions come later */
        Py_XDECREF(groups);
        Py_DECREF(result);
        return PyObject_CallMethodOneArg(completions, str_new_group, record);
    }
    PyObject *rows = PyList_New(0);
    int rc = rows == NULL ? -1 : PyDict_SetItem(groups, result, rows);
    Py_XDECREF(rows);
    Py_DECREF(groups);
    PyObject *watch = rc < 0 ? NULL : watch_create(&kaio_WatchType, completions, result);
    PyObject *watching = watch == NULL ? NULL : PyObject_CallMethodOneArg(result, str_watch, watch);
    Py_XDECREF(watch);
    Py_DECREF(result);
    if (watching == NULL) {
        return NULL;
    }
    Py_DECREF(watching);
    PyObject *track = PyObject_GetAttr(completions, str_track);
    if (track == NULL) {
        return NULL;
    }
    PyObject *ready = PyObject_CallOneArg(track, record);
    Py_DECREF(track);
    return ready;
}

int
kaio_watch_init(void)
{
#define INTERN(var, text)                                                                      \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_groups, "_groups");
    INTERN(str_pending, "pending");
    INTERN(str_settle, "_settle");
    INTERN(str_settled, "_settled");
    INTERN(str_in_step, "_in_step");
    INTERN(str_settle_failed, "_settle_failed");
    INTERN(str_new_group, "_new_group");
    INTERN(str_track, "track");
    INTERN(str_watch, "watch");
    INTERN(str_superseded, "superseded");
    INTERN(str_record_errors, "record_errors");
    INTERN(str_error, "error");
    INTERN(str_tp, "tp");
    INTERN(str_base_offset, "base_offset");
    INTERN(str_log_append_time_ms, "log_append_time_ms");
    INTERN(str_done, "done");
#undef INTERN
    return PyType_Ready(&kaio_WatchType);
}
