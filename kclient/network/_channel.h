/*
 * kclient.network._channel: what _send.c (NetworkSend, NetworkReceive) and _channel.c (the
 * module, bind(), and the Channel base of KafkaChannel) share.
 */
#ifndef KCLIENT_NETWORK_CHANNEL_H
#define KCLIENT_NETWORK_CHANNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* At most this many buffers per sendmsg (Linux's IOV_MAX). */
#define CHANNEL_IOV_MAX 1024
/* The first buffer of a frame larger than the read chunk (then doubled as bytes arrive). */
#define CHANNEL_FIRST_FRAME_BUFFER_BYTES (256 * 1024)

#include "_send.h"

extern PyTypeObject NetworkSendType;
extern PyTypeObject NetworkReceiveType;

/* Interned method and attribute names (made by the module's init). */
extern PyObject *str_send, *str_sendmsg, *str_recv_into, *str_release, *str_cast, *str_B,
    *str_awaits_response;

/* From channel.py by bind(): NULL until then. */
extern PyObject *ssl_socket_type, *tls_recv_into, *peer_closed_error, *protocol_decode_error;

/* _selector.c: adds KSelector's and LoopSelector's C methods to the module. 0 or -1. */
int selector_add_to_module(PyObject *module);

/* A new NetworkReceive of source's frame `payload` (a new reference, stolen). */
PyObject *receive_new(PyObject *source, PyObject *payload, Py_ssize_t filled, Py_ssize_t size);

/* Calls obj.name(arg): a new reference, or NULL with an error set. */
static inline PyObject *
call_method1(PyObject *obj, PyObject *name, PyObject *arg)
{
    PyObject *args[2] = {obj, arg};
    return PyObject_VectorcallMethod(name, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* obj.release() for a memoryview, keeping any error already set. */
static inline void
release_view(PyObject *view)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *args[1] = {view};
    PyObject *res =
        PyObject_VectorcallMethod(str_release, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (res == NULL) {
        if (type != NULL) {
            PyErr_Clear();
        }
        else {
            PyErr_Fetch(&type, &value, &tb);
        }
    }
    Py_XDECREF(res);
    PyErr_Restore(type, value, tb);
}

#endif
