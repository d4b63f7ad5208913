/*
 * kclient.network._client: the common case of NetworkClient's per-response work in C. This
 * file is the answers' side and the module; the sends' side (write_request, can_send) is in
 * _client_send.c, what both use in _client.h.
 *
 * complete_receives(receives, in_flight, responses, now_ms) walks the selector's completed
 * receives as NetworkClient._handle_completed_receives (kclient/network/client.py) does, for
 * as long as each one is the plain case: the node has a request in flight, it is an
 * InFlightRequest the caller sent (not ApiVersions, Metadata or SASL), the answer's
 * correlation id is that request's, the answer decodes, and it asks for no throttling. For
 * each: the request leaves the in-flight queue (InFlightRequests.complete_next_or_none) and
 * its ClientResponse (InFlightRequest.completed) is appended to `responses`. It returns the
 * index of the first receive it did not take (len(receives) when it took them all) and
 * leaves that one untouched: the Python loop does the rest, every error path included.
 *
 * Optional: client.py runs its own loop alone when this module is not built or
 * KCLIENT_PURE_PYTHON is set; the tests compare both. The client's owning thread only.
 */
#include "_client.h"

#include <string.h>

#include "_send.h"

PyObject *in_flight_request_type;        /* kclient.network.in_flight.InFlightRequest */
static PyObject *decode_produce;         /* produce_fast.decode_produce: a tuple or None */
static PyObject *decode_response;        /* frame.decode_response */
static PyObject *new_client_response;    /* kafka_client.new_client_response */
static PyObject *decode_errors;          /* what the Python loop catches from decoding */
Py_ssize_t off_send, off_correlation_id, off_api_key, off_api_version, off_request,
    off_is_internal, off_if_destination, off_send_time_ms, off_created_time_ms,
    off_request_timeout_ms, off_if_expect_response;
PyObject *str_requests;
static PyObject *str_source, *str_payload, *str_count, *str_deadline_exact,
    *str_throttle_time_ms, *str_popleft;

/* The correlation id at the front of a response frame; 0 (no exception) when the payload is
 * not a buffer of at least four bytes: the Python loop says what is wrong with it. */
static int
peek_correlation_id(PyObject *payload, long *correlation_id)
{
    Py_buffer view;
    if (PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    int ok = view.len >= 4;
    if (ok) {
        const unsigned char *p = (const unsigned char *)view.buf;
        uint32_t raw = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                       (uint32_t)p[3];
        *correlation_id = (long)(int32_t)raw;
    }
    PyBuffer_Release(&view);
    return ok;
}

/* The decoded body of `payload` as `request` (api key, version) reads it: a new reference to
 * the dict, NULL with no exception when the Python loop must take this receive (a decode
 * error, a body that is not a dict), NULL with an exception for anything else. */
static PyObject *
decode_body(PyObject *request, PyObject *payload)
{
    PyObject *api_key = SLOT(request, off_api_key);
    PyObject *api_version = SLOT(request, off_api_version);
    PyObject *answer = NULL;
    if (PyLong_Check(api_key)) {
        int overflow = 0;
        long key = PyLong_AsLongAndOverflow(api_key, &overflow);
        if (key == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (key == 0 && !overflow) { /* Produce: decode_response's first step */
            PyObject *args[] = {api_version, payload};
            answer = PyObject_Vectorcall(decode_produce, args, 2, NULL);
            if (answer == Py_None) {
                Py_CLEAR(answer);
            }
            else if (answer == NULL) {
                goto failed;
            }
        }
    }
    if (answer == NULL) {
        PyObject *args[] = {api_key, api_version, payload};
        answer = PyObject_Vectorcall(decode_response, args, 3, NULL);
        if (answer == NULL) {
            goto failed;
        }
    }
    if (!PyTuple_CheckExact(answer) || PyTuple_GET_SIZE(answer) != 2 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(answer, 1))) {
        Py_DECREF(answer);
        return NULL;
    }
    PyObject *body = Py_NewRef(PyTuple_GET_ITEM(answer, 1));
    Py_DECREF(answer);
    return body;
failed:
    if (PyErr_ExceptionMatches(decode_errors)) {
        PyErr_Clear(); /* the Python loop decodes again and handles it */
    }
    return NULL;
}

/* receive.source and receive.payload: read in place from _channel's C NetworkReceive, else by
 * name. New references in *source and *payload; 0, or -1 with *both* NULL. */
static int
receive_parts(PyObject *receive, PyObject **source, PyObject **payload)
{
    static PyTypeObject *c_receive_type; /* _channel's NetworkReceive, once seen */
    PyTypeObject *type = Py_TYPE(receive);
    if (c_receive_type == NULL && strcmp(type->tp_name, "kclient.network._channel.NetworkReceive") == 0 &&
        type->tp_basicsize == sizeof(NetworkReceive)) {
        c_receive_type = type;
    }
    if (type == c_receive_type && ((NetworkReceive *)receive)->source != NULL &&
        ((NetworkReceive *)receive)->payload != NULL) {
        *source = Py_NewRef(((NetworkReceive *)receive)->source);
        *payload = Py_NewRef(((NetworkReceive *)receive)->payload);
        return 0;
    }
    *source = PyObject_GetAttr(receive, str_source);
    *payload = *source ? PyObject_GetAttr(receive, str_payload) : NULL;
    if (*payload == NULL) {
        Py_CLEAR(*source);
        return -1;
    }
    return 0;
}

/* One plain receive taken: 1; 0 (no exception) to leave it to the Python loop; -1 error. */
static int
complete_one(PyObject *receive, PyObject *requests, PyObject *responses, PyObject *now_ms,
             int *count_changed)
{
    int result = 0;
    PyObject *source = NULL, *payload = NULL, *queue = NULL, *request = NULL, *body = NULL;
    PyObject *popped = NULL, *response = NULL;
    if (receive_parts(receive, &source, &payload) < 0) {
        goto error;
    }
    queue = PyDict_GetItemWithError(requests, source); /* borrowed */
    if (queue == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        goto done;
    }
    Py_INCREF(queue);
    Py_ssize_t length = PyObject_Length(queue);
    if (length < 0) {
        goto error;
    }
    if (length == 0) {
        goto done;
    }
    request = PySequence_GetItem(queue, 0);
    if (request == NULL) {
        goto error;
    }
    if ((PyObject *)Py_TYPE(request) != in_flight_request_type ||
        SLOT(request, off_is_internal) != Py_False || SLOT(request, off_api_key) == NULL ||
        SLOT(request, off_api_version) == NULL || SLOT(request, off_request) == NULL ||
        SLOT(request, off_correlation_id) == NULL) {
        goto done; /* not plainly the caller's request (or a member deleted) */
    }
    PyObject *expected = SLOT(request, off_correlation_id);
    long correlation_id;
    if (!PyLong_CheckExact(expected) || !peek_correlation_id(payload, &correlation_id)) {
        goto done;
    }
    int overflow = 0;
    long wanted = PyLong_AsLongAndOverflow(expected, &overflow);
    if (overflow || wanted != correlation_id) {
        if (wanted == -1 && PyErr_Occurred()) {
            goto error;
        }
        goto done;
    }
    body = decode_body(request, payload);
    if (body == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        goto done;
    }
    PyObject *throttle = PyDict_GetItemWithError(body, str_throttle_time_ms);
    if (throttle != NULL) {
        int asks = PyObject_IsTrue(throttle);
        if (asks < 0) {
            goto error;
        }
        if (asks) {
            goto done; /* the Python loop applies it */
        }
    }
    else if (PyErr_Occurred()) {
        goto error;
    }
    popped = PyObject_CallMethodNoArgs(queue, str_popleft);
    if (popped == NULL) {
        goto error;
    }
    *count_changed += 1;
    PyObject *args[] = {SLOT(request, off_request), body, now_ms, SLOT(request, off_api_version),
                        SLOT(request, off_correlation_id)};
    response = PyObject_Vectorcall(new_client_response, args, 5, NULL);
    if (response == NULL || PyList_Append(responses, response) < 0) {
        goto error;
    }
    result = 1;
    goto done;
error:
    result = -1;
done:
    Py_XDECREF(source);
    Py_XDECREF(payload);
    Py_XDECREF(queue);
    Py_XDECREF(request);
    Py_XDECREF(body);
    Py_XDECREF(popped);
    Py_XDECREF(response);
    return result;
}

/* InFlightRequests.count -= taken, and its deadline no longer exact (complete_next_or_none):
 * on its slots, else by name. */
static int
forget_taken(PyObject *in_flight, int taken)
{
    PyObject *count = in_flight_get(in_flight, off_ifr_count, str_count);
    if (count == NULL) {
        return -1;
    }
    PyObject *delta = PyLong_FromLong(taken);
    PyObject *left = delta ? PyNumber_Subtract(count, delta) : NULL;
    Py_DECREF(count);
    Py_XDECREF(delta);
    if (left == NULL) {
        return -1;
    }
    if (Py_TYPE(in_flight) == in_flight_requests_type) {
        Py_XSETREF(SLOT(in_flight, off_ifr_count), left);
        Py_XSETREF(SLOT(in_flight, off_ifr_exact), Py_NewRef(Py_False));
        return 0;
    }
    int failed = PyObject_SetAttr(in_flight, str_count, left) < 0 ||
                 PyObject_SetAttr(in_flight, str_deadline_exact, Py_False) < 0;
    Py_DECREF(left);
    return failed ? -1 : 0;
}

PyObject *
kclient_complete_receives(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "complete_receives(receives, in_flight, responses: list, now_ms)");
        return NULL;
    }
    if (!PyList_CheckExact(args[0])) {
        return PyLong_FromLong(0); /* another sequence: the Python loop takes it all */
    }
    if (decode_response == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.network._client.bind() was not called");
        return NULL;
    }
    PyObject *receives = args[0], *in_flight = args[1], *responses = args[2], *now_ms = args[3];
    PyObject *requests = in_flight_get(in_flight, off_ifr_requests, str_requests);
    if (requests == NULL) {
        return NULL;
    }
    if (!PyDict_CheckExact(requests)) {
        Py_DECREF(requests);
        return PyLong_FromLong(0);
    }
    Py_ssize_t i = 0;
    int taken = 0, outcome = 0;
    for (; i < PyList_GET_SIZE(receives); i++) {
        PyObject *receive = Py_NewRef(PyList_GET_ITEM(receives, i));
        outcome = complete_one(receive, requests, responses, now_ms, &taken);
        Py_DECREF(receive);
        if (outcome != 1) {
            break;
        }
    }
    Py_DECREF(requests);
    if (taken) { /* the count follows what was taken, even when a later receive raised */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (forget_taken(in_flight, taken) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            return NULL;
        }
        PyErr_Restore(type, value, traceback);
    }
    if (outcome < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

static PyObject *
bind(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *type, *produce, *response, *new_response, *errors;
    if (!PyArg_ParseTuple(args, "O!OOOO!:bind", &PyType_Type, &type, &produce, &response,
                          &new_response, &PyTuple_Type, &errors)) {
        return NULL;
    }
    Py_ssize_t offsets[11];
    const char *names[] = {"correlation_id",  "api_key",           "api_version",
                           "request",         "is_internal",       "send",
                           "destination",     "send_time_ms",      "created_time_ms",
                           "request_timeout_ms", "expect_response"};
    for (int k = 0; k < 11; k++) {
        offsets[k] = slot_offset((PyTypeObject *)type, names[k]);
        if (offsets[k] < 0) {
            return NULL;
        }
    }
    off_correlation_id = offsets[0];
    off_api_key = offsets[1];
    off_api_version = offsets[2];
    off_request = offsets[3];
    off_is_internal = offsets[4];
    off_send = offsets[5];
    off_if_destination = offsets[6];
    off_send_time_ms = offsets[7];
    off_created_time_ms = offsets[8];
    off_request_timeout_ms = offsets[9];
    off_if_expect_response = offsets[10];
    Py_XSETREF(in_flight_request_type, Py_NewRef(type));
    Py_XSETREF(decode_produce, Py_NewRef(produce));
    Py_XSETREF(decode_response, Py_NewRef(response));
    Py_XSETREF(new_client_response, Py_NewRef(new_response));
    Py_XSETREF(decode_errors, Py_NewRef(errors));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)bind, METH_VARARGS,
     "bind(InFlightRequest, decode_produce, decode_response, new_client_response, "
     "decode_errors): what complete_receives calls"},
    {"complete_receives", (PyCFunction)(void (*)(void))kclient_complete_receives, METH_FASTCALL,
     "complete_receives(receives, in_flight, responses, now_ms) -> the index of the first "
     "receive left to the Python loop"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kclient.network._client",
    "The common case of NetworkClient's per-response work (see client.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__client(void)
{
    struct {
        PyObject **where;
        const char *text;
    } names[] = {
        {&str_source, "source"},
        {&str_payload, "payload"},
        {&str_requests, "_requests"},
        {&str_count, "count"},
        {&str_deadline_exact, "_deadline_exact"},
        {&str_throttle_time_ms, "throttle_time_ms"},
        {&str_popleft, "popleft"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].where = PyUnicode_InternFromString(names[k].text);
        if (*names[k].where == NULL) {
            return NULL;
        }
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (kclient_client_send_init(m) < 0 || kclient_client_ready_init(m) < 0 ||
        kclient_client_poll_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
