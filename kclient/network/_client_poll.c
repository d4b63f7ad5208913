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
 * and both run _poll_io (_client_poll_io.c). Same state, results and log lines as the Python
 * (tests/network/test_client_c.py, test_client_write_c.py). The client's owning thread only.
 */
#include "_client.h"

#include <stddef.h>

#include "../_fallback_method.h"
#include "../_pycall.h" /* call1 */

static PyObject *str_connecting_nodes, *str_metadata, *str_in_progress, *str_next_update_ms,
    *str_maybe_update, *str_next_timeout_ms, *str_next_setup_timeout_ms, *str_count,
    *str_earliest_deadline_ms, *str_deadline_exact, *zero_ms;

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
        int any =
            states ? slot_truth(states, states_type, off_st_connecting, str_connecting_nodes) : 1;
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
    PyObject *metadata =
        updater ? slot_or_attr(updater, updater_type, off_upd_metadata, str_metadata) : NULL;
    PyObject *next = metadata ? PyObject_GetAttr(metadata, str_next_update_ms) : NULL;
    PyObject *busy =
        next ? slot_or_attr(updater, updater_type, off_upd_in_progress, str_in_progress) : NULL;
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
    int connecting =
        states ? slot_truth(states, states_type, off_st_connecting, str_connecting_nodes) : -1;
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
    PyObject *responses = kclient_poll_io(self, timeout);
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
    return kclient_poll_io(argv[0], zero_ms);
}

/* ---- the types and the module's part ------------------------------------------------------ */

CLIENT_FALLBACK_TYPE(ClientPollType, "ClientPoll", client_poll_call)
CLIENT_FALLBACK_TYPE(ClientPollReadyType, "ClientPollReady", client_poll_ready_call)

int
kclient_client_poll_init(PyObject *module)
{
    struct {
        PyObject **where;
        const char *text;
    } names[] = {
        {&str_connecting_nodes, "connecting_nodes"},
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
    return kclient_client_poll_io_init(module);
}
