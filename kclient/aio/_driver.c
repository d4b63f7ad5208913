/*
 * kclient.aio._future's LoopDriver: the hot methods of loop_sender.py's PyLoopSender (the
 * reference) without Python frames: schedule, run_now, run, on_ready, _after_step. Its
 * state is the same attributes, kept in the object (members; the others, on_failure, in the
 * subclass's __dict__), so that the Python methods
 * of CLoopSender (LoopDriver + PyLoopSender: _failed, _end_turns, _scheduled_run,
 * _on_timer, turn, stop) read and write what these do. Every call into Python is the one
 * the reference makes, in the same order, with the same arguments.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"

#include <structmember.h>

#include "../_pycall.h"

#define MAX_WAIT_MS 3600000.0

typedef struct {
    PyObject_HEAD
    PyObject *loop;       /* _loop */
    PyObject *time;       /* _time: the loop's clock, seconds */
    PyObject *sender;     /* sender */
    PyObject *selector;   /* selector */
    PyObject *handle;     /* _handle: the scheduled step's, or None */
    PyObject *timer;      /* _timer */
    PyObject *turns;      /* _turns: a list */
    PyObject *pending;    /* pending: a list */
    PyObject *after_step; /* after_step */
    double timer_at;      /* _timer_at */
    Py_ssize_t steps;     /* _steps */
    char scheduled, running, stopped, dispatching;
} DriverObject;

static PyObject *str_run_once, *str_poll_network, *str_returned_events, *str_requested_timeout_ms,
    *str_failed, *str_end_turns, *str_scheduled_run, *str_on_timer, *str_call_at, *str_cancel;

/* A member read as an object: NULL (never set) is None. */
#define OR_NONE(p) ((p) != NULL ? (p) : Py_None)

static int
is_none(PyObject *p)
{
    return p == NULL || p == Py_None;
}

/* bool(obj) of a list member (a list, else its truth). */
static int
not_empty(PyObject *obj)
{
    if (obj == NULL) {
        return 0;
    }
    if (PyList_CheckExact(obj)) {
        return PyList_GET_SIZE(obj) > 0;
    }
    return PyObject_IsTrue(obj);
}

/* self._loop.call_soon(self._scheduled_run) into self._handle. */
static int
call_soon_step(DriverObject *self)
{
    PyObject *run = PyObject_GetAttr((PyObject *)self, str_scheduled_run);
    PyObject *handle = run == NULL ? NULL : call1(OR_NONE(self->loop), kaio_str_call_soon, run);
    Py_XDECREF(run);
    if (handle == NULL) {
        return -1;
    }
    Py_XSETREF(self->handle, handle);
    return 0;
}

static PyObject *
driver_schedule(DriverObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->scheduled && !self->stopped) {
        self->scheduled = 1;
        if (self->dispatching) { /* asked of the loop once the pass is over (_after_step) */
            Py_XSETREF(self->handle, Py_NewRef(Py_None));
        }
        else if (call_soon_step(self) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *
driver_after_step(DriverObject *self, PyObject *Py_UNUSED(ignored))
{
    char outer = self->dispatching;
    self->dispatching = 1;
    int rc = not_empty(self->pending);
    if (rc > 0) {
        rc = done(PyObject_CallNoArgs(OR_NONE(self->after_step)));
    }
    /* finally: */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    self->dispatching = outer;
    if (!outer && self->scheduled && is_none(self->handle) && !self->stopped) {
        if (call_soon_step(self) < 0) { /* its error replaces the pass's, as in Python */
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return NULL;
        }
    }
    PyErr_Restore(type, value, tb);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* A step raised (the error is set): self._failed(sender, exc), then the error again. */
static PyObject *
failed(DriverObject *self, PyObject *sender)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(value, tb);
    }
    PyObject *res = call2((PyObject *)self, str_failed, sender, value);
    if (res == NULL) { /* its own error, with the step's as its context */
        PyObject *type2, *value2, *tb2;
        PyErr_Fetch(&type2, &value2, &tb2);
        PyErr_NormalizeException(&type2, &value2, &tb2);
        PyException_SetContext(value2, Py_NewRef(value));
        PyErr_Restore(type2, value2, tb2);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    Py_DECREF(res);
    PyErr_Restore(type, value, tb);
    return NULL;
}

/* The step's call on the sender (`run_once` or `poll_network`), a step running meanwhile:
 * its result (a new reference), or NULL when it raised (the failure handled: see failed). */
static PyObject *
step_call(DriverObject *self, PyObject *name)
{
    PyObject *sender = self->sender;
    if (is_none(sender)) {
        PyErr_SetString(PyExc_AssertionError, "the driver has no sender");
        return NULL;
    }
    Py_INCREF(sender);
    self->running = 1;
    PyObject *result = call0(sender, name);
    if (result == NULL) {
        failed(self, sender);
    }
    Py_DECREF(sender);
    return result;
}

/* The step is over: its count (a task resumed by after_step may run another, which steps
 * then shows), the turns waiting for it ended, the pass after it (when it has something to
 * do). The step's count, or -1 with an exception. */
static Py_ssize_t
step_over(DriverObject *self)
{
    self->running = 0;
    Py_ssize_t steps = ++self->steps;
    int any = not_empty(self->turns);
    if (any < 0 || (any && done(call0((PyObject *)self, str_end_turns)) < 0)) {
        return -1;
    }
    any = not_empty(self->pending);
    if (any < 0) {
        return -1;
    }
    if (any || (self->scheduled && is_none(self->handle))) {
        if (done(driver_after_step(self, NULL)) < 0) {
            return -1;
        }
    }
    return steps;
}

static PyObject *
driver_run(DriverObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *timeout = step_call(self, str_run_once);
    if (timeout == NULL) {
        return NULL;
    }
    PyObject *selector = self->selector;
    if (!is_none(selector)) {
        /* I/O done in this step (a response, a connection): go round again at once, as the
         * Sender thread's loop does when its poll returns early */
        Py_INCREF(selector);
        int returned = attr_truth(selector, str_returned_events);
        Py_DECREF(timeout);
        timeout = returned < 0  ? NULL
                  : returned ? PyLong_FromLong(0)
                             : attr_get(selector, str_requested_timeout_ms);
        Py_DECREF(selector);
        if (timeout == NULL) {
            return NULL;
        }
    }
    Py_ssize_t steps = step_over(self);
    if (steps < 0 || self->steps != steps || self->stopped) {
        Py_DECREF(timeout);
        if (steps < 0) {
            return NULL;
        }
        Py_RETURN_NONE; /* a task resumed after the step ran another: its schedule stands */
    }
    double timeout_ms = PyFloat_AsDouble(timeout); /* exact for any int that matters */
    Py_DECREF(timeout);
    if (timeout_ms == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (timeout_ms <= 0) {
        return driver_schedule(self, NULL);
    }
    if (timeout_ms > MAX_WAIT_MS) {
        timeout_ms = MAX_WAIT_MS;
    }
    PyObject *now = PyObject_CallNoArgs(OR_NONE(self->time));
    double now_s = now == NULL ? -1.0 : PyFloat_AsDouble(now);
    Py_XDECREF(now);
    if (now == NULL || (now_s == -1.0 && PyErr_Occurred())) {
        return NULL;
    }
    double at = now_s + timeout_ms / 1000.0;
    if (at < self->timer_at) {
        if (!is_none(self->timer) && done(call0(self->timer, str_cancel)) < 0) {
            return NULL;
        }
        PyObject *when = PyFloat_FromDouble(at);
        PyObject *on_timer = PyObject_GetAttr((PyObject *)self, str_on_timer);
        PyObject *timer = NULL;
        if (when != NULL && on_timer != NULL) {
            timer = call2(OR_NONE(self->loop), str_call_at, when, on_timer);
        }
        Py_XDECREF(when);
        Py_XDECREF(on_timer);
        if (timer == NULL) {
            return NULL;
        }
        Py_XSETREF(self->timer, timer);
        self->timer_at = at;
    }
    Py_RETURN_NONE;
}

static PyObject *
driver_run_now(DriverObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->scheduled && !self->running && !self->stopped) {
        self->scheduled = 0;
        if (!is_none(self->handle)) {
            PyObject *handle = Py_NewRef(self->handle);
            int rc = done(call0(handle, str_cancel));
            Py_DECREF(handle);
            if (rc < 0) {
                return NULL;
            }
        }
        return driver_run(self, NULL);
    }
    Py_RETURN_NONE;
}

static PyObject *
driver_on_ready(DriverObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->running || self->stopped) {
        Py_RETURN_NONE;
    }
    PyObject *polled = step_call(self, str_poll_network);
    if (polled == NULL) {
        return NULL;
    }
    Py_DECREF(polled);
    Py_ssize_t steps = step_over(self);
    if (steps < 0) {
        return NULL;
    }
    if (self->steps == steps && !self->stopped) {
        return driver_schedule(self, NULL); /* the full step (unless a resumed task ran one) */
    }
    Py_RETURN_NONE;
}

static PyObject *
driver_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    DriverObject *self = (DriverObject *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->timer_at = Py_HUGE_VAL;
    }
    return (PyObject *)self;
}

static int
driver_traverse(DriverObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->loop);
    Py_VISIT(self->time);
    Py_VISIT(self->sender);
    Py_VISIT(self->selector);
    Py_VISIT(self->handle);
    Py_VISIT(self->timer);
    Py_VISIT(self->turns);
    Py_VISIT(self->pending);
    Py_VISIT(self->after_step);
    return 0;
}

static int
driver_clear(DriverObject *self)
{
    Py_CLEAR(self->loop);
    Py_CLEAR(self->time);
    Py_CLEAR(self->sender);
    Py_CLEAR(self->selector);
    Py_CLEAR(self->handle);
    Py_CLEAR(self->timer);
    Py_CLEAR(self->turns);
    Py_CLEAR(self->pending);
    Py_CLEAR(self->after_step);
    return 0;
}

static void
driver_dealloc(DriverObject *self)
{
    PyObject_GC_UnTrack(self);
    driver_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
driver_is_running(DriverObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->running);
}

static PyMethodDef driver_methods[] = {
    {"is_running", (PyCFunction)driver_is_running, METH_NOARGS, "Whether a step is running."},
    {"schedule", (PyCFunction)driver_schedule, METH_NOARGS, "Run a step soon."},
    {"run_now", (PyCFunction)driver_run_now, METH_NOARGS, "Run a step now instead of soon."},
    {"run", (PyCFunction)driver_run, METH_NOARGS, "One Sender.run_once, then the timer."},
    {"on_ready", (PyCFunction)driver_on_ready, METH_NOARGS, "A socket is ready."},
    {"_after_step", (PyCFunction)driver_after_step, METH_NOARGS, "The pass after a step."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef driver_members[] = {
    {"_loop", T_OBJECT, offsetof(DriverObject, loop), 0, NULL},
    {"_time", T_OBJECT, offsetof(DriverObject, time), 0, NULL},
    {"sender", T_OBJECT, offsetof(DriverObject, sender), 0, NULL},
    {"selector", T_OBJECT, offsetof(DriverObject, selector), 0, NULL},
    {"_handle", T_OBJECT, offsetof(DriverObject, handle), 0, NULL},
    {"_timer", T_OBJECT, offsetof(DriverObject, timer), 0, NULL},
    {"_turns", T_OBJECT, offsetof(DriverObject, turns), 0, NULL},
    {"pending", T_OBJECT, offsetof(DriverObject, pending), 0, NULL},
    {"after_step", T_OBJECT, offsetof(DriverObject, after_step), 0, NULL},
    {"_timer_at", T_DOUBLE, offsetof(DriverObject, timer_at), 0, NULL},
    {"_steps", T_PYSSIZET, offsetof(DriverObject, steps), 0, NULL},
    {"scheduled", T_BOOL, offsetof(DriverObject, scheduled), 0, NULL},
    {"running", T_BOOL, offsetof(DriverObject, running), 0, NULL},
    {"stopped", T_BOOL, offsetof(DriverObject, stopped), 0, NULL},
    {"_dispatching", T_BOOL, offsetof(DriverObject, dispatching), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kaio_DriverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.LoopDriver",
    .tp_doc = "The hot methods of loop_sender.PyLoopSender in C (a base of CLoopSender).",
    .tp_basicsize = sizeof(DriverObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = driver_new,
    .tp_dealloc = (destructor)driver_dealloc,
    .tp_traverse = (traverseproc)driver_traverse,
    .tp_clear = (inquiry)driver_clear,
    .tp_methods = driver_methods,
    .tp_members = driver_members,
};

int
kaio_driver_init(void)
{
#define INTERN(var, text)                                                                      \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_run_once, "run_once");
    INTERN(str_poll_network, "poll_network");
    INTERN(str_returned_events, "returned_events");
    INTERN(str_requested_timeout_ms, "requested_timeout_ms");
    INTERN(str_failed, "_failed");
    INTERN(str_end_turns, "_end_turns");
    INTERN(str_scheduled_run, "_scheduled_run");
    INTERN(str_on_timer, "_on_timer");
    INTERN(str_call_at, "call_at");
    INTERN(str_cancel, "cancel");
#undef INTERN
    return PyType_Ready(&kaio_DriverType);
}
