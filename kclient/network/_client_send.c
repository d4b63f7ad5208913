/*
 * kclient.network._client, the sends' side (the answers' side and the module are in
 * _client.c, what both use in _client.h).
 *
 * write_request(client, request, now_ms) is NetworkClient._do_send for a caller's request
 * (NetworkClient.send, once its checks passed) whose version is known to ApiVersions.usable:
 * the correlation id, the frame (encode_produce, else encode_request), the NetworkSend, the
 * write (the C KSelector's own send called directly: selector_send, else selector.send), then
 * _sent's bookkeeping: the InFlightRequest made on its slots, InFlightRequests.add on its
 * slots, the DEBUG line (_log_sent) when the logger would print it. It returns False, having
 * changed nothing, when the version is not cached (the Python _do_send looks it up, and
 * handles an unsupported one). For a client or in-flight table of another type, the Python
 * _sent does the bookkeeping. NetworkClient's attributes are read at their slots' offsets.
 *
 * can_send and the bindings it shares with write_request are in _client_ready.c.
 *
 * The client's owning thread only.
 */
#include "_client.h"

#include "_send.h"
#include "../_pycall.h" /* call0, call1, done */

PyObject *client_request_type;
static PyObject *encode_produce;         /* produce_fast.encode_produce: a frame or None */
static PyObject *encode_request;         /* frame.encode_request */
static PyObject *careful_encode;         /* frame._encode_request, encode_produce's fallback */
static PyObject *network_send;           /* selector.NetworkSend */
PyTypeObject *c_network_send;
static PyObject *awaits_kwnames;         /* ("awaits_response",) */
Py_ssize_t off_destination, off_callback;
static Py_ssize_t off_req_api_key, off_body, off_expect_response, off_min,
    off_max, off_created, off_req_timeout;
static PyObject *debug_level; /* logging.DEBUG */
static PyObject *str_usable, *str_correlation_id, *str_send, *str_sent, *str_add, *str_append,
    *str_clear, *str_log_sent;

/* The frame of a request: encode_produce's for Produce when it takes the body, else
 * encode_request's (what frame.encode_request does first, without its Python call). */
static PyObject *
encode(PyObject *api_key, PyObject *version, PyObject *correlation_id, PyObject *client_id,
       PyObject *body)
{
    int overflow = 0;
    long key = PyLong_Check(api_key) ? PyLong_AsLongAndOverflow(api_key, &overflow) : -1;
    if (key == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (key == 0 && !overflow) {
        PyObject *args[] = {version, correlation_id, client_id, body, careful_encode};
        PyObject *frame = PyObject_Vectorcall(encode_produce, args, 5, NULL);
        if (frame != Py_None) {
            return frame; /* the frame, or NULL with its error */
        }
        Py_DECREF(frame);
    }
    PyObject *args[] = {api_key, version, correlation_id, client_id, body};
    return PyObject_Vectorcall(encode_request, args, 5, NULL);
}

/* selector.send(send): KSelector's C send itself (selector_send) when the selector is the C
 * KSelector and its common case holds, else the method. 0, or -1 with its error. */
static int
selector_write(PyObject *selector, PyObject *send)
{
    if (ckselector_type != NULL && Py_TYPE(selector) == ckselector_type) {
        PyObject *args[] = {selector, send};
        PyObject *taken = PyObject_Vectorcall(selector_send, args, 2, NULL);
        if (taken == NULL) {
            return -1;
        }
        Py_DECREF(taken);
        if (taken == Py_True) {
            return 0;
        }
    }
    return done(call1(selector, str_send, send));
}

/* a + b + c for ints (a deadline), in C while it fits: a new reference or NULL. */
static PyObject *
add3(PyObject *a, PyObject *b, long c)
{
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) {
        int oa = 0, ob = 0;
        long long x = PyLong_AsLongLongAndOverflow(a, &oa);
        long long y = PyLong_AsLongLongAndOverflow(b, &ob);
        if (!oa && !ob && x > -(1LL << 60) && x < (1LL << 60) && y > -(1LL << 60) &&
            y < (1LL << 60)) {
            return PyLong_FromLongLong(x + y + c);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *sum = PyNumber_Add(a, b), *extra = sum ? PyLong_FromLong(c) : NULL;
    PyObject *total = extra ? PyNumber_Add(sum, extra) : NULL;
    Py_XDECREF(sum);
    Py_XDECREF(extra);
    return total;
}

/* InFlightRequests.add(entry) (in_flight.py), on its slots: 0 or -1. */
static int
in_flight_add(PyObject *in_flight, PyObject *entry)
{
    PyObject *requests = SLOT(in_flight, off_ifr_requests);
    PyObject *count = SLOT(in_flight, off_ifr_count);
    PyObject *earliest = SLOT(in_flight, off_ifr_earliest);
    if (requests == NULL || count == NULL || earliest == NULL || !PyDict_CheckExact(requests)) {
        return done(call1(in_flight, str_add, entry)); /* not as __init__ left it */
    }
    PyObject *destination = SLOT(entry, off_if_destination);
    PyObject *queue = PyDict_GetItemWithError(requests, destination); /* borrowed */
    if (queue == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        queue = PyObject_CallNoArgs(deque_type);
        if (queue == NULL) {
            return -1;
        }
        int stored = PyDict_SetItem(requests, destination, queue);
        Py_DECREF(queue);
        if (stored < 0) {
            return -1;
        }
    }
    if (done(call1(queue, str_append, entry)) < 0) {
        return -1;
    }
    PyObject *deadline =
        add3(SLOT(entry, off_send_time_ms), SLOT(entry, off_request_timeout_ms), 1);
    if (deadline == NULL) {
        return -1;
    }
    int any = PyObject_IsTrue(count);
    if (any > 0) { /* min(earliest, deadline) */
        int earlier = PyObject_RichCompareBool(deadline, earliest, Py_LT);
        if (earlier < 0) {
            Py_DECREF(deadline);
            return -1;
        }
        if (earlier) {
            Py_SETREF(SLOT(in_flight, off_ifr_earliest), Py_NewRef(deadline));
        }
    }
    else if (any == 0) { /* the only one: its deadline is the earliest */
        Py_SETREF(SLOT(in_flight, off_ifr_earliest), Py_NewRef(deadline));
        Py_XSETREF(SLOT(in_flight, off_ifr_exact), Py_NewRef(Py_True));
    }
    Py_DECREF(deadline);
    if (any < 0) {
        return -1;
    }
    PyObject *more = PyNumber_Add(count, one);
    if (more == NULL) {
        return -1;
    }
    Py_SETREF(SLOT(in_flight, off_ifr_count), more);
    return 0;
}

/* NetworkClient._sent for a caller's request (is_internal False): the InFlightRequest made on
 * its slots, InFlightRequests.add, the debug line. The Python _sent for another client or
 * in-flight type. 0 or -1. */
static int
record_sent(PyObject *client, PyObject *request, PyObject *now_ms, PyObject *version,
            PyObject *correlation_id, PyObject *send)
{
    PyObject *in_flight = client_get(client, C_IN_FLIGHT_REQUESTS);
    if (in_flight == NULL) {
        return -1;
    }
    PyTypeObject *entry_type = (PyTypeObject *)in_flight_request_type;
    PyObject *timeout = SLOT(request, off_req_timeout), *created = SLOT(request, off_created);
    if (Py_TYPE(client) != network_client_type || Py_TYPE(in_flight) != in_flight_requests_type ||
        timeout == NULL || created == NULL) {
        Py_DECREF(in_flight);
        PyObject *args[] = {client, request, Py_False, now_ms, version, correlation_id, send};
        return done(PyObject_VectorcallMethod(str_sent, args, 7, NULL));
    }
    int result = -1;
    PyObject *entry = NULL;
    int given = PyObject_IsTrue(timeout); /* request.request_timeout_ms or the client's */
    timeout = given > 0 ? Py_NewRef(timeout)
                        : (given == 0 ? client_get(client, C_REQUEST_TIMEOUT_MS) : NULL);
    if (timeout == NULL) {
        goto exit;
    }
    entry = entry_type->tp_alloc(entry_type, 0);
    if (entry == NULL) {
        goto exit;
    }
    Py_ssize_t where[] = {off_if_destination, off_api_key,        off_api_version,
                          off_correlation_id, off_send,           off_send_time_ms,
                          off_created_time_ms, off_request_timeout_ms, off_request,
                          off_if_expect_response, off_is_internal};
    PyObject *what[] = {SLOT(request, off_destination), SLOT(request, off_req_api_key),
                        version,
                        correlation_id,
                        send,
                        now_ms,
                        created,
                        timeout,
                        request,
                        SLOT(request, off_expect_response),
                        Py_False};
    for (size_t k = 0; k < sizeof(where) / sizeof(where[0]); k++) {
        SLOT(entry, where[k]) = Py_NewRef(what[k]);
    }
    if (in_flight_add(in_flight, entry) < 0) {
        goto exit;
    }
    int debug = logger_enabled_for(client_logger, debug_level);
    if (debug < 0) {
        goto exit;
    }
    if (debug) {
        PyObject *args[] = {client, request, version, correlation_id, send};
        if (done(PyObject_VectorcallMethod(str_log_sent, args, 5, NULL)) < 0) {
            goto exit;
        }
    }
    result = 0;
exit:
    Py_XDECREF(entry);
    Py_XDECREF(timeout);
    Py_DECREF(in_flight);
    return result;
}

PyObject *
kclient_write_request(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_request(client, request, now_ms)");
        return NULL;
    }
    if (network_send == NULL || in_flight_request_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "kclient.network._client.bind() and bind_send() were not called");
        return NULL;
    }
    PyObject *client = args[0], *request = args[1], *now_ms = args[2];
    if ((PyObject *)Py_TYPE(request) != client_request_type) {
        Py_RETURN_FALSE;
    }
    PyObject *node_id = SLOT(request, off_destination), *api_key = SLOT(request, off_req_api_key),
             *body = SLOT(request, off_body), *expect = SLOT(request, off_expect_response),
             *min_version = SLOT(request, off_min), *max_version = SLOT(request, off_max);
    if (!node_id || !api_key || !body || !expect || !min_version || !max_version) {
        Py_RETURN_FALSE;
    }
    PyObject *result = NULL, *versions = NULL, *usable = NULL, *key = NULL, *version = NULL;
    PyObject *correlation_id = NULL, *next = NULL, *client_id = NULL, *made = NULL;
    PyObject *frame = NULL, *send = NULL, *selector = NULL;
    /* the version first: without it, nothing changes and the Python _do_send runs */
    versions = client_get(client, C_API_VERSIONS);
    usable = versions ? slot_or_attr(versions, api_versions_type, off_av_usable, str_usable) : NULL;
    if (usable == NULL) {
        goto exit;
    }
    if (!PyDict_CheckExact(usable)) {
        result = Py_NewRef(Py_False);
        goto exit;
    }
    key = PyTuple_Pack(4, node_id, api_key, min_version, max_version);
    if (key == NULL) {
        goto exit;
    }
    version = PyDict_GetItemWithError(usable, key);
    if (version == NULL) {
        if (!PyErr_Occurred()) {
            result = Py_NewRef(Py_False);
        }
        goto exit;
    }
    Py_INCREF(version);
    correlation_id = client_get(client, C_CORRELATION_ID);
    if (correlation_id == NULL) {
        goto exit;
    }
    int overflow = 0;
    long id = PyLong_CheckExact(correlation_id)
                  ? PyLong_AsLongAndOverflow(correlation_id, &overflow)
                  : -1;
    if (id == -1 && PyErr_Occurred()) {
        goto exit;
    }
    if (id < 0 || overflow) { /* not what this client counts: the Python way */
        result = Py_NewRef(Py_False);
        goto exit;
    }
    /* from here on as _do_send: the send clears what ready() remembered */
    PyObject *checked = client_get(client, C_CHECKED);
    if (checked == NULL) {
        goto exit;
    }
    if (PyDict_CheckExact(checked)) {
        if (PyDict_GET_SIZE(checked)) {
            PyDict_Clear(checked);
        }
        Py_DECREF(checked);
    }
    else {
        int cleared = done(call0(checked, str_clear));
        Py_DECREF(checked);
        if (cleared < 0) {
            goto exit;
        }
    }
    next = PyLong_FromLong(id >= 2147483647L ? 0 : id + 1);
    if (next == NULL) {
        goto exit;
    }
    if (Py_TYPE(client) == network_client_type) {
        Py_XSETREF(SLOT(client, client_slots[C_CORRELATION_ID]), Py_NewRef(next));
    }
    else if (PyObject_SetAttr(client, str_correlation_id, next) < 0) {
        goto exit;
    }
    client_id = client_get(client, C_CLIENT_ID);
    if (client_id == NULL) {
        goto exit;
    }
    if (PyCallable_Check(body)) {
        made = PyObject_CallOneArg(body, version);
        if (made == NULL) {
            goto exit;
        }
        body = made;
    }
    frame = encode(api_key, version, correlation_id, client_id, body);
    if (frame == NULL) {
        goto exit;
    }
    PyObject *send_args[] = {node_id, frame, expect};
    send = PyObject_Vectorcall(network_send, send_args, 2, awaits_kwnames);
    selector = send ? client_get(client, C_SELECTOR) : NULL;
    /* on the wire first, the bookkeeping after (as _do_send) */
    if (selector == NULL || selector_write(selector, send) < 0 ||
        record_sent(client, request, now_ms, version, correlation_id, send) < 0) {
        goto exit;
    }
    result = Py_NewRef(Py_True);
exit:
    Py_XDECREF(versions);
    Py_XDECREF(usable);
    Py_XDECREF(key);
    Py_XDECREF(version);
    Py_XDECREF(correlation_id);
    Py_XDECREF(next);
    Py_XDECREF(client_id);
    Py_XDECREF(made);
    Py_XDECREF(frame);
    Py_XDECREF(send);
    Py_XDECREF(selector);
    return result;
}

static PyObject *
bind_send(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *type, *produce, *request, *careful, *send;
    if (!PyArg_ParseTuple(args, "O!OOOO:bind_send", &PyType_Type, &type, &produce, &request,
                          &careful, &send)) {
        return NULL;
    }
    Py_ssize_t offsets[9];
    const char *names[] = {"destination",     "api_key",         "body",
                           "expect_response", "min_version",     "max_version",
                           "created_time_ms", "request_timeout_ms", "callback"};
    for (int k = 0; k < 9; k++) {
        offsets[k] = slot_offset((PyTypeObject *)type, names[k]);
        if (offsets[k] < 0) {
            return NULL;
        }
    }
    off_destination = offsets[0];
    off_req_api_key = offsets[1];
    off_body = offsets[2];
    off_expect_response = offsets[3];
    off_min = offsets[4];
    off_max = offsets[5];
    off_created = offsets[6];
    off_req_timeout = offsets[7];
    off_callback = offsets[8];
    if (awaits_kwnames == NULL) {
        awaits_kwnames = Py_BuildValue("(s)", "awaits_response");
        if (awaits_kwnames == NULL) {
            return NULL;
        }
    }
    Py_XSETREF(client_request_type, Py_NewRef(type));
    Py_XSETREF(encode_produce, Py_NewRef(produce));
    Py_XSETREF(encode_request, Py_NewRef(request));
    Py_XSETREF(careful_encode, Py_NewRef(careful));
    Py_XSETREF(network_send, Py_NewRef(send));
    c_network_send = PyType_Check(send) &&
                             strcmp(((PyTypeObject *)send)->tp_name,
                                    "kclient.network._channel.NetworkSend") == 0 &&
                             ((PyTypeObject *)send)->tp_basicsize == sizeof(NetworkSend)
                         ? (PyTypeObject *)send
                         : NULL;
    Py_RETURN_NONE;
}


static PyMethodDef send_methods[] = {
    {"bind_send", (PyCFunction)bind_send, METH_VARARGS,
     "bind_send(ClientRequest, encode_produce, encode_request, careful_encode, NetworkSend): "
     "what write_request calls"},
    {"write_request", (PyCFunction)(void (*)(void))kclient_write_request, METH_FASTCALL,
     "write_request(client, request, now_ms) -> False when the Python _do_send must run"},
    {NULL, NULL, 0, NULL},
};

int
kclient_client_send_init(PyObject *module)
{
    struct {
        PyObject **where;
        const char *text;
    } names[] = {
        {&str_usable, "usable"},
        {&str_correlation_id, "_correlation_id"},
        {&str_send, "send"},
        {&str_sent, "_sent"},
        {&str_add, "add"},
        {&str_append, "append"},
        {&str_clear, "clear"},
        {&str_log_sent, "_log_sent"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].where = PyUnicode_InternFromString(names[k].text);
        if (*names[k].where == NULL) {
            return -1;
        }
    }
    debug_level = PyLong_FromLong(10); /* logging.DEBUG */
    if (debug_level == NULL) {
        return -1;
    }
    return PyModule_AddFunctions(module, send_methods);
}
