/*
 * kclient.network._client, the sends' side (the answers' side and the module are in
 * _client.c, what both use in _client.h).
 *
 * write_request(client, request, now_ms) is NetworkClient._do_send up to the write, for a
 * caller's request (NetworkClient.send, once its checks passed) whose version is known to
 * ApiVersions.usable: the correlation id, the frame (encode_produce, else encode_request), the
 * NetworkSend, selector.send; then the Python _sent does the bookkeeping after the write. It
 * returns False, having changed nothing, when the version is not cached (the Python
 * _do_send looks it up, and handles an unsupported one).
 *
 * can_send(client, node_id, now_ms) is NetworkClient.can_send_request (READY and not
 * throttled, the channel ready, the newest request written and fewer than the maximum in
 * flight) as one call, for ready() and send().
 *
 * The client's owning thread only.
 */
#include "_client.h"

static PyObject *client_request_type;    /* kafka_client.ClientRequest */
static PyObject *encode_produce;         /* produce_fast.encode_produce: a frame or None */
static PyObject *encode_request;         /* frame.encode_request */
static PyObject *careful_encode;         /* frame._encode_request, encode_produce's fallback */
static PyObject *network_send;           /* selector.NetworkSend */
static PyObject *awaits_kwnames;         /* ("awaits_response",) */
static Py_ssize_t off_destination, off_req_api_key, off_body, off_expect_response, off_min,
    off_max;
static PyObject *str_checked, *str_api_versions, *str_usable, *str_correlation_id,
    *str_client_id, *str_selector, *str_send, *str_sent, *str_connection_states,
    *str_ready_nodes, *str_is_channel_ready, *str_in_flight_requests, *str_completed,
    *str_max_in_flight;

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

static PyObject *
write_request(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_request(client, request, now_ms)");
        return NULL;
    }
    if (network_send == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.network._client.bind_send() was not called");
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
    PyObject *frame = NULL, *send = NULL, *selector = NULL, *done = NULL;
    /* the version first: without it, nothing changes and the Python _do_send runs */
    versions = PyObject_GetAttr(client, str_api_versions);
    usable = versions ? PyObject_GetAttr(versions, str_usable) : NULL;
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
    correlation_id = PyObject_GetAttr(client, str_correlation_id);
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
    PyObject *checked = PyObject_GetAttr(client, str_checked);
    if (checked == NULL) {
        goto exit;
    }
    if (PyDict_CheckExact(checked)) {
        PyDict_Clear(checked);
        Py_DECREF(checked);
    }
    else {
        PyObject *cleared = PyObject_CallMethod(checked, "clear", NULL);
        Py_DECREF(checked);
        if (cleared == NULL) {
            goto exit;
        }
        Py_DECREF(cleared);
    }
    next = PyLong_FromLong(id >= 2147483647L ? 0 : id + 1);
    if (next == NULL || PyObject_SetAttr(client, str_correlation_id, next) < 0) {
        goto exit;
    }
    client_id = PyObject_GetAttr(client, str_client_id);
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
    selector = send ? PyObject_GetAttr(client, str_selector) : NULL;
    if (selector == NULL) {
        goto exit;
    }
    done = PyObject_CallMethodOneArg(selector, str_send, send);
    if (done == NULL) {
        goto exit;
    }
    Py_DECREF(done);
    PyObject *sent_args[] = {client, request, Py_False, now_ms, version, correlation_id, send};
    done = PyObject_VectorcallMethod(str_sent, sent_args, 7, NULL);
    if (done == NULL) {
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
    Py_XDECREF(done);
    return result;
}

/* 1 when the in-flight queue lets the node take another request, 0 when not, -1 error. */
static int
in_flight_allows(PyObject *in_flight, PyObject *node_id)
{
    PyObject *requests = PyObject_GetAttr(in_flight, str_requests);
    if (requests == NULL) {
        return -1;
    }
    PyObject *queue = PyObject_GetItem(requests, node_id);
    Py_DECREF(requests);
    if (queue == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
            return -1;
        }
        PyErr_Clear();
        return 1;
    }
    int allows = -1;
    PyObject *newest = NULL, *send = NULL, *completed = NULL, *most = NULL;
    Py_ssize_t length = PyObject_Length(queue);
    if (length <= 0) {
        allows = length == 0 ? 1 : -1;
        goto exit;
    }
    newest = PySequence_GetItem(queue, length - 1);
    if (newest == NULL) {
        goto exit;
    }
    if ((PyObject *)Py_TYPE(newest) == in_flight_request_type) {
        send = Py_XNewRef(SLOT(newest, off_send));
    }
    if (send == NULL) {
        send = PyObject_GetAttr(newest, str_send);
        if (send == NULL) {
            goto exit;
        }
    }
    completed = PyObject_GetAttr(send, str_completed);
    if (completed == NULL) {
        goto exit;
    }
    allows = PyObject_IsTrue(completed);
    if (allows != 1) {
        goto exit;
    }
    most = PyObject_GetAttr(in_flight, str_max_in_flight);
    PyObject *count = most ? PyLong_FromSsize_t(length) : NULL;
    allows = count ? PyObject_RichCompareBool(count, most, Py_LT) : -1;
    Py_XDECREF(count);
exit:
    Py_DECREF(queue);
    Py_XDECREF(newest);
    Py_XDECREF(send);
    Py_XDECREF(completed);
    Py_XDECREF(most);
    return allows;
}

static PyObject *
can_send(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "can_send(client, node_id, now_ms)");
        return NULL;
    }
    if (in_flight_request_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.network._client.bind() was not called");
        return NULL;
    }
    PyObject *client = args[0], *node_id = args[1], *now_ms = args[2];
    int yes = -1;
    PyObject *states = NULL, *ready_nodes = NULL, *throttle = NULL, *selector = NULL;
    PyObject *channel_ready = NULL, *in_flight = NULL;
    states = PyObject_GetAttr(client, str_connection_states);
    ready_nodes = states ? PyObject_GetAttr(states, str_ready_nodes) : NULL;
    if (ready_nodes == NULL) {
        goto exit;
    }
    throttle = PyObject_GetItem(ready_nodes, node_id); /* READY: its throttle_until_ms */
    if (throttle == NULL) {
        if (PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            yes = 0;
        }
        goto exit;
    }
    yes = PyObject_RichCompareBool(throttle, now_ms, Py_LE);
    if (yes != 1) {
        goto exit;
    }
    selector = PyObject_GetAttr(client, str_selector);
    channel_ready =
        selector ? PyObject_CallMethodOneArg(selector, str_is_channel_ready, node_id) : NULL;
    yes = channel_ready ? PyObject_IsTrue(channel_ready) : -1;
    if (yes != 1) {
        goto exit;
    }
    in_flight = PyObject_GetAttr(client, str_in_flight_requests);
    yes = in_flight ? in_flight_allows(in_flight, node_id) : -1;
exit:
    Py_XDECREF(states);
    Py_XDECREF(ready_nodes);
    Py_XDECREF(throttle);
    Py_XDECREF(selector);
    Py_XDECREF(channel_ready);
    Py_XDECREF(in_flight);
    if (yes < 0) {
        return NULL;
    }
    return PyBool_FromLong(yes);
}

static PyObject *
bind_send(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *type, *produce, *request, *careful, *send;
    if (!PyArg_ParseTuple(args, "O!OOOO:bind_send", &PyType_Type, &type, &produce, &request,
                          &careful, &send)) {
        return NULL;
    }
    Py_ssize_t offsets[6];
    const char *names[] = {"destination",     "api_key",     "body",
                           "expect_response", "min_version", "max_version"};
    for (int k = 0; k < 6; k++) {
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
    Py_RETURN_NONE;
}

static PyMethodDef send_methods[] = {
    {"bind_send", (PyCFunction)bind_send, METH_VARARGS,
     "bind_send(ClientRequest, encode_produce, encode_request, careful_encode, NetworkSend): "
     "what write_request calls"},
    {"can_send", (PyCFunction)(void (*)(void))can_send, METH_FASTCALL,
     "can_send(client, node_id, now_ms) -> NetworkClient.can_send_request's answer"},
    {"write_request", (PyCFunction)(void (*)(void))write_request, METH_FASTCALL,
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
        {&str_checked, "_checked"},
        {&str_api_versions, "_api_versions"},
        {&str_usable, "usable"},
        {&str_correlation_id, "_correlation_id"},
        {&str_client_id, "client_id"},
        {&str_selector, "_selector"},
        {&str_send, "send"},
        {&str_sent, "_sent"},
        {&str_connection_states, "connection_states"},
        {&str_ready_nodes, "ready_nodes"},
        {&str_is_channel_ready, "is_channel_ready"},
        {&str_in_flight_requests, "in_flight_requests"},
        {&str_completed, "completed"},
        {&str_max_in_flight, "max_in_flight_requests_per_connection"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].where = PyUnicode_InternFromString(names[k].text);
        if (*names[k].where == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(module, send_methods);
}
