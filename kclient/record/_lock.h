/* kclient.record._speedups.Lock (_lock.c), for C code that takes it directly. */
#ifndef KCLIENT_LOCK_H
#define KCLIENT_LOCK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;
} LockObject;

extern PyTypeObject kclient_LockType;

/* kclient_lock_take and kclient_lock_give themselves, for other extension modules (which
 * get the type from kclient.record._speedups.Lock and check it before calling these). */
static inline int
kclient_lock_take_inline(LockObject *self, PY_TIMEOUT_T timeout_us)
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

static inline void
kclient_lock_give_inline(LockObject *self)
{
    self->locked = 0;
    PyThread_release_lock(self->lock);
}

/* Take the lock, waiting up to timeout_us (-1: forever) with the GIL released if another
 * thread holds it; 1 when taken, 0 on timeout. The GIL is held on entry and return. */
int kclient_lock_take(LockObject *self, PY_TIMEOUT_T timeout_us);

/* Release a lock this thread took. */
void kclient_lock_give(LockObject *self);

/* A new, free Lock (Lock() without the type call); NULL with the exception. */
PyObject *kclient_lock_create(void);

#endif
