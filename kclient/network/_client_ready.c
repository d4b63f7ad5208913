/*
 * kclient.network._client, the readiness side (the answers' side and the module are in
 * _client.c, the sends' side in _client_send.c, what they share in _client.h).
 *
 * can_send(client, node_id, now_ms) is NetworkClient.can_send_request (READY and not
 * throttled, the channel ready, the newest request written and fewer than the maximum in
 * flight) as one call, for ready() and send(): NetworkClient's and InFlightRequests'
 * attributes read at their slots' offsets, the C KSelector's is_channel_ready called
 * directly, a C NetworkSend's `completed` read in place; by name for any other type.
 *
 * ClientReady and ClientSend are NetworkClient.ready and send as method descriptors over the
 * Python functions (_fallback_method.h), for the common case: a NetworkClient (open, for
 * send) whose node is ready (a Node with an address; no metadata refresh due; can_send) and,
 * for send, a ClientRequest (then write_request, else _do_send). Anything else, every error
 * included, goes to the Python function whole, before anything was done.
 *
 * bind_client binds what these reach directly. The client's owning thread only.
 */
#include "_client.h"

#include "_send.h"
#include <stddef.h>

#include "../_fallback_method.h"
#include "../_pycall.h" /* call1, call3 */

PyTypeObject *network_client_type, *in_flight_requests_type, *ckselector_type;
Py_ssize_t off_ifr_requests, off_ifr_count, off_ifr_earliest, off_ifr_exact, off_ifr_max;
PyObject *selector_send, *client_logger, *deque_type, *one;
PyTypeObject *node_type, *updater_type, *states_type, *api_versions_type;
Py_ssize_t off_st_connecting, off_st_ready, off_av_to_send, off_av_usable;
Py_ssize_t off_node_id, off_node_host, off_node_port, off_upd_in_progress, off_upd_metadata;
Py_ssize_t client_slots[C_COUNT];
static PyObject *channel_ready; /* CKSelector.__dict__["is_channel_ready"] (C: ChannelReady) */
static const char *client_slot_names[C_COUNT] = {
    "_api_versions",      "_checked",           "_correlation_id", "_selector",
    "client_id",          "connection_states",  "in_flight_requests",
    "request_timeout_ms", "_closed",            "_aborted",        "_authenticator",
    "_clock",             "metadata_updater",   "_unanswered"};
static PyObject *client_slot_strs[C_COUNT];
static PyObject *str_ready_nodes, *str_is_channel_ready, *str_completed, *str_can_send_more,
    *str_get, *str_send, *str_host, *str_port, *str_id, *str_in_progress, *str_metadata,
    *str_next_update_ms, *str_do_send, *zero;

PyObject *
client_get(PyObject *client, int field)
{
    if (Py_TYPE(client) == network_client_type) {
        PyObject *value = SLOT(client, client_slots[field]);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(client, client_slot_strs[field]);
}

/* Whether the newest request's send is written whole (send.completed): 1, 0, -1. */
static int
send_completed(PyObject *send)
{
    if (c_network_send != NULL && Py_TYPE(send) == c_network_send) {
        return ((NetworkSend *)send)->remaining == 0;
    }
    return attr_truth_getattr(send, str_completed);
}

/* InFlightRequests.can_send_more(node_id): 1 when the in-flight queue lets the node take
 * another request, 0 when not, -1 error. */
static int
in_flight_allows(PyObject *in_flight, PyObject *node_id)
{
    if (Py_TYPE(in_flight) != in_flight_requests_type || SLOT(in_flight, off_ifr_max) == NULL ||
        SLOT(in_flight, off_ifr_requests) == NULL ||
        !PyDict_CheckExact(SLOT(in_flight, off_ifr_requests))) {
        PyObject *more = call1(in_flight, str_can_send_more, node_id);
        int yes = more ? PyObject_IsTrue(more) : -1;
        Py_XDECREF(more);
        return yes;
    }
    PyObject *queue = PyDict_GetItemWithError(SLOT(in_flight, off_ifr_requests), node_id);
    if (queue == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    Py_INCREF(queue);
    int allows = -1;
    PyObject *newest = NULL, *count = NULL;
    Py_ssize_t length = PyObject_Length(queue);
    if (length <= 0) {
        allows = length == 0 ? 1 : -1;
        goto exit;
    }
    newest = PySequence_GetItem(queue, length - 1);
    if (newest == NULL) {
        goto exit;
    }
    PyObject *send = (PyObject *)Py_TYPE(newest) == in_flight_request_type
                         ? Py_XNewRef(SLOT(newest, off_send))
                         : PyObject_GetAttr(newest, str_send);
    if (send == NULL) {
        if (!PyErr_Occurred()) { /* the slot deleted: as Python says it */
            send = PyObject_GetAttr(newest, str_send);
        }
        if (send == NULL) {
            goto exit;
        }
    }
    allows = send_completed(send);
    Py_DECREF(send);
    if (allows != 1) {
        goto exit;
    }
    count = PyLong_FromSsize_t(length);
    allows = count ? PyObject_RichCompareBool(count, SLOT(in_flight, off_ifr_max), Py_LT) : -1;
exit:
    Py_DECREF(queue);
    Py_XDECREF(newest);
    Py_XDECREF(count);
    return allows;
}

/* selector.is_channel_ready(node_id), KSelector's C one called directly: 1, 0, -1. */
static int
channel_is_ready(PyObject *selector, PyObject *node_id)
{
    PyObject *ready;
    if (ckselector_type != NULL && Py_TYPE(selector) == ckselector_type) {
        PyObject *args[] = {selector, node_id};
        ready = PyObject_Vectorcall(channel_ready, args, 2, NULL);
    }
    else {
        ready = call1(selector, str_is_channel_ready, node_id);
    }
    int yes = ready ? PyObject_IsTrue(ready) : -1;
    Py_XDECREF(ready);
    return yes;
}

/* can_send_request: 1, 0, -1. */
static int
can_send_request(PyObject *client, PyObject *node_id, PyObject *now_ms)
{
    int yes = -1;
    PyObject *states = NULL, *ready_nodes = NULL, *selector = NULL, *in_flight = NULL;
    states = client_get(client, C_CONNECTION_STATES);
    ready_nodes = states ? slot_or_attr(states, states_type, off_st_ready, str_ready_nodes) : NULL;
    if (ready_nodes == NULL) {
        goto exit;
    }
    PyObject *throttle; /* READY: its throttle_until_ms */
    if (PyDict_CheckExact(ready_nodes)) {
        throttle = Py_XNewRef(PyDict_GetItemWithError(ready_nodes, node_id));
        if (throttle == NULL && PyErr_Occurred()) {
            goto exit;
        }
        if (throttle == Py_None) {
            Py_CLEAR(throttle);
        }
    }
    else {
        throttle = call1(ready_nodes, str_get, node_id);
        if (throttle == NULL) {
            goto exit;
        }
        if (throttle == Py_None) {
            Py_CLEAR(throttle);
        }
    }
    if (throttle == NULL) {
        yes = 0;
        goto exit;
    }
    yes = PyObject_RichCompareBool(throttle, now_ms, Py_LE);
    Py_DECREF(throttle);
    if (yes != 1) {
        goto exit;
    }
    selector = client_get(client, C_SELECTOR);
    yes = selector ? channel_is_ready(selector, node_id) : -1;
    if (yes != 1) {
        goto exit;
    }
    in_flight = client_get(client, C_IN_FLIGHT_REQUESTS);
    yes = in_flight ? in_flight_allows(in_flight, node_id) : -1;
exit:
    Py_XDECREF(states);
    Py_XDECREF(ready_nodes);
    Py_XDECREF(selector);
    Py_XDECREF(in_flight);
    return yes;
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
    int yes = can_send_request(args[0], args[1], args[2]);
    return yes < 0 ? NULL : PyBool_FromLong(yes);
}

/* ---- NetworkClient.ready and send ------------------------------------------------------- */

/* metadata_updater.is_update_due(now_ms) read in place: 1, 0, -1; 2 when it cannot be read in
 * place (the Python function decides). */
static int
update_due(PyObject *self, PyObject *now)
{
    PyObject *updater = client_get(self, C_METADATA_UPDATER);
    PyObject *busy =
        updater ? slot_or_attr(updater, updater_type, off_upd_in_progress, str_in_progress)
                : NULL;
    if (busy == NULL) {
        Py_XDECREF(updater);
        return -1;
    }
    int due = 0;
    if (busy == Py_None) { /* metadata.time_to_next_update(now_ms) == 0 */
        PyObject *metadata = slot_or_attr(updater, updater_type, off_upd_metadata, str_metadata);
        PyObject *next = metadata ? PyObject_GetAttr(metadata, str_next_update_ms) : NULL;
        long long next_ms = 0, now_ms = 0;
        int ok = next ? as_long_long(next, &next_ms) : -1;
        ok = ok > 0 ? as_long_long(now, &now_ms) : ok;
        due = ok < 0 ? -1
                     : (ok == 0 || next_ms < LLONG_MIN / 2 || next_ms > LLONG_MAX / 2 ||
                                now_ms < LLONG_MIN / 2 || now_ms > LLONG_MAX / 2
                            ? 2
                            : next_ms - now_ms <= 0);
        Py_XDECREF(metadata);
        Py_XDECREF(next);
    }
    Py_DECREF(busy);
    Py_DECREF(updater);
    return due;
}

static PyObject *ready_kw_names[2], *send_kw_names[2];

/* NetworkClient.ready(node, now_ms). */
static PyObject *
client_ready_call(FallbackMethod *method, PyObject *const *args, size_t nargsf,
                  PyObject *kwnames)
{
    PyObject *argv[3] = {NULL, NULL, NULL};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, ready_kw_names, 2, 3, argv) ||
        argv[2] == NULL || network_client_type == NULL || Py_TYPE(argv[0]) != network_client_type) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *self = argv[0], *node = argv[1], *now = argv[2], *result = NULL;
    PyObject *host = slot_or_attr(node, node_type, off_node_host, str_host);
    PyObject *port = host ? slot_or_attr(node, node_type, off_node_port, str_port) : NULL;
    PyObject *node_id = port ? slot_or_attr(node, node_type, off_node_id, str_id) : NULL;
    int yes = node_id ? PyObject_IsTrue(host) : -1; /* an address: else the Python raises */
    if (yes > 0) {
        int negative = PyObject_RichCompareBool(port, zero, Py_LT);
        yes = negative < 0 ? -1 : !negative;
    }
    if (yes > 0) {
        int due = update_due(self, now);
        yes = due < 0 ? -1 : (due ? 0 : 1);
    }
    if (yes > 0) {
        yes = can_send_request(self, node_id, now);
    }
    if (yes > 0) { /* what send() may skip remembered */
        PyObject *checked = client_get(self, C_CHECKED);
        yes = checked == NULL || PyObject_SetItem(checked, node_id, now) < 0 ? -1 : 1;
        Py_XDECREF(checked);
        result = yes > 0 ? Py_NewRef(Py_True) : NULL;
    }
    else if (yes == 0) { /* not ready: the Python function (connecting, or raising) */
        result = fallback_general(method, args, nargsf, kwnames);
    }
    Py_XDECREF(host);
    Py_XDECREF(port);
    Py_XDECREF(node_id);
    return result;
}

/* NetworkClient.send(request, now_ms). */
static PyObject *
client_send_call(FallbackMethod *method, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *argv[3] = {NULL, NULL, NULL};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, send_kw_names, 2, 3, argv) ||
        argv[2] == NULL || network_client_type == NULL || client_request_type == NULL ||
        Py_TYPE(argv[0]) != network_client_type ||
        (PyObject *)Py_TYPE(argv[1]) != client_request_type ||
        SLOT(argv[0], client_slots[C_CLOSED]) != Py_False ||
        SLOT(argv[1], off_destination) == NULL) {
        return fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *self = argv[0], *request = argv[1], *now = argv[2];
    PyObject *node_id = SLOT(request, off_destination);
    PyObject *checked = client_get(self, C_CHECKED); /* checked by ready() at this now_ms? */
    if (checked == NULL) {
        return NULL;
    }
    PyObject *owned = NULL, *when = NULL;
    if (PyDict_CheckExact(checked)) {
        when = PyDict_GetItemWithError(checked, node_id);
    }
    else {
        when = owned = call1(checked, str_get, node_id);
    }
    int yes = when != NULL ? PyObject_RichCompareBool(when, now, Py_EQ)
                           : (PyErr_Occurred() ? -1 : 0);
    Py_XDECREF(owned);
    Py_DECREF(checked);
    if (yes == 0) {
        yes = can_send_request(self, node_id, now);
    }
    if (yes <= 0) { /* not ready: the Python function raises */
        return yes < 0 ? NULL : fallback_general(method, args, nargsf, kwnames);
    }
    PyObject *write_args[] = {self, request, now};
    PyObject *written = kclient_write_request(NULL, write_args, 3);
    if (written == NULL) {
        return NULL;
    }
    Py_DECREF(written);
    if (written == Py_True) {
        Py_RETURN_NONE;
    }
    return call3(self, str_do_send, request, Py_False, now); /* the version is not cached */
}

CLIENT_FALLBACK_TYPE(ClientReadyType, "ClientReady", client_ready_call)
CLIENT_FALLBACK_TYPE(ClientSendType, "ClientSend", client_send_call)


/* bind_client(NetworkClient, InFlightRequests, CKSelector | None, selector_send | None,
 * logger, deque). */
static PyObject *
bind_client(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *client, *in_flight, *kselector, *send, *logger, *deque;
    if (!PyArg_ParseTuple(args, "O!O!OOOO:bind_client", &PyType_Type, &client, &PyType_Type,
                          &in_flight, &kselector, &send, &logger, &deque)) {
        return NULL;
    }
    Py_ssize_t offsets[5];
    const char *names[] = {"_requests", "count", "earliest_deadline_ms", "_deadline_exact",
                           "max_in_flight_requests_per_connection"};
    for (int k = 0; k < 5; k++) {
        offsets[k] = slot_offset((PyTypeObject *)in_flight, names[k]);
        if (offsets[k] < 0) {
            return NULL;
        }
    }
    PyObject *ready = NULL;
    if (kselector != Py_None) {
        if (!PyType_Check(kselector) || send == Py_None) {
            PyErr_SetString(PyExc_TypeError, "bind_client: CKSelector and selector_send, or None");
            return NULL;
        }
        ready = PyDict_GetItemWithError(((PyTypeObject *)kselector)->tp_dict, str_is_channel_ready);
        if (ready == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "bind_client: CKSelector.is_channel_ready");
            }
            return NULL;
        }
    }
    Py_ssize_t at[C_COUNT];
    for (int k = 0; k < C_COUNT; k++) {
        at[k] = slot_offset((PyTypeObject *)client, client_slot_names[k]);
        if (at[k] < 0) {
            return NULL;
        }
    }
    memcpy(client_slots, at, sizeof(at));
    off_ifr_requests = offsets[0];
    off_ifr_count = offsets[1];
    off_ifr_earliest = offsets[2];
    off_ifr_exact = offsets[3];
    off_ifr_max = offsets[4];
    Py_XSETREF(network_client_type, (PyTypeObject *)Py_NewRef(client));
    Py_XSETREF(in_flight_requests_type, (PyTypeObject *)Py_NewRef(in_flight));
    Py_XSETREF(ckselector_type, kselector == Py_None ? NULL : (PyTypeObject *)Py_NewRef(kselector));
    Py_XSETREF(selector_send, kselector == Py_None ? NULL : Py_NewRef(send));
    Py_XSETREF(channel_ready, Py_XNewRef(ready));
    Py_XSETREF(client_logger, Py_NewRef(logger));
    Py_XSETREF(deque_type, Py_NewRef(deque));
    Py_RETURN_NONE;
}

/* bind_ready(Node, DefaultMetadataUpdater, ClusterConnectionStates, ApiVersions). */
static PyObject *
bind_ready(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *node, *updater, *states, *versions;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:bind_ready", &PyType_Type, &node, &PyType_Type,
                          &updater, &PyType_Type, &states, &PyType_Type, &versions)) {
        return NULL;
    }
    Py_ssize_t at[9] = {
        slot_offset((PyTypeObject *)node, "id"),
        slot_offset((PyTypeObject *)node, "host"),
        slot_offset((PyTypeObject *)node, "port"),
        slot_offset((PyTypeObject *)updater, "_in_progress"),
        slot_offset((PyTypeObject *)updater, "metadata"),
        slot_offset((PyTypeObject *)states, "connecting_nodes"),
        slot_offset((PyTypeObject *)states, "ready_nodes"),
        slot_offset((PyTypeObject *)versions, "to_send"),
        slot_offset((PyTypeObject *)versions, "usable"),
    };
    for (int k = 0; k < 9; k++) {
        if (at[k] < 0) {
            return NULL;
        }
    }
    off_node_id = at[0];
    off_node_host = at[1];
    off_node_port = at[2];
    off_upd_in_progress = at[3];
    off_upd_metadata = at[4];
    off_st_connecting = at[5];
    off_st_ready = at[6];
    off_av_to_send = at[7];
    off_av_usable = at[8];
    Py_XSETREF(states_type, (PyTypeObject *)Py_NewRef(states));
    Py_XSETREF(api_versions_type, (PyTypeObject *)Py_NewRef(versions));
    Py_XSETREF(node_type, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(updater_type, (PyTypeObject *)Py_NewRef(updater));
    Py_RETURN_NONE;
}

static PyMethodDef ready_methods[] = {
    {"bind_ready", (PyCFunction)bind_ready, METH_VARARGS,
     "bind_ready(Node, DefaultMetadataUpdater, ClusterConnectionStates, ApiVersions): what "
     "the C paths read in place"},
    {"bind_client", (PyCFunction)bind_client, METH_VARARGS,
     "bind_client(NetworkClient, InFlightRequests, CKSelector | None, selector_send | None, "
     "logger, deque): what write_request and can_send reach directly"},
    {"can_send", (PyCFunction)(void (*)(void))can_send, METH_FASTCALL,
     "can_send(client, node_id, now_ms) -> NetworkClient.can_send_request's answer"},
    {NULL, NULL, 0, NULL},
};

int
kclient_client_ready_init(PyObject *module)
{
    struct {
        PyObject **where;
        const char *text;
    } names[] = {
        {&str_ready_nodes, "ready_nodes"},     {&str_is_channel_ready, "is_channel_ready"},
        {&str_completed, "completed"},         {&str_can_send_more, "can_send_more"},
        {&str_get, "get"},                     {&str_send, "send"},
        {&str_host, "host"},                   {&str_port, "port"},
        {&str_id, "id"},                       {&str_in_progress, "_in_progress"},
        {&str_metadata, "metadata"},           {&str_next_update_ms, "_next_update_ms"},
        {&str_do_send, "_do_send"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].where = PyUnicode_InternFromString(names[k].text);
        if (*names[k].where == NULL) {
            return -1;
        }
    }
    for (int k = 0; k < C_COUNT; k++) {
        client_slot_strs[k] = PyUnicode_InternFromString(client_slot_names[k]);
        if (client_slot_strs[k] == NULL) {
            return -1;
        }
    }
    one = PyLong_FromLong(1);
    zero = PyLong_FromLong(0);
    ready_kw_names[0] = PyUnicode_InternFromString("node");
    ready_kw_names[1] = send_kw_names[1] = PyUnicode_InternFromString("now_ms");
    send_kw_names[0] = PyUnicode_InternFromString("request");
    if (one == NULL || zero == NULL || ready_kw_names[0] == NULL || ready_kw_names[1] == NULL ||
        send_kw_names[0] == NULL || PyType_Ready(&ClientReadyType) < 0 ||
        PyType_Ready(&ClientSendType) < 0 ||
        PyModule_AddObjectRef(module, "ClientReady", (PyObject *)&ClientReadyType) < 0 ||
        PyModule_AddObjectRef(module, "ClientSend", (PyObject *)&ClientSendType) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, ready_methods);
}
