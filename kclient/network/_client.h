/*
 * kclient.network._client's shared declarations: what its answers' side (_client.c:
 * complete_receives, bind, the module) and its sends' side (_client_send.c: write_request,
 * can_send, bind_send) both use. See _client.c.
 */
#ifndef KCLIENT_NETWORK_CLIENT_H
#define KCLIENT_NETWORK_CLIENT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_slots.h"
#include "../_pycall.h"

/* Set by bind() (_client.c): NULL and unset until then. */
extern PyObject *in_flight_request_type; /* kclient.network.in_flight.InFlightRequest */
/* its slots: every field, for write_request to make one (_client_send.c) */
extern Py_ssize_t off_send, off_correlation_id, off_api_key, off_api_version, off_request,
    off_is_internal, off_if_destination, off_send_time_ms, off_created_time_ms,
    off_request_timeout_ms, off_if_expect_response;

/* Interned by PyInit__client (_client.c). */
extern PyObject *str_requests; /* "_requests" */

/* Set by bind_client (_client_ready.c): NULL until then, and then write_request calls the
 * Python _sent and selector.send, can_send the methods by name. */
extern PyTypeObject *network_client_type;     /* client.NetworkClient */
extern PyTypeObject *in_flight_requests_type; /* in_flight.InFlightRequests */
extern Py_ssize_t off_ifr_requests, off_ifr_count, off_ifr_earliest, off_ifr_exact, off_ifr_max;
extern PyTypeObject *ckselector_type; /* selector.CKSelector, or NULL */
extern PyObject *selector_send;       /* _channel.selector_send: KSelector.send's common case */
extern PyObject *client_logger;       /* client.py's logger */
extern PyObject *deque_type;          /* collections.deque */
extern PyObject *one;                 /* 1 */
/* Set by bind_ready (_client_ready.c): Node (id, host, port) and DefaultMetadataUpdater
 * (_in_progress, metadata) and their slots' offsets; NULL until then (read by name). */
extern PyTypeObject *node_type, *updater_type;
extern Py_ssize_t off_node_id, off_node_host, off_node_port, off_upd_in_progress,
    off_upd_metadata;

/* obj.<attribute>: at its slot's offset when obj is of `type`, else by name. A new
 * reference. */
static inline PyObject *
slot_or_attr(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name)
{
    if (type != NULL && Py_TYPE(obj) == type) {
        PyObject *value = SLOT(obj, offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(obj, name);
}

/* Set by bind_ready too: ClusterConnectionStates (connecting_nodes, ready_nodes) and
 * ApiVersions (to_send, usable), and their slots' offsets. */
extern PyTypeObject *states_type, *api_versions_type;
extern Py_ssize_t off_st_connecting, off_st_ready, off_av_to_send, off_av_usable;

/* bool(obj.<attribute>), read as slot_or_attr does: 1, 0, -1. */
static inline int
slot_truth(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name)
{
    PyObject *value = slot_or_attr(obj, type, offset, name);
    int truth = value ? PyObject_IsTrue(value) : -1;
    Py_XDECREF(value);
    return truth;
}

/* Set by bind_send (_client_send.c): _channel's C NetworkSend when it is selector.NetworkSend;
 * ClientRequest and its `destination` slot. */
extern PyTypeObject *c_network_send;
extern PyObject *client_request_type;
extern Py_ssize_t off_destination, off_callback;

/* write_request(client, request, now_ms) (_client_send.c), for ClientSend. */
PyObject *kclient_write_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* NetworkClient's __slots__ that write_request, can_send and ClientPoll read. */
enum {
    C_API_VERSIONS, C_CHECKED, C_CORRELATION_ID, C_SELECTOR, C_CLIENT_ID, C_CONNECTION_STATES,
    C_IN_FLIGHT_REQUESTS, C_REQUEST_TIMEOUT_MS, C_CLOSED, C_ABORTED, C_AUTHENTICATOR, C_CLOCK,
    C_METADATA_UPDATER, C_UNANSWERED, C_COUNT
};
extern Py_ssize_t client_slots[C_COUNT];

/* client.<field>: at its slot's offset for a NetworkClient, else by name. A new reference. */
PyObject *client_get(PyObject *client, int field);

/* Intern each side's names and add its functions to the module: bind_send and
 * write_request (_client_send.c); bind_client and can_send (_client_ready.c). 0, or -1 with
 * an exception. */
int kclient_client_send_init(PyObject *module);
int kclient_client_ready_init(PyObject *module);
int kclient_client_poll_init(PyObject *module); /* ClientPoll, ClientPollReady, bind_poll */
int kclient_client_poll_io_init(PyObject *module); /* bind_poll (called by the above) */

/* NetworkClient._poll_io(timeout_ms) for a client without an authenticator (_client_poll_io.c):
 * the responses, a new reference, or NULL. */
PyObject *kclient_poll_io(PyObject *self, PyObject *timeout_ms);
extern long long no_delay_limit_ms; /* connection_states.NO_DELAY_LIMIT_MS (bind_poll) */

/* complete_receives(receives, in_flight, responses, now_ms) (_client.c), for ClientPoll. */
PyObject *kclient_complete_receives(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* in_flight.<attribute>: at InFlightRequests' slot, else by name. A new reference. */
static inline PyObject *
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
static inline int
in_flight_truth(PyObject *in_flight, Py_ssize_t offset, PyObject *name)
{
    return take_truth(in_flight_get(in_flight, offset, name));
}

/* A Python int as a C long long: 1, 0 (not an int, or too large: *out untouched), -1. */
static inline int
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

/* A method descriptor type over a Python function (_fallback_method.h, which the file using
 * this includes), calls to `call`. */
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

#endif
