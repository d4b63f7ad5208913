/*
 * kclient.network._channel: what KSelector's C poll and send (_selector.c) both use: the
 * clock, the idle bookkeeping, the interest check, a connected channel's events, handing a
 * failed read or write to the Python method that reports it; and the interned names.
 */
#include "_selector.h"
#include "../_slots.h"

#include <structmember.h>

PyObject *s_closed, *s_immediately_connected, *s_early_failures, *s_sending, *s_completed_sends, *s_completed_receives, *s_connected, *s_disconnected, *s_early_sends, *s_release_before_select, *s_clear, *s_selector, *s_select, *s_clock, *s_monotonic_ms, *s_idle, *s_last_active_ms, *s_next_check_ms, *s_max_idle_ms, *s_maybe_close_idle, *s_channels, *s_data, *s_drain_wakeup, *s_node_id, *s_handle_events, *s_read, *s_write, *s_muted, *s_io_failed, *s_write_failed, *s_set_interest, *s_tls_wait, *s_events, *s_destination, *s_update, *s_timeout_ms, *s_timeout, *s_node_id_kw, *s_ready, *s_keys, *s_requested_timeout_ms, *s_returned_events, *s_append, *s_get, *s_on_ready;
PyObject *thousand, *zero, *one;
PyObject *field_names[F_COUNT];
Py_ssize_t field_offsets[F_COUNT];
PyTypeObject *kselector_type, *idle_type, *channel_type;

/* mapping.get(key) as a borrowed reference (NULL: absent, or an error if one is set). */
PyObject *
dict_get(PyObject *mapping, PyObject *key, PyObject **owned)
{
    *owned = NULL;
    if (PyDict_CheckExact(mapping)) {
        return PyDict_GetItemWithError(mapping, key);
    }
    PyObject *found = call_method1(mapping, s_get, key);
    if (found == NULL || found == Py_None) {
        Py_XDECREF(found);
        return NULL;
    }
    *owned = found;
    return found;
}

/* Whether self._channels.get(node_id) is channel: 1, 0, -1. */
int
is_current(PyObject *self, PyObject *node_id, PyObject *channel)
{
    PyObject *channels = field_get(self, F_CHANNELS);
    if (channels == NULL) {
        return -1;
    }
    PyObject *owned;
    PyObject *current = dict_get(channels, node_id, &owned);
    int result = current == channel ? 1 : (PyErr_Occurred() ? -1 : 0);
    Py_XDECREF(owned);
    Py_DECREF(channels);
    return result;
}

/* self._clock.monotonic_ms() (the system clock's is C itself: kclient/_clock.c). */
PyObject *
now_ms(PyObject *self)
{
    PyObject *clock = field_get(self, F_CLOCK);
    if (clock == NULL) {
        return NULL;
    }
    PyObject *now = call0(clock, s_monotonic_ms);
    Py_DECREF(clock);
    return now;
}

/* self._idle.update(node_id, now): the node becomes the most recently used. */
int
idle_update(PyObject *self, PyObject *node_id, PyObject *now)
{
    PyObject *idle = field_get(self, F_IDLE);
    if (idle == NULL) {
        return -1;
    }
    int result;
    PyObject *last = field_get(idle, F_IDLE_LAST_ACTIVE_MS);
    if (last != NULL && PyDict_CheckExact(last)) {
        int had = PyDict_Contains(last, node_id);
        result = had < 0 || (had && PyDict_DelItem(last, node_id) < 0) ||
                         PyDict_SetItem(last, node_id, now) < 0
                     ? -1
                     : 0;
    }
    else {
        result = last == NULL ? -1 : done(call2(idle, s_update, node_id, now));
    }
    Py_XDECREF(last);
    Py_DECREF(idle);
    return result;
}

/* self._maybe_close_idle(now) when IdleExpiryManager.poll_expired could name a node: idle
 * expiry is on (connections_max_idle_ms >= 0) and its next check is due. */
int
maybe_close_idle(PyObject *self, PyObject *now)
{
    PyObject *idle = field_get(self, F_IDLE);
    if (idle == NULL) {
        return -1;
    }
    PyObject *max_idle = field_get(idle, F_IDLE_MAX_MS);
    PyObject *next = max_idle ? field_get(idle, F_IDLE_NEXT_CHECK_MS) : NULL;
    Py_DECREF(idle);
    int off = next ? PyObject_RichCompareBool(max_idle, zero, Py_LT) : -1;
    int early = off == 0 ? PyObject_RichCompareBool(now, next, Py_LT) : off;
    Py_XDECREF(max_idle);
    Py_XDECREF(next);
    if (off < 0 || early < 0) {
        return -1;
    }
    if (off || early) {
        return 0;
    }
    PyObject *args[2] = {self, now};
    return done(PyObject_VectorcallMethod(s_maybe_close_idle, args,
                                          2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL));
}

/* Reads channel.<field> as a C long into *out: 1, 0 (not an int: *out untouched), -1. */
static int
attr_long(PyObject *channel, int field, long *out)
{
    PyObject *value = field_get(channel, field);
    if (value == NULL) {
        return -1;
    }
    int ok = 0;
    if (PyLong_CheckExact(value)) {
        int overflow;
        long v = PyLong_AsLongAndOverflow(value, &overflow);
        if (!overflow) {
            *out = v;
            ok = 1;
        }
    }
    Py_DECREF(value);
    return ok;
}

/* self._set_interest(channel) when the events it asks for differ from channel.events. */
int
set_interest(PyObject *self, PyObject *channel)
{
    long tls_wait = 0, current = 0;
    int ok = attr_long(channel, F_CH_TLS_WAIT, &tls_wait);
    int connected = ok > 0 ? field_truth(channel, F_CH_CONNECTED) : -1;
    int muted = connected > 0 ? field_truth(channel, F_CH_MUTED) : 0;
    if (ok < 0 || connected < 0 || muted < 0) {
        return -1;
    }
    if (ok > 0) {
        long events = tls_wait;
        if (!tls_wait) {
            PyObject *send = connected ? field_get(channel, F_CH_SEND) : Py_NewRef(Py_None);
            if (send == NULL) {
                return -1;
            }
            if (!connected || send != Py_None) {
                events |= EVENT_WRITE;
            }
            Py_DECREF(send);
        }
        if (connected && !muted) {
            events |= EVENT_READ;
        }
        ok = attr_long(channel, F_CH_EVENTS, &current);
        if (ok < 0) {
            return -1;
        }
        if (ok > 0 && current == events) {
            return 0;
        }
    }
    PyObject *args[2] = {self, channel};
    return done(
        PyObject_VectorcallMethod(s_set_interest, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL));
}

/* The error just raised by a read or write, if poll reports it (OSError, and once bound
 * PeerClosedError and ProtocolDecodeError): handed to method(channel, error[, extra]) and 0; any other
 * stays raised: -1. */
int
hand_over_error(PyObject *self, PyObject *method, PyObject *channel, PyObject *extra)
{
    if (!PyErr_ExceptionMatches(PyExc_OSError) &&
        !(peer_closed_error && PyErr_ExceptionMatches(peer_closed_error)) &&
        !(protocol_decode_error && PyErr_ExceptionMatches(protocol_decode_error))) {
        return -1;
    }
    PyObject *value = take_exception();
    PyObject *result = extra ? call3(self, method, channel, value, extra)
                             : call2(self, method, channel, value);
    Py_DECREF(value);
    return done(result);
}

/* _handle_events for a connected channel: read (unless muted), write what is pending. */
int
handle_events(PyObject *self, PyObject *channel, PyObject *node_id, PyObject *mask_obj)
{
    int connected = field_truth(channel, F_CH_CONNECTED);
    if (connected < 0) {
        return -1;
    }
    long mask = -1;
    if (PyLong_CheckExact(mask_obj)) {
        int overflow;
        mask = PyLong_AsLongAndOverflow(mask_obj, &overflow);
        mask = overflow ? -1 : mask;
    }
    if (!connected || mask < 0) {
        return done(call2(self, s_handle_events, channel, mask_obj));
    }
    if (mask & EVENT_READ) {
        int muted = field_truth(channel, F_CH_MUTED);
        if (muted < 0) {
            return -1;
        }
        if (!muted) {
            PyObject *completed = field_get(self, F_COMPLETED_RECEIVES);
            if (completed == NULL) {
                return -1;
            }
            PyObject *args[2] = {channel, completed};
            PyObject *res =
                PyObject_VectorcallMethod(s_read, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            Py_DECREF(completed);
            if (res == NULL) {
                return hand_over_error(self, s_io_failed, channel, NULL);
            }
            Py_DECREF(res);
        }
    }
    if (mask & EVENT_WRITE) {
        PyObject *pending = field_get(channel, F_CH_SEND);
        if (pending == NULL) {
            return -1;
        }
        Py_DECREF(pending);
        if (pending != Py_None) {
            PyObject *send = call0(channel, s_write);
            if (send == NULL) {
                return hand_over_error(self, s_io_failed, channel, NULL);
            }
            int result = 0;
            if (send != Py_None) {
                PyObject *sending = field_get(self, F_SENDING);
                PyObject *completed =
                    sending ? field_get(self, F_COMPLETED_SENDS) : NULL;
                result = completed == NULL || PyObject_DelItem(sending, node_id) < 0 ||
                                 done(call_method1(completed, s_append, send)) < 0
                             ? -1
                             : 0;
                Py_XDECREF(completed);
                Py_XDECREF(sending);
            }
            Py_DECREF(send);
            return result;
        }
    }
    return 0;
}

/* bind_selector(PyKSelector, IdleExpiryManager, CKafkaChannel). */
PyObject *
bind_selector(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[0]) || !PyType_Check(args[1]) ||
        !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_selector(PyKSelector, IdleExpiryManager, CKafkaChannel)");
        return NULL;
    }
    Py_ssize_t offsets[F_COUNT];
    for (int i = 0; i < F_COUNT; i++) {
        int owner = i >= F_CH_NODE_ID ? 2 : (i >= F_IDLE_MAX_MS ? 1 : 0);
        const char *name = PyUnicode_AsUTF8(field_names[i]);
        offsets[i] = name == NULL ? -1 : slot_offset((PyTypeObject *)args[owner], name);
        if (offsets[i] < 0) {
            return NULL;
        }
    }
    memcpy(field_offsets, offsets, sizeof(offsets));
    Py_XSETREF(kselector_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(idle_type, (PyTypeObject *)Py_NewRef(args[1]));
    Py_XSETREF(channel_type, (PyTypeObject *)Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

int
selector_intern(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&s_closed, "_closed"},
        {&s_immediately_connected, "_immediately_connected"},
        {&s_early_failures, "_early_failures"},
        {&s_sending, "_sending"},
        {&s_completed_sends, "completed_sends"},
        {&s_completed_receives, "completed_receives"},
        {&s_connected, "connected"},
        {&s_disconnected, "disconnected"},
        {&s_early_sends, "_early_sends"},
        {&s_release_before_select, "release_before_select"},
        {&s_clear, "clear"},
        {&s_selector, "_selector"},
        {&s_select, "select"},
        {&s_clock, "_clock"},
        {&s_monotonic_ms, "monotonic_ms"},
        {&s_idle, "_idle"},
        {&s_last_active_ms, "_last_active_ms"},
        {&s_next_check_ms, "_next_check_ms"},
        {&s_max_idle_ms, "connections_max_idle_ms"},
        {&s_maybe_close_idle, "_maybe_close_idle"},
        {&s_channels, "_channels"},
        {&s_data, "data"},
        {&s_drain_wakeup, "_drain_wakeup"},
        {&s_node_id, "node_id"},
        {&s_handle_events, "_handle_events"},
        {&s_read, "read"},
        {&s_write, "write"},
        {&s_muted, "muted"},
        {&s_io_failed, "_io_failed"},
        {&s_write_failed, "_write_failed"},
        {&s_set_interest, "_set_interest"},
        {&s_tls_wait, "tls_wait"},
        {&s_events, "events"},
        {&s_destination, "destination"},
        {&s_update, "update"},
        {&s_timeout_ms, "timeout_ms"},
        {&s_timeout, "timeout"},
        {&s_node_id_kw, "node_id"},
        {&s_ready, "_ready"},
        {&s_keys, "_keys"},
        {&s_requested_timeout_ms, "requested_timeout_ms"},
        {&s_returned_events, "returned_events"},
        {&s_append, "append"},
        {&s_get, "get"},
        {&s_on_ready, "_on_ready"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].slot == NULL &&
            (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL) {
            return -1;
        }
    }
    PyObject *fields[F_COUNT] = {
        [F_CLOSED] = s_closed,
        [F_IMMEDIATELY_CONNECTED] = s_immediately_connected,
        [F_EARLY_FAILURES] = s_early_failures,
        [F_SENDING] = s_sending,
        [F_COMPLETED_SENDS] = s_completed_sends,
        [F_COMPLETED_RECEIVES] = s_completed_receives,
        [F_CONNECTED] = s_connected,
        [F_DISCONNECTED] = s_disconnected,
        [F_EARLY_SENDS] = s_early_sends,
        [F_RELEASE_BEFORE_SELECT] = s_release_before_select,
        [F_SELECTOR] = s_selector,
        [F_CLOCK] = s_clock,
        [F_IDLE] = s_idle,
        [F_CHANNELS] = s_channels,
        [F_IDLE_MAX_MS] = s_max_idle_ms,
        [F_IDLE_LAST_ACTIVE_MS] = s_last_active_ms,
        [F_IDLE_NEXT_CHECK_MS] = s_next_check_ms,
        [F_CH_NODE_ID] = s_node_id,
        [F_CH_CONNECTED] = s_connected,
        [F_CH_MUTED] = s_muted,
        [F_CH_TLS_WAIT] = s_tls_wait,
        [F_CH_EVENTS] = s_events,
        [F_CH_SEND] = str_send,
    };
    memcpy(field_names, fields, sizeof(fields));
    if ((thousand = PyLong_FromLong(1000)) == NULL || (zero = PyLong_FromLong(0)) == NULL ||
        (one = PyLong_FromLong(1)) == NULL) {
        return -1;
    }
    return 0;
}
