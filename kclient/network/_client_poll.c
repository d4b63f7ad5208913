/*
 * kclient.network._client, the polling side: NetworkClient.poll and poll_ready
 * (kclient/network/client.py) without a Python frame in an event loop's common step.
 *
 * ClientPoll and ClientPollReady are method descriptors over those Python functions
 * (_fallback_method.h). A call they cannot take goes to the Python function whole, before
 * anything was done: another signature or client type, a closed client, aborted requests to
 * report, a connection being set up, SASL (an authenticator). Otherwise poll works out the
 * timeout as the Python does (a metadata refresh that is due is started by the updater's own
 * maybe_update; the in-flight deadline read in place while it is exact, else next_timeout_ms),
 * and both run _poll_io: the selector's poll (the C KSelector's called directly), the clock,
 * then each step only when the selector reported something for it, each by the Python method
 * that does it, except what is common: sends that await a response (nothing to do), plain
 * answers (complete_receives, _client.c), and the callbacks of the finished requests (a
 * callback's exception is logged as _complete logs it, through _callback_failed). Same
 * state, results and log lines as the Python (tests/network/test_client_poll_c.py). The
 * client's owning thread only.
 */
#include "_client.h"

#include <stddef.h>

#include "../_fallback_method.h"
#include "../_pycall.h" /* call0..call3, done */

static PyObject *ckselector_poll;             /* CKSelector.__dict__["poll"] (SelectorPoll) */
static Py_ssize_t sel_completed_sends, sel_completed_receives, sel_connected, sel_disconnected;
static long long no_delay_limit_ms;           /* connection_states.NO_DELAY_LIMIT_MS */
static PyObject *str_poll, *str_monotonic_ms, *str_completed_sends, *str_completed_receives,
    *str_connected, *str_disconnected, *str_awaits_response, *str_handle_completed_sends,
    *str_handle_completed_receives, *str_handle_disconnections, *str_handle_connections,
    *str_to_send, *str_initiate_api_versions, *str_connecting_nodes, *str_handle_timed_out_conns,
    *str_handle_timed_out_requests, *str_callback, *str_request, *str_callback_failed,
    *str_metadata, *str_in_progress, *str_next_update_ms, *str_maybe_update,
    *str_next_timeout_ms, *str_next_setup_timeout_ms, *str_count, *str_earliest_deadline_ms,
    *str_deadline_exact, *zero_ms;

/* selector.<attribute>: at the C KSelector's slot, else by name. A new reference. */
static PyObject *
selector_get(PyObject *selector, Py_ssize_t offset, PyObject *name)
{
    if (ckselector_type != NULL && Py_TYPE(selector) == ckselector_type) {
        PyObject *value = SLOT(selector, offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(selector, name);
}

/* in_flight.<attribute>: at InFlightRequests' slot, else by name. A new reference. */
static PyObject *
in_flight_get(PyObject *in_flight, Py_ssize_t offset, PyObject *name)
{
    if (Py_TYPE(in_flight) == in_flight_requests_type) {
        PyObject *value = SLOT(in_flight, offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(in_flight, name);
}

/* bool(in_flight.<attribute>): 1, 0, -1. */
static int
in_flight_truth(PyObject *in_flight, Py_ssize_t offset, PyObject *name)
{
    PyObject *value = in_flight_get(in_flight, offset, name);
    int truth = value ? PyObject_IsTrue(value) : -1;
    Py_XDECREF(value);
    return truth;
}

/* A Python int as a C long long: 1, 0 (not an int, or too large: *out untouched), -1. */
static int
as_long_long(PyObject *value, long long *out)
{
    if (!PyLong_CheckExact(value)) {
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow) {
        return 0;
    }
    *out = v;
    return 1;
}

/* Whether any completed send completes a request by being written (acks=0): 1, 0, -1. */
static int
any_unanswered_send(PyObject *sends)
{
    if (!PyList_CheckExact(sends)) {
        return 1; /* the Python method sees to it */
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sends); i++) {
        PyObject *send = PyList_GET_ITEM(sends, i);
        int awaits = get_truth(send, str_awaits_response);
        if (awaits <= 0) {
            return awaits < 0 ? -1 : 1;
        }
    }
    return 0;
}

/* _complete(responses): each request's callback, a failing one logged (_callback_failed). */
static int
complete(PyObject *self, PyObject *responses)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(responses); i++) {
        PyObject *response = Py_NewRef(PyList_GET_ITEM(responses, i));
        PyObject *request = PyObject_GetAttr(response, str_request);
        PyObject *callback = request ? PyObject_GetAttr(request, str_callback) : NULL;
        Py_XDECREF(request);
        if (callback == NULL) {
            Py_DECREF(response);
            return -1;
        }
        PyObject *result = callback == Py_None ? Py_NewRef(Py_None)
                                               : PyObject_CallOneArg(callback, response);
        Py_DECREF(callback);
        Py_DECREF(response);
        if (result != NULL) {
            Py_DECREF(result);
            continue;
        }
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return -1; /* as `except Exception` lets it through */
        }
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb != NULL) {
            PyException_SetTraceback(value, tb);
        }
        Py_XDECREF(type);
        Py_XDECREF(tb);
        int logged = done(call1(self, str_callback_failed, value));
        Py_DECREF(value);
        if (logged < 0) {
            return -1;
        }
    }
    return 0;
}

/* The answers: C's loop for the plain ones, the Python loop from the first other one (all of
 * them while an acks=0 id is kept: _unanswered). 0 or -1. */
static int
handle_receives(PyObject *self, PyObject *receives, PyObject *in_flight, PyObject *responses,
                PyObject *now)
{
    PyObject *unanswered = client_get(self, C_UNANSWERED);
    int any = unanswered ? PyObject_IsTrue(unanswered) : -1;
    Py_XDECREF(unanswered);
    if (any < 0) {
        return -1;
    }
    PyObject *rest = Py_NewRef(receives);
    if (!any) {
        PyObject *args[] = {receives, in_flight, responses, now};
        PyObject *taken = kclient_complete_receives(NULL, args, 4);
        Py_ssize_t count = taken ? PyLong_AsSsize_t(taken) : -1;
        Py_XDECREF(taken);
        Py_ssize_t length = count < 0 ? -1 : PyObject_Length(receives);
        if (length < 0) {
            Py_DECREF(rest);
            return -1;
        }
        Py_SETREF(rest, count == length ? NULL : PySequence_GetSlice(receives, count, length));
        if (rest == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
    }
    int result = done(call3(self, str_handle_completed_receives, responses, now, rest));
    Py_DECREF(rest);
    return result;
}

/* Calls self.method(responses, now) when self.<what>.<attribute> (or the selector's) holds
 * anything: 0 or -1. */
static int
step_if(PyObject *self, PyObject *holder, PyObject *name, PyObject *method, PyObject *responses,
        PyObject *now)
{
    int any = get_truth(holder, name);
    if (any <= 0) {
        return any;
    }
    return done(responses ? call2(self, method, responses, now) : call1(self, method, now));
}

/* NetworkClient._poll_io(timeout_ms) for a client without an authenticator: the responses. */
static PyObject *
poll_io(PyObject *self, PyObject *timeout_ms)
{
    PyObject *selector = client_get(self, C_SELECTOR), *in_flight = NULL, *states = NULL;
    PyObject *clock = NULL, *now = NULL, *responses = NULL, *sends = NULL, *receives = NULL;
    PyObject *versions = NULL, *result = NULL;
    if (selector == NULL) {
        return NULL;
    }
    PyObject *polled;
    if (ckselector_type != NULL && Py_TYPE(selector) == ckselector_type) {
        PyObject *args[] = {selector, timeout_ms};
        polled = PyObject_Vectorcall(ckselector_poll, args, 2, NULL);
    }
    else {
        polled = call1(selector, str_poll, timeout_ms);
    }
    if (done(polled) < 0 || (clock = client_get(self, C_CLOCK)) == NULL ||
        (now = call0(clock, str_monotonic_ms)) == NULL || (responses = PyList_New(0)) == NULL) {
        goto exit;
    }
    sends = selector_get(selector, sel_completed_sends, str_completed_sends);
    int any = sends ? PyObject_IsTrue(sends) : -1;
    if (any > 0) {
        any = any_unanswered_send(sends);
        if (any > 0) {
            any = done(call2(self, str_handle_completed_sends, responses, now)) < 0 ? -1 : 0;
        }
    }
    if (any < 0) {
        goto exit;
    }
    receives = selector_get(selector, sel_completed_receives, str_completed_receives);
    in_flight = receives ? client_get(self, C_IN_FLIGHT_REQUESTS) : NULL;
    any = in_flight ? PyObject_IsTrue(receives) : -1;
    if (any < 0 || (any && handle_receives(self, receives, in_flight, responses, now) < 0)) {
        goto exit;
    }
    PyObject *disconnected = selector_get(selector, sel_disconnected, str_disconnected);
    any = disconnected ? PyObject_IsTrue(disconnected) : -1;
    Py_XDECREF(disconnected);
    if (any < 0 || (any && done(call2(self, str_handle_disconnections, responses, now)) < 0)) {
        goto exit;
    }
    PyObject *connected = selector_get(selector, sel_connected, str_connected);
    any = connected ? PyObject_IsTrue(connected) : -1;
    Py_XDECREF(connected);
    if (any < 0 || (any && done(call0(self, str_handle_connections)) < 0)) {
        goto exit;
    }
    versions = client_get(self, C_API_VERSIONS);
    states = versions ? client_get(self, C_CONNECTION_STATES) : NULL;
    if (states == NULL ||
        step_if(self, versions, str_to_send, str_initiate_api_versions, NULL, now) < 0 ||
        step_if(self, states, str_connecting_nodes, str_handle_timed_out_conns, responses, now) <
            0) {
        goto exit;
    }
    any = in_flight_truth(in_flight, off_ifr_count, str_count);
    if (any > 0) { /* now_ms >= in_flight.earliest_deadline_ms */
        PyObject *earliest = in_flight_get(in_flight, off_ifr_earliest, str_earliest_deadline_ms);
        any = earliest ? PyObject_RichCompareBool(now, earliest, Py_GE) : -1;
        Py_XDECREF(earliest);
        if (any > 0) {
            any = done(call2(self, str_handle_timed_out_requests, responses, now)) < 0 ? -1 : 0;
        }
    }
    if (any < 0 || (PyList_GET_SIZE(responses) && complete(self, responses) < 0)) {
        goto exit;
    }
    result = Py_NewRef(responses);
exit:
    Py_XDECREF(selector);
    Py_XDECREF(in_flight);
    Py_XDECREF(states);
    Py_XDECREF(clock);
    Py_XDECREF(now);
    Py_XDECREF(responses);
    Py_XDECREF(sends);
    Py_XDECREF(receives);
    Py_XDECREF(versions);
    return result;
}

/* Whether poll / poll_ready can run here: a NetworkClient, open, nothing aborted, no SASL, and
 * (`connecting`) no connection being set up. 1, 0 (the Python function runs), -1. */
static int
common_case(PyObject *self, int connecting)
{
    if (Py_TYPE(self) != network_client_type) {
        return 0;
    }
    PyObject *closed = SLOT(self, client_slots[C_CLOSED]);
    PyObject *aborted = SLOT(self, client_slots[C_ABORTED]);
    PyObject *auth = SLOT(self, client_slots[C_AUTHENTICATOR]);
    if (closed != Py_False || aborted == NULL || !PyList_CheckExact(aborted) ||
        PyList_GET_SIZE(aborted) || auth != Py_None) {
        return 0;
    }
    PyObject *checked = SLOT(self, client_slots[C_CHECKED]);
    if (checked == NULL || !PyDict_CheckExact(checked)) {
        return 0;
    }
    if (connecting) { /* poll: its own timeout a C long long too, and nothing connecting */
        PyObject *own = SLOT(self, client_slots[C_REQUEST_TIMEOUT_MS]);
        long long own_ms;
        int fits = own ? as_long_long(own, &own_ms) : 0;
        if (fits <= 0) {
            return fits;
        }
        PyObject *states = SLOT(self, client_slots[C_CONNECTION_STATES]);
        int any = states ? get_truth(states, str_connecting_nodes) : 1;
        if (any != 0) {
            return any < 0 ? -1 : 0;
        }
    }
    PyDict_Clear(checked); /* the poll may change any node's readiness */
    return 1;
}

/* metadata_updater.maybe_update(now_ms), read in place unless a refresh is due. */
static int
metadata_timeout(PyObject *self, PyObject *now, long long now_ms, long long *timeout_ms)
{
    PyObject *updater = client_get(self, C_METADATA_UPDATER);
    PyObject *metadata = updater ? PyObject_GetAttr(updater, str_metadata) : NULL;
    PyObject *next = metadata ? PyObject_GetAttr(metadata, str_next_update_ms) : NULL;
    PyObject *busy = next ? PyObject_GetAttr(updater, str_in_progress) : NULL;
    int result = -1;
    long long next_ms = 0;
    int known = busy ? as_long_long(next, &next_ms) : -1;
    if (known > 0 && next_ms > LLONG_MIN / 2 && next_ms < LLONG_MAX / 2 &&
        now_ms > LLONG_MIN / 2 && now_ms < LLONG_MAX / 2) {
        long long due_ms = next_ms - now_ms > 0 ? next_ms - now_ms : 0;
        if (busy != Py_None) { /* waiting for its answer: at least request.timeout.ms */
            PyObject *wait = client_get(self, C_REQUEST_TIMEOUT_MS);
            long long wait_ms = 0;
            int ok = wait ? as_long_long(wait, &wait_ms) : -1;
            Py_XDECREF(wait);
            if (ok < 0) {
                goto exit;
            }
            due_ms = ok == 0 ? 0 : (wait_ms > due_ms ? wait_ms : due_ms);
        }
        if (due_ms > 0) {
            *timeout_ms = due_ms;
            result = 0;
            goto exit;
        }
    }
    else if (known < 0) {
        goto exit;
    }
    PyObject *answer = call1(updater, str_maybe_update, now); /* due: the updater acts */
    int ok = answer ? as_long_long(answer, timeout_ms) : -1;
    Py_XDECREF(answer);
    if (ok == 0) {
        PyErr_SetString(PyExc_TypeError, "maybe_update must return an int");
    }
    result = ok > 0 ? 0 : -1;
exit:
    Py_XDECREF(updater);
    Py_XDECREF(metadata);
    Py_XDECREF(next);
    Py_XDECREF(busy);
    return result;
}

/* The in-flight requests' part of poll's timeout (in_flight.next_timeout_ms or the client's
 * request.timeout.ms), lowering *timeout_ms. 0 or -1. */
static int
in_flight_timeout(PyObject *self, PyObject *now, long long now_ms, long long *timeout_ms)
{
    PyObject *in_flight = client_get(self, C_IN_FLIGHT_REQUESTS);
    if (in_flight == NULL) {
        return -1;
    }
    long long limit_ms = 0;
    int ok = -1;
    int any = in_flight_truth(in_flight, off_ifr_count, str_count);
    if (any == 0) {
        PyObject *own = client_get(self, C_REQUEST_TIMEOUT_MS);
        ok = own ? as_long_long(own, &limit_ms) : -1;
        Py_XDECREF(own);
    }
    else if (any > 0) {
        int exact = in_flight_truth(in_flight, off_ifr_exact, str_deadline_exact);
        PyObject *earliest =
            exact > 0 ? in_flight_get(in_flight, off_ifr_earliest, str_earliest_deadline_ms)
                      : NULL;
        long long earliest_ms = 0;
        ok = earliest ? as_long_long(earliest, &earliest_ms) : (exact < 0 ? -1 : 0);
        Py_XDECREF(earliest);
        if (ok > 0 && earliest_ms > LLONG_MIN / 2 && now_ms > LLONG_MIN / 2 &&
            now_ms < LLONG_MAX / 2) {
            long long remaining_ms = earliest_ms - now_ms; /* as next_timeout_ms */
            limit_ms = remaining_ms <= 0 ? 0
                                         : (remaining_ms < no_delay_limit_ms ? remaining_ms
                                                                             : no_delay_limit_ms);
        }
        else if (ok >= 0) {
            PyObject *next = call1(in_flight, str_next_timeout_ms, now);
            ok = next ? as_long_long(next, &limit_ms) : -1;
            Py_XDECREF(next);
            if (ok == 0) {
                PyErr_SetString(PyExc_TypeError, "next_timeout_ms must return an int");
                ok = -1;
            }
        }
    }
    Py_DECREF(in_flight);
    if (ok == 0) { /* a timeout that is not a C long long: let Python compare */
        PyErr_SetString(PyExc_OverflowError, "request.timeout.ms is too large");
        return -1;
    }
    if (ok < 0) {
        return -1;
    }
    if (limit_ms < *timeout_ms) {
        *timeout_ms = limit_ms;
    }
    return 0;
}

static PyObject *poll_kw_names[2], *poll_ready_kw_names[1];

/* NetworkClient.poll(timeout_ms, now_ms). */
static PyObject *
client_poll_call(FallbackMethod *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *argv[3] = {NULL, NULL, NULL};
    long long timeout_ms = 0, now_ms = 0;
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, poll_kw_names, 2, 3, argv) ||
        argv[2] == NULL || network_client_type == NULL) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    int ok = as_long_long(argv[1], &timeout_ms);
    ok = ok > 0 ? as_long_long(argv[2], &now_ms) : ok;
    ok = ok > 0 ? common_case(argv[0], 1) : ok;
    if (ok <= 0) {
        return ok < 0 ? NULL : fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *self = argv[0], *now = argv[2];
    long long metadata_ms = 0;
    if (metadata_timeout(self, now, now_ms, &metadata_ms) < 0) {
        return NULL;
    }
    if (metadata_ms < timeout_ms) {
        timeout_ms = metadata_ms;
    }
    if (in_flight_timeout(self, now, now_ms, &timeout_ms) < 0) {
        return NULL;
    }
    /* a connection the update started is set up by the next poll (the Python's
     * next_setup_timeout_ms then); none was being set up when this one began */
    PyObject *states = client_get(self, C_CONNECTION_STATES);
    int connecting = states ? get_truth(states, str_connecting_nodes) : -1;
    Py_XDECREF(states);
    if (connecting < 0) {
        return NULL;
    }
    if (connecting) {
        PyObject *delay = NULL;
        PyObject *states_again = client_get(self, C_CONNECTION_STATES);
        if (states_again != NULL) {
            delay = call1(states_again, str_next_setup_timeout_ms, now);
            Py_DECREF(states_again);
        }
        long long delay_ms = 0;
        ok = delay ? as_long_long(delay, &delay_ms) : -1;
        Py_XDECREF(delay);
        if (ok <= 0) {
            if (ok == 0) {
                PyErr_SetString(PyExc_TypeError, "next_setup_timeout_ms must return an int");
            }
            return NULL;
        }
        if (delay_ms < timeout_ms) {
            timeout_ms = delay_ms;
        }
    }
    PyObject *timeout = PyLong_FromLongLong(timeout_ms);
    if (timeout == NULL) {
        return NULL;
    }
    PyObject *responses = poll_io(self, timeout);
    Py_DECREF(timeout);
    return responses;
}

/* NetworkClient.poll_ready(now_ms). */
static PyObject *
client_poll_ready_call(FallbackMethod *method, PyObject *const *args, size_t nargsf,
                       PyObject *kwnames)
{
    PyObject *argv[2] = {NULL, NULL};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, poll_ready_kw_names, 1, 2,
                       argv) ||
        network_client_type == NULL) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    int ok = common_case(argv[0], 0);
    if (ok <= 0) {
        return ok < 0 ? NULL : fallback_general(method, args, nargsf, kwnames);
    }
    return poll_io(argv[0], zero_ms);
}

/* ---- the types and the module's part ------------------------------------------------------ */

#define CLIENT_FALLBACK_TYPE(var, cname, call)                                                 \
    static PyObject *var##_new(PyTypeObject *type, PyObject *args, PyObject *kwds)             \
    {                                                                                          \
        return fallback_new(type, args, kwds, (vectorcallfunc)call, "O:" cname);               \
    }                                                                                          \
    static PyGetSetDef var##_getset[] = {FALLBACK_GETSET};                                     \
    static PyTypeObject var = {                                                                \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.network._client." cname,             \
        .tp_basicsize = sizeof(FallbackMethod),                                                \
        FALLBACK_SLOTS,                                                                        \
        .tp_getset = var##_getset,                                                             \
        .tp_new = var##_new,                                                                   \
    };

CLIENT_FALLBACK_TYPE(ClientPollType, "ClientPoll", client_poll_call)
CLIENT_FALLBACK_TYPE(ClientPollReadyType, "ClientPollReady", client_poll_ready_call)

/* bind_poll(CKSelector | None, NO_DELAY_LIMIT_MS): the C KSelector's poll and result slots. */
static PyObject *
bind_poll(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *kselector;
    long long limit;
    if (!PyArg_ParseTuple(args, "OL:bind_poll", &kselector, &limit)) {
        return NULL;
    }
    PyObject *poll = NULL;
    Py_ssize_t offsets[4] = {0, 0, 0, 0};
    if (kselector != Py_None) {
        const char *names[] = {"completed_sends", "completed_receives", "connected",
                               "disconnected"};
        for (int k = 0; k < 4; k++) {
            offsets[k] = PyType_Check(kselector)
                             ? slot_offset((PyTypeObject *)kselector, names[k])
                             : -1;
            if (offsets[k] < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_TypeError, "bind_poll: CKSelector or None");
                }
                return NULL;
            }
        }
        poll = PyDict_GetItemWithError(((PyTypeObject *)kselector)->tp_dict, str_poll);
        if (poll == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "bind_poll: CKSelector.poll");
            }
            return NULL;
        }
    }
    sel_completed_sends = offsets[0];
    sel_completed_receives = offsets[1];
    sel_connected = offsets[2];
    sel_disconnected = offsets[3];
    Py_XSETREF(ckselector_poll, Py_XNewRef(poll));
    no_delay_limit_ms = limit;
    Py_RETURN_NONE;
}

static PyMethodDef poll_methods[] = {
    {"bind_poll", (PyCFunction)bind_poll, METH_VARARGS,
     "bind_poll(CKSelector | None, NO_DELAY_LIMIT_MS): what ClientPoll reaches directly"},
    {NULL, NULL, 0, NULL},
};

int
kclient_client_poll_init(PyObject *module)
{
    struct {
        PyObject **where;
        const char *text;
    } names[] = {
        {&str_poll, "poll"},
        {&str_monotonic_ms, "monotonic_ms"},
        {&str_completed_sends, "completed_sends"},
        {&str_completed_receives, "completed_receives"},
        {&str_connected, "connected"},
        {&str_disconnected, "disconnected"},
        {&str_awaits_response, "awaits_response"},
        {&str_handle_completed_sends, "_handle_completed_sends"},
        {&str_handle_completed_receives, "_handle_completed_receives"},
        {&str_handle_disconnections, "_handle_disconnections"},
        {&str_handle_connections, "_handle_connections"},
        {&str_to_send, "to_send"},
        {&str_initiate_api_versions, "_handle_initiate_api_version_requests"},
        {&str_connecting_nodes, "connecting_nodes"},
        {&str_handle_timed_out_conns, "_handle_timed_out_connections"},
        {&str_handle_timed_out_requests, "_handle_timed_out_requests"},
        {&str_callback, "callback"},
        {&str_request, "request"},
        {&str_callback_failed, "_callback_failed"},
        {&str_metadata, "metadata"},
        {&str_in_progress, "_in_progress"},
        {&str_next_update_ms, "_next_update_ms"},
        {&str_maybe_update, "maybe_update"},
        {&str_next_timeout_ms, "next_timeout_ms"},
        {&str_next_setup_timeout_ms, "next_setup_timeout_ms"},
        {&str_count, "count"},
        {&str_earliest_deadline_ms, "earliest_deadline_ms"},
        {&str_deadline_exact, "_deadline_exact"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].where = PyUnicode_InternFromString(names[k].text);
        if (*names[k].where == NULL) {
            return -1;
        }
    }
    poll_kw_names[0] = PyUnicode_InternFromString("timeout_ms");
    poll_kw_names[1] = PyUnicode_InternFromString("now_ms");
    poll_ready_kw_names[0] = poll_kw_names[1];
    zero_ms = PyLong_FromLong(0);
    if (poll_kw_names[0] == NULL || poll_kw_names[1] == NULL || zero_ms == NULL ||
        PyType_Ready(&ClientPollType) < 0 || PyType_Ready(&ClientPollReadyType) < 0 ||
        PyModule_AddObjectRef(module, "ClientPoll", (PyObject *)&ClientPollType) < 0 ||
        PyModule_AddObjectRef(module, "ClientPollReady", (PyObject *)&ClientPollReadyType) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, poll_methods);
}
