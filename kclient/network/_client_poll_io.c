/*
 * kclient.network._client, NetworkClient._poll_io for ClientPoll and ClientPollReady
 * (_client_poll.c): the selector's poll (the C KSelector's called directly), the clock, then
 * each step only when the selector reported something for it, each by the Python method that
 * does it, except what is common: sends that await a response (nothing to do), plain answers
 * (complete_receives, _client.c), and the callbacks of the finished requests (a callback's
 * exception is logged as _complete logs it, through _callback_failed). For a client without
 * an authenticator (the callers check). The client's owning thread only.
 */
#include "_client.h"

#include "../_pycall.h" /* call0..call3, done */

long long no_delay_limit_ms;
static PyObject *ckselector_poll; /* CKSelector.__dict__["poll"] (C: SelectorPoll) */
static PyTypeObject *client_response_type; /* kafka_client.ClientResponse */
static Py_ssize_t off_response_request;   /* its `request` slot */
static Py_ssize_t sel_completed_sends, sel_completed_receives, sel_connected, sel_disconnected;
static PyObject *str_poll, *str_monotonic_ms, *str_completed_sends, *str_completed_receives,
    *str_connected, *str_disconnected, *str_awaits_response, *str_handle_completed_sends,
    *str_handle_completed_receives, *str_handle_disconnections, *str_handle_connections,
    *str_to_send, *str_initiate_api_versions, *str_connecting_nodes, *str_handle_timed_out_conns,
    *str_handle_timed_out_requests, *str_callback, *str_request, *str_callback_failed, *str_count,
    *str_earliest_deadline_ms;

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

/* Whether any completed send completes a request by being written (acks=0): 1, 0, -1. */
static int
any_unanswered_send(PyObject *sends)
{
    if (!PyList_CheckExact(sends)) {
        return 1; /* the Python method sees to it */
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sends); i++) {
        PyObject *send = PyList_GET_ITEM(sends, i);
        int awaits = attr_truth_getattr(send, str_awaits_response);
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
        PyObject *request =
            slot_or_attr(response, client_response_type, off_response_request, str_request);
        PyObject *callback = request ? slot_or_attr(request, (PyTypeObject *)client_request_type,
                                                    off_callback, str_callback)
                                     : NULL;
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
        PyObject *value = take_exception();
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

/* NetworkClient._poll_io(timeout_ms) for a client without an authenticator: the responses. */
PyObject *
kclient_poll_io(PyObject *self, PyObject *timeout_ms)
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
    if (states == NULL) {
        goto exit;
    }
    any = slot_truth(versions, api_versions_type, off_av_to_send, str_to_send);
    if (any < 0 || (any && done(call1(self, str_initiate_api_versions, now)) < 0)) {
        goto exit;
    }
    any = slot_truth(states, states_type, off_st_connecting, str_connecting_nodes);
    if (any < 0 || (any && done(call2(self, str_handle_timed_out_conns, responses, now)) < 0)) {
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

/* bind_poll(CKSelector | None, NO_DELAY_LIMIT_MS, ClientResponse): the C KSelector's poll and
 * result slots, ClientResponse's `request` slot. */
static PyObject *
bind_poll(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *kselector, *response;
    long long limit;
    if (!PyArg_ParseTuple(args, "OLO!:bind_poll", &kselector, &limit, &PyType_Type, &response)) {
        return NULL;
    }
    Py_ssize_t request_at = slot_offset((PyTypeObject *)response, "request");
    if (request_at < 0) {
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
    Py_XSETREF(client_response_type, (PyTypeObject *)Py_NewRef(response));
    off_response_request = request_at;
    no_delay_limit_ms = limit;
    Py_RETURN_NONE;
}

static PyMethodDef poll_io_methods[] = {
    {"bind_poll", (PyCFunction)bind_poll, METH_VARARGS,
     "bind_poll(CKSelector | None, NO_DELAY_LIMIT_MS, ClientResponse): what ClientPoll reaches "
     "directly"},
    {NULL, NULL, 0, NULL},
};

int
kclient_client_poll_io_init(PyObject *module)
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
        {&str_count, "count"},
        {&str_earliest_deadline_ms, "earliest_deadline_ms"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].where = PyUnicode_InternFromString(names[k].text);
        if (*names[k].where == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(module, poll_io_methods);
}
