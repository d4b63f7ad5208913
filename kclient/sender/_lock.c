/*
 * kclient.sender._speedups.Lock: a mutex with threading.Lock's API (acquire(blocking,
 * timeout), release, locked, a context manager) that C code takes without a Python call
 * (kclient_lock_take/give, _lock.h): each TopicQueues' lock when the accelerator is built,
 * taken by the Appender (_append.c) in C and by the Sender with `with`.
 *
 * Threads: any; a contended lock is waited for with the GIL released. Unlike
 * threading.Lock, a wait is not interrupted by signals (the lock is held for one append).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_lock.h"

/* Take the lock, waiting up to timeout_us (-1: forever) with the GIL released if it is
 * held elsewhere; 1 when taken. */
int
kclient_lock_take(LockObject *self, PY_TIMEOUT_T timeout_us)
{
    PyLockStatus status = PyThread_acquire_lock_timed(self->lock, 0, 0);
    if (status != PY_LOCK_ACQUIRED && timeout_us != 0) {
        Py_BEGIN_ALLOW_THREADS
        status = PyThread_acquire_lock_timed(self->lock, timeout_us, 0);
        Py_END_ALLOW_THREADS
    }
    if (status == PY_LOCK_ACQUIRED) {
        self->locked = 1;
        return 1;
    }
    return 0;
}

void
kclient_lock_give(LockObject *self)
{
    self->locked = 0;
    PyThread_release_lock(self->lock);
}

static PyObject *
lock_acquire(LockObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    PY_TIMEOUT_T timeout_us;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pd:acquire", names, &blocking, &timeout)) {
        return NULL;
    }
    if (!blocking) {
        if (timeout != -1) {
            PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
            return NULL;
        }
        timeout_us = 0;
    }
    else if (timeout < 0) {
        if (timeout != -1) {
            PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
            return NULL;
        }
        timeout_us = -1;
    }
    else {
        double us = timeout * 1e6;
        timeout_us = us >= (double)PY_TIMEOUT_MAX ? PY_TIMEOUT_MAX : (PY_TIMEOUT_T)us;
    }
    return PyBool_FromLong(kclient_lock_take(self, timeout_us));
}

static PyObject *
lock_enter(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    kclient_lock_take(self, -1);
    Py_RETURN_TRUE;
}

static PyObject *
lock_release(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    kclient_lock_give(self);
    Py_RETURN_NONE;
}

static PyObject *
lock_exit(LockObject *self, PyObject *Py_UNUSED(args))
{
    return lock_release(self, NULL);
}

static PyObject *
lock_locked(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->locked);
}

static PyObject *
lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void
lock_dealloc(LockObject *self)
{
    if (self->lock != NULL) {
        if (self->locked) {
            PyThread_release_lock(self->lock);
        }
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> True when taken"},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "Release; RuntimeError if unlocked."},
    {"locked", (PyCFunction)lock_locked, METH_NOARGS, "Whether the lock is held."},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, "acquire()"},
    {"__exit__", (PyCFunction)lock_exit, METH_VARARGS, "release()"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject kclient_LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._speedups.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A mutex with threading.Lock's API that Appender.append takes in C.",
    .tp_methods = lock_methods,
    .tp_new = lock_new,
};

