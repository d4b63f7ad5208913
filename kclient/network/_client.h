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

/* Set by bind() (_client.c): NULL and unset until then. */
extern PyObject *in_flight_request_type; /* kclient.network.in_flight.InFlightRequest */
extern Py_ssize_t off_send;              /* its `send` slot */

/* Interned by PyInit__client (_client.c). */
extern PyObject *str_requests; /* "_requests" */

/* Interns the sends' side names and adds bind_send, can_send and write_request to the module
 * (_client_send.c): 0, or -1 with an exception. */
int kclient_client_send_init(PyObject *module);

#endif
