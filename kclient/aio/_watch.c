/*
 * kclient.aio._future's Tracker and BatchWatch: a batch's group of record futures, made and
 * settled without a Python frame (completions.py's _track/_new_group and _BatchWatch are the
 * reference, and the path for everything unusual).
 *
 * Tracker(completions, groups, loop, pending, in_step) is BatchCompletions.track in C, with
 * the references it needs read once (completions._groups, its loop, completions.pending, its
 * in_step). tracker(record): the Ready of a new RecordFuture whose row goes to its batch's
 * group (groups[record._produce_result]). The first record of a batch makes the group and
 * a BatchWatch over its ProduceResult (result.watch(...)); a result already done or
 * superseded goes to completions._new_group.
 *
 * BatchWatch(tracker, result)._notify() (also _watch): the batch completed. Its group is
 * popped and settled (settle_ok or settle_error, callbacks to pending); then, if callbacks
 * are pending and no Sender step is running (in_step()), completions._settled() runs them.
 * A split batch, record errors or a missing group go to completions._settle. An Exception
 * on the way goes to completions._settle_failed(result, exc) (logged there): settling never
 * takes the Sender's step down.
 *
 * The record's and the result's fields are read at their __slots__ offsets (kaio_attr),
 * as getattr would find them.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"
#include "../_pycall.h" /* take_truth */

static PyObject *str_settle, *str_settled, *str_settle_failed, *str_new_group, *str_watch;

typedef struct {
    PyObject_HEAD
    PyObject *completions;
    PyObject *groups;
    PyObject *loop;
    PyObject *pending;
    PyObject *in_step;
    vectorcallfunc vectorcall; /* tracker_call */
} TrackerObject;

typedef struct {
    PyObject_HEAD
    TrackerObject *tracker;
    PyObject *result;
} WatchObject;

static int
watch_traverse(WatchObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tracker);
    Py_VISIT(self->result);
    return 0;
}

static int
watch_clear(WatchObject *self)
{
    Py_CLEAR(self->tracker);
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
watch_create(PyTypeObject *type, PyObject *tracker, PyObject *result)
{
    WatchObject *self = PyObject_GC_New(WatchObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->tracker = (TrackerObject *)Py_NewRef(tracker);
    self->result = Py_NewRef(result);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
watch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *tracker, *result;
    if (!PyArg_ParseTuple(args, "O!O:BatchWatch", &kaio_TrackerType, &tracker, &result)) {
        return NULL;
    }
    return watch_create(type, tracker, result);
}

/* The result's field i (P_...) as a truth value: 1, 0, -1 with an exception. */
static int
result_truth(PyObject *result, int i)
{
    return take_truth(kaio_result_attr(result, i));
}

/* Whether the group must take completions._settle (the Python): 1 yes, 0 no, -1 error. */
static int
unusual(PyObject *result)
{
    int split = result_truth(result, P_SUPERSEDED);
    if (split != 0) {
        return split;
    }
    PyObject *record_errors = kaio_result_attr(result, P_RECORD_ERRORS);
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
    PyObject *error = kaio_result_attr(result, P_ERROR);
    if (error == NULL) {
        return -1;
    }
    PyObject *done;
    if (error != Py_None) {
        PyObject *args[3] = {rows, error, pending};
        done = aio_settle_error(NULL, args, 3);
    }
    else {
        PyObject *tp = kaio_result_attr(result, P_TP);
        PyObject *base = kaio_result_attr(result, P_BASE_OFFSET);
        PyObject *append = kaio_result_attr(result, P_LOG_APPEND_TIME_MS);
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
    TrackerObject *tracker = self->tracker;
    PyObject *completions = tracker->completions, *groups = tracker->groups;
    PyObject *result = self->result;
    int slow = unusual(result);
    if (slow < 0) {
        return -1;
    }
    PyObject *rows = NULL;
    if (!slow) {
        rows = PyDict_GetItemWithError(groups, result);
        if (rows == NULL && PyErr_Occurred()) {
            return -1;
        }
        slow = rows == NULL;
    }
    if (slow) { /* the Python: a split batch, record errors, no group */
        PyObject *done = PyObject_CallMethodOneArg(completions, str_settle, result);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    Py_INCREF(rows);
    int rc = PyDict_DelItem(groups, result);
    PyObject *pending = tracker->pending;
    if (rc == 0) {
        rc = settle_rows(result, rows, pending);
    }
    if (rc == 0 && PyList_GET_SIZE(pending) > 0) {
        /* completions._settled(): only outside a Sender step does it do anything */
        PyObject *running = PyObject_CallNoArgs(tracker->in_step);
        int inside = running == NULL ? -1 : PyObject_IsTrue(running);
        Py_XDECREF(running);
        rc = inside < 0 ? -1 : 0;
        if (inside == 0) {
            PyObject *done = PyObject_CallMethodNoArgs(completions, str_settled);
            Py_XDECREF(done);
            rc = done == NULL ? -1 : 0;
        }
    }
    Py_DECREF(rows);
    return rc;
}

static PyObject *
watch_notify(WatchObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->tracker == NULL) {
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
    PyObject *args[3] = {self->tracker->completions, self->result, exc};
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

/* ---- Tracker ------------------------------------------------------------------------- */

static int
tracker_traverse(TrackerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->completions);
    Py_VISIT(self->groups);
    Py_VISIT(self->loop);
    Py_VISIT(self->pending);
    Py_VISIT(self->in_step);
    return 0;
}

static int
tracker_clear(TrackerObject *self)
{
    Py_CLEAR(self->completions);
    Py_CLEAR(self->groups);
    Py_CLEAR(self->loop);
    Py_CLEAR(self->pending);
    Py_CLEAR(self->in_step);
    return 0;
}

static void
tracker_dealloc(TrackerObject *self)
{
    PyObject_GC_UnTrack(self);
    tracker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
tracker_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "track(record)");
        return NULL;
    }
    return kaio_tracker_track(self, args[0], 1);
}

static PyObject *
tracker_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *completions, *groups, *loop, *pending, *in_step;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Tracker() takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!OO!O:Tracker", &completions, &PyDict_Type, &groups, &loop,
                          &PyList_Type, &pending, &in_step)) {
        return NULL;
    }
    if (!PyDict_CheckExact(groups) || !PyList_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "Tracker(): groups must be a dict, pending a list");
        return NULL;
    }
    TrackerObject *self = PyObject_GC_New(TrackerObject, type);
    if (self == NULL) {
        return NULL;
    }
    self->completions = Py_NewRef(completions);
    self->groups = Py_NewRef(groups);
    self->loop = Py_NewRef(loop);
    self->pending = Py_NewRef(pending);
    self->in_step = Py_NewRef(in_step);
    self->vectorcall = tracker_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* The group (a new reference) of the first record of a batch, made and watched; NULL with
 * no exception when completions._new_group must answer (the result already done or
 * superseded: not expected, completions come later). */
static PyObject *
new_group(TrackerObject *self, PyObject *result)
{
    int slow = result_truth(result, P_DONE);
    if (slow == 0) {
        slow = result_truth(result, P_SUPERSEDED);
    }
    if (slow != 0) {
        return NULL;
    }
    PyObject *rows = PyList_New(0);
    if (rows == NULL) {
        return NULL;
    }
    int rc = PyDict_SetItem(self->groups, result, rows);
    PyObject *watch = rc < 0 ? NULL : watch_create(&kaio_WatchType, (PyObject *)self, result);
    PyObject *watching = watch == NULL ? NULL : PyObject_CallMethodOneArg(result, str_watch, watch);
    Py_XDECREF(watch);
    if (watching == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    Py_DECREF(watching);
    return rows;
}

/* tracker(record) -> Ready(future): BatchCompletions.track. With `ready` 0, the future
 * itself (send_and_wait's: it awaits it at once). */
PyObject *
kaio_tracker_track(PyObject *tracker, PyObject *record, int ready)
{
    TrackerObject *self = (TrackerObject *)tracker;
    PyObject *result = kaio_record_attr(record, R_PRODUCE_RESULT);
    if (result == NULL) {
        return NULL;
    }
    PyObject *rows = PyDict_GetItemWithError(self->groups, result);
    if (rows != NULL) {
        Py_INCREF(rows);
    }
    else if (!PyErr_Occurred()) {
        rows = new_group(self, result);
    }
    Py_DECREF(result);
    if (rows == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        PyObject *made = PyObject_CallMethodOneArg(self->completions, str_new_group, record);
        if (made == NULL || ready) {
            return made;
        }
        if (Py_TYPE(made) != &kaio_ReadyType) {
            Py_DECREF(made);
            PyErr_SetString(PyExc_TypeError, "completions._new_group must give a Ready");
            return NULL;
        }
        PyObject *future = Py_NewRef(ready_value(made));
        Py_DECREF(made);
        return future;
    }
    PyObject *made = kaio_track_row(rows, self->loop, record, ready);
    Py_DECREF(rows);
    return made;
}

PyTypeObject kaio_TrackerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.Tracker",
    .tp_doc = "Tracker(completions, groups, loop, pending, in_step): BatchCompletions.track "
              "in C; tracker(record) -> Ready(future).",
    .tp_basicsize = sizeof(TrackerObject),
    .tp_vectorcall_offset = offsetof(TrackerObject, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = tracker_new,
    .tp_dealloc = (destructor)tracker_dealloc,
    .tp_traverse = (traverseproc)tracker_traverse,
    .tp_clear = (inquiry)tracker_clear,
    .tp_call = PyVectorcall_Call,
};

int
kaio_watch_init(void)
{
#define INTERN(var, text)                                                                      \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_settle, "_settle");
    INTERN(str_settled, "_settled");
    INTERN(str_settle_failed, "_settle_failed");
    INTERN(str_new_group, "_new_group");
    INTERN(str_watch, "watch");
#undef INTERN
    return PyType_Ready(&kaio_WatchType) < 0 ? -1 : PyType_Ready(&kaio_TrackerType);
}
