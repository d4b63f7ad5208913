/*
 * kclient.network._channel's selector part: KSelector's poll, send and is_channel_ready
 * (kclient/network/selector.py) and LoopSelector's select (kclient/aio/loop_selector.py)
 * without a Python frame in their common case.
 *
 * PyKSelector and LoopSelector stay the reference. SelectorPoll, ChannelReady and LoopSelect
 * are method descriptors over those Python functions (_fallback_method.h): a call they cannot
 * take (another signature, a closed selector, a connection being set up or reported, a send
 * still being written) goes to the Python function whole, before anything was done. Once
 * under way, whatever is unusual is handed to the Python method that does it: a channel
 * still connecting (_handle_events), a failed read or write (_io_failed, _write_failed), an
 * interest that changes (_set_interest), an idle check that is due (_maybe_close_idle), the
 * waker (_drain_wakeup). Attributes are read by name, so any channel type works (the C
 * channel's read and write are its methods). Same state, results and errors as the Python
 * (tested against each other). One thread: the selector's owner, GIL held.
 */
#include "_selector.h"

#include <stddef.h>

#include "../_fallback_method.h"

/* ---- KSelector.poll ------------------------------------------------------------------------ */

/* self.name = a new empty list (dict) if it holds anything: callers may keep the old one. */
static int
renew(PyObject *self, int field, int as_dict)
{
    int full = field_truth(self, field);
    if (full <= 0) {
        return full;
    }
    PyObject *fresh = as_dict ? PyDict_New() : PyList_New(0);
    if (fresh == NULL) {
        return -1;
    }
    int result = field_set(self, field, fresh);
    Py_DECREF(fresh);
    return result;
}

/* Whether any send in completed_sends completes a request by being written (acks=0). */
static int
any_send_complete(PyObject *self)
{
    PyObject *sends = field_get(self, F_COMPLETED_SENDS);
    PyObject *it = sends ? PyObject_GetIter(sends) : NULL;
    Py_XDECREF(sends);
    if (it == NULL) {
        return -1;
    }
    int found = 0;
    PyObject *send;
    while (!found && (send = PyIter_Next(it)) != NULL) {
        int awaits = attr_truth(send, str_awaits_response);
        Py_DECREF(send);
        found = awaits < 0 ? -1 : !awaits;
    }
    Py_DECREF(it);
    return found < 0 || PyErr_Occurred() ? -1 : found;
}

/* release_all(self.release_before_select). */
static int
release_gates(PyObject *self)
{
    PyObject *gates = field_get(self, F_RELEASE_BEFORE_SELECT);
    if (gates == NULL) {
        return -1;
    }
    int full = PyObject_IsTrue(gates), result = full < 0 ? -1 : 0;
    if (full > 0) {
        PyObject *it = PyObject_GetIter(gates), *gate;
        result = it == NULL ? -1 : 0;
        while (result == 0 && (gate = PyIter_Next(it)) != NULL) {
            result = done(call0(gate, str_release));
            Py_DECREF(gate);
        }
        Py_XDECREF(it);
        if (result == 0 && PyErr_Occurred()) {
            result = -1;
        }
        if (result == 0) {
            result = done(call0(gates, s_clear));
        }
    }
    Py_DECREF(gates);
    return result;
}

/* One (key, mask) of select's answer: unpacked as `for key, mask in events` does. */
static int
unpack_event(PyObject *item, PyObject **key, PyObject **mask)
{
    PyObject *pair = PyTuple_CheckExact(item) ? Py_NewRef(item) : PySequence_Tuple(item);
    if (pair == NULL) {
        return -1;
    }
    if (PyTuple_GET_SIZE(pair) != 2) {
        Py_ssize_t got = PyTuple_GET_SIZE(pair);
        Py_DECREF(pair);
        if (got > 2) {
            PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
        }
        else {
            PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 2, got %zd)",
                         got);
        }
        return -1;
    }
    *key = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    *mask = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    Py_DECREF(pair);
    return 0;
}

/* One ready channel: as poll's loop body. */
static int
handle_key(PyObject *self, PyObject *key, PyObject *mask, PyObject *now)
{
    PyObject *channel = PyObject_GetAttr(key, s_data);
    if (channel == NULL) {
        return -1;
    }
    if (channel == Py_None) {
        Py_DECREF(channel);
        return done(call0(self, s_drain_wakeup));
    }
    int result = -1;
    PyObject *node_id = field_get(channel, F_CH_NODE_ID);
    if (node_id == NULL) {
        goto out;
    }
    int current = is_current(self, node_id, channel);
    if (current <= 0) {
        result = current;
        goto out;
    }
    if (idle_update(self, node_id, now) < 0 || handle_events(self, channel, node_id, mask) < 0) {
        goto out;
    }
    current = is_current(self, node_id, channel);
    result = current <= 0 ? current : set_interest(self, channel);
out:
    Py_XDECREF(node_id);
    Py_DECREF(channel);
    return result;
}

/* The work before select, when there is nothing unusual to do: 1 with *timeout_ms for select;
 * 0 when the Python poll must run instead (nothing was done); -1. */
static int
before_select(PyObject *self, long long *timeout_ms)
{
    int unusual[4] = {F_CLOSED, F_IMMEDIATELY_CONNECTED, F_EARLY_FAILURES, F_SENDING};
    for (int i = 0; i < 4; i++) {
        int set = field_truth(self, unusual[i]);
        if (set != 0) {
            return set < 0 ? -1 : 0;
        }
    }
    if (renew(self, F_COMPLETED_SENDS, 0) < 0 || renew(self, F_COMPLETED_RECEIVES, 0) < 0 ||
        renew(self, F_CONNECTED, 0) < 0 || renew(self, F_DISCONNECTED, 1) < 0) {
        return -1;
    }
    int early = field_truth(self, F_EARLY_SENDS);
    if (early < 0) {
        return -1;
    }
    if (early) {
        PyObject *sends = field_get(self, F_EARLY_SENDS), *fresh = PyList_New(0);
        int failed = sends == NULL || fresh == NULL ||
                     field_set(self, F_COMPLETED_SENDS, sends) < 0 ||
                     field_set(self, F_EARLY_SENDS, fresh) < 0;
        Py_XDECREF(sends);
        Py_XDECREF(fresh);
        if (failed) {
            return -1;
        }
    }
    int news = any_send_complete(self);
    if (news == 0) {
        int connected = field_truth(self, F_CONNECTED);
        news = connected != 0 ? connected : field_truth(self, F_DISCONNECTED);
    }
    if (news < 0) {
        return -1;
    }
    if (news) {
        *timeout_ms = 0;
    }
    if (*timeout_ms > MAX_SELECT_TIMEOUT_MS) {
        *timeout_ms = MAX_SELECT_TIMEOUT_MS;
    }
    return release_gates(self) < 0 ? -1 : 1;
}

static PyObject *poll_kw_names[1];

/* KSelector.poll(timeout_ms). */
static PyObject *
poll_call(FallbackMethod *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *argv[2] = {NULL, NULL};
    long long timeout_ms;
    int overflow = 1;
    if (fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, poll_kw_names, 1, 2, argv) &&
        PyLong_CheckExact(argv[1])) {
        timeout_ms = PyLong_AsLongLongAndOverflow(argv[1], &overflow);
    }
    if (overflow) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *self = argv[0];
    int ready = before_select(self, &timeout_ms);
    if (ready <= 0) {
        return ready < 0 ? NULL : fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *selector = field_get(self, F_SELECTOR);
    if (selector == NULL) {
        return NULL;
    }
    PyObject *timeout = timeout_ms > 0 ? PyFloat_FromDouble((double)timeout_ms / 1000.0)
                                       : Py_NewRef(zero);
    PyObject *events = timeout ? call_method1(selector, s_select, timeout) : NULL;
    Py_XDECREF(timeout);
    Py_DECREF(selector);
    if (events == NULL) {
        return NULL;
    }
    PyObject *now = NULL, *it = NULL, *item;
    int any = PyObject_IsTrue(events), failed = any < 0;
    if (!failed) {
        now = now_ms(self);
        failed = now == NULL;
    }
    if (!failed && any) {
        it = PyObject_GetIter(events);
        failed = it == NULL;
        while (!failed && (item = PyIter_Next(it)) != NULL) {
            PyObject *key, *mask;
            failed = unpack_event(item, &key, &mask) < 0;
            Py_DECREF(item);
            if (!failed) {
                failed = handle_key(self, key, mask, now) < 0;
                Py_DECREF(key);
                Py_DECREF(mask);
            }
        }
        failed = failed || PyErr_Occurred() != NULL;
    }
    if (!failed) {
        failed = maybe_close_idle(self, now) < 0;
    }
    Py_XDECREF(it);
    Py_XDECREF(now);
    Py_DECREF(events);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- KSelector.send and is_channel_ready ---------------------------------------------------- */

/* selector_send(kselector, send) -> bool: KSelector.send for a connected channel with no send
 * in progress (written at once); False, having done nothing, for anything else. */
static PyObject *
selector_send(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "selector_send(kselector, send)");
        return NULL;
    }
    PyObject *self = args[0], *send = args[1], *result = NULL, *owned = NULL;
    PyObject *dest = Py_TYPE(send) == &NetworkSendType && ((NetworkSend *)send)->destination
                         ? Py_NewRef(((NetworkSend *)send)->destination)
                         : PyObject_GetAttr(send, s_destination);
    PyObject *channels = dest ? field_get(self, F_CHANNELS) : NULL;
    PyObject *channel = channels ? dict_get(channels, dest, &owned) : NULL;
    if (channel == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
        goto out;
    }
    Py_INCREF(channel);
    PyObject *pending = field_get(channel, F_CH_SEND);
    if (pending == NULL) {
        goto out_channel;
    }
    Py_DECREF(pending);
    int connected = pending == Py_None ? field_truth(channel, F_CH_CONNECTED) : 0;
    if (connected <= 0) {
        result = connected < 0 ? NULL : Py_NewRef(Py_False);
        goto out_channel;
    }
    PyObject *sending = field_get(self, F_SENDING);
    int failed = sending == NULL || field_set(channel, F_CH_SEND, send) < 0 ||
                 PyObject_SetItem(sending, dest, channel) < 0;
    Py_XDECREF(sending);
    if (failed) {
        goto out_channel;
    }
    PyObject *node_id = field_get(channel, F_CH_NODE_ID);
    if (node_id == NULL) {
        goto out_channel;
    }
    PyObject *written = call0(channel, s_write);
    if (written == NULL) {
        failed = 1;
        if (PyErr_ExceptionMatches(PyExc_OSError)) { /* _write_failed(channel, exc, failures) */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyObject *failures = field_get(self, F_EARLY_FAILURES);
            if (failures != NULL) {
                PyErr_Restore(type, value, tb);
                failed = hand_over_error(self, s_write_failed, channel, failures) < 0;
                Py_DECREF(failures);
            }
            else {
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
            }
        }
    }
    else if (written != Py_None) {
        PyObject *sending = field_get(self, F_SENDING);
        PyObject *early = sending ? field_get(self, F_EARLY_SENDS) : NULL;
        failed = early == NULL || PyObject_DelItem(sending, node_id) < 0 ||
                 done(call_method1(early, s_append, written)) < 0;
        Py_XDECREF(early);
        Py_XDECREF(sending);
    }
    else {
        failed = set_interest(self, channel) < 0; /* the rest waits for writability */
    }
    Py_XDECREF(written);
    if (!failed) {
        int current = is_current(self, node_id, channel);
        PyObject *now = current > 0 ? now_ms(self) : NULL;
        failed = current < 0 || (current > 0 && (now == NULL || idle_update(self, node_id, now) < 0));
        Py_XDECREF(now);
    }
    Py_DECREF(node_id);
    result = failed ? NULL : Py_NewRef(Py_True);
out_channel:
    Py_DECREF(channel);
out:
    Py_XDECREF(owned);
    Py_XDECREF(channels);
    Py_XDECREF(dest);
    return result;
}

static PyObject *ready_kw_names[1];

/* KSelector.is_channel_ready(node_id): the channel's `connected`, False without one. */
static PyObject *
ready_call(FallbackMethod *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *argv[2] = {NULL, NULL};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, ready_kw_names, 1, 2, argv)) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *channels = field_get(argv[0], F_CHANNELS), *owned;
    if (channels == NULL) {
        return NULL;
    }
    PyObject *channel = dict_get(channels, argv[1], &owned), *result;
    if (channel == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    }
    else {
        result = field_get(channel, F_CH_CONNECTED);
    }
    Py_XDECREF(owned);
    Py_DECREF(channels);
    return result;
}

/* ---- the types and the module's part ------------------------------------------------------ */

FALLBACK_TYPE(SelectorPollType, "SelectorPoll", poll_call, "O:SelectorPoll")
FALLBACK_TYPE(ChannelReadyType, "ChannelReady", ready_call, "O:ChannelReady")

static PyMethodDef selector_methods[] = {
    {"bind_selector", (PyCFunction)(void (*)(void))bind_selector, METH_FASTCALL,
     "bind_selector(PyKSelector, IdleExpiryManager, CKafkaChannel): selector.py's."},
    {"selector_send", (PyCFunction)(void (*)(void))selector_send, METH_FASTCALL,
     "selector_send(kselector, send) -> bool: KSelector.send's common case (False: not taken)."},
    {NULL, NULL, 0, NULL},
};

int
selector_add_to_module(PyObject *module)
{
    if (selector_intern() < 0) {
        return -1;
    }
    poll_kw_names[0] = s_timeout_ms;
    ready_kw_names[0] = s_node_id_kw;
    if (PyType_Ready(&SelectorPollType) < 0 || PyType_Ready(&ChannelReadyType) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "SelectorPoll", (PyObject *)&SelectorPollType) < 0 ||
        PyModule_AddObjectRef(module, "ChannelReady", (PyObject *)&ChannelReadyType) < 0 ||
        loop_select_add_to_module(module) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, selector_methods);
}
