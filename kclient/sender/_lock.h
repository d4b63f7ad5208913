/* kclient.sender._speedups.Lock (_lock.c), for the Appender, which takes it directly. */
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

/* Take the lock, waiting up to timeout_us (-1: forever) with the GIL released if another
 * thread holds it; 1 when taken, 0 on timeout. The GIL is held on entry and return. */
int kclient_lock_take(LockObject *self, PY_TIMEOUT_T timeout_us);

/* Release a lock this thread took. */
void kclient_lock_give(LockObject *self);

#endif
