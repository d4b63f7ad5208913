/*
 * kclient.sender._step, the step's Python shell (see _step.c): RunOnceMethod and
 * PollNetworkMethod, method descriptors (kclient/_fallback_method.h) that replace
 * Sender.run_once and Sender.poll_network (the reference, in sender.py) without their
 * Python frames.
 *
 * run_once(): a Sender without a transaction manager (sender._tm and sender._txn None) reads
 * the clock once, sends (sender._send_data(now_ms)), polls the network client with the
 * timeout it returned and returns it, as the Python does; with a transaction manager (the
 * producer id, transactions) it is the Python method. poll_network(): the network client's
 * poll_ready(now_ms), then 0. Any other call (arguments) goes to the Python method.
 *
 * Threads: the Sender's (or the event loop's driving it), GIL held.
 */
#include "_step.h"
#include "../_fallback_method.h"

static PyObject *str_tm, *str_txn, *str_clock, *str_monotonic_ms, *str_send_data, *str_client,
    *str_poll, *str_poll_ready, *zero;

/* sender._clock.monotonic_ms(): a new reference, or NULL. */
static PyObject *
read_clock(PyObject *sender)
{
    PyObject *clock = attr_get(sender, str_clock);
    PyObject *now = clock == NULL ? NULL : call0(clock, str_monotonic_ms);
    Py_XDECREF(clock);
    return now;
}

static PyObject *
run_once_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    PyObject *sender = args[0];
    PyObject *tm = attr_get(sender, str_tm);
    PyObject *txn = tm == NULL ? NULL : attr_get(sender, str_txn);
    if (txn == NULL) {
        Py_XDECREF(tm);
        return NULL;
    }
    int plain = tm == Py_None && txn == Py_None;
    Py_DECREF(tm);
    Py_DECREF(txn);
    if (!plain) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    PyObject *now = read_clock(sender);
    if (now == NULL) {
        return NULL;
    }
    PyObject *send_data = attr_get(sender, str_send_data);
    PyObject *timeout = send_data == NULL ? NULL : PyObject_CallOneArg(send_data, now);
    Py_XDECREF(send_data);
    PyObject *client = timeout == NULL ? NULL : attr_get(sender, str_client);
    if (client == NULL || done(call2(client, str_poll, timeout, now)) < 0) {
        Py_CLEAR(timeout);
    }
    Py_XDECREF(client);
    Py_DECREF(now);
    return timeout;
}

static PyObject *
poll_network_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        return fallback_general(self, args, nargsf, kwnames);
    }
    PyObject *sender = args[0];
    PyObject *client = attr_get(sender, str_client);
    PyObject *now = client == NULL ? NULL : read_clock(sender);
    int status = now == NULL ? -1 : done(call1(client, str_poll_ready, now));
    Py_XDECREF(now);
    Py_XDECREF(client);
    return status < 0 ? NULL : Py_NewRef(zero);
}

static PyObject *
run_once_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)run_once_call, "O:RunOnceMethod");
}

static PyObject *
poll_network_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)poll_network_call,
                        "O:PollNetworkMethod");
}

static PyGetSetDef run_getset[] = {FALLBACK_GETSET};

static PyTypeObject RunOnceMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._step.RunOnceMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = run_getset,
    .tp_new = run_once_new,
};

static PyTypeObject PollNetworkMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.sender._step.PollNetworkMethod",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = run_getset,
    .tp_new = poll_network_new,
};

int
kstep_run_init(PyObject *module)
{
#define INTERN(var, text)                                                                      \
    if (var == NULL && (var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(str_tm, "_tm");
    INTERN(str_txn, "_txn");
    INTERN(str_clock, "_clock");
    INTERN(str_monotonic_ms, "monotonic_ms");
    INTERN(str_send_data, "_send_data");
    INTERN(str_client, "_client");
    INTERN(str_poll, "poll");
    INTERN(str_poll_ready, "poll_ready");
#undef INTERN
    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL) {
        return -1;
    }
    if (PyType_Ready(&RunOnceMethodType) < 0 || PyType_Ready(&PollNetworkMethodType) < 0 ||
        PyModule_AddObjectRef(module, "RunOnceMethod", (PyObject *)&RunOnceMethodType) < 0 ||
        PyModule_AddObjectRef(module, "PollNetworkMethod", (PyObject *)&PollNetworkMethodType) < 0) {
        return -1;
    }
    return 0;
}
