/*
 * The layouts of kclient.network._channel's NetworkSend and NetworkReceive (_send.c): shared
 * by _channel.h and by kclient.network._client, which reads a C NetworkSend's `remaining`.
 */
#ifndef KCLIENT_NETWORK_SEND_H
#define KCLIENT_NETWORK_SEND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *destination;
    PyObject *awaits_response;
    PyObject *buffers; /* list of bytes / bytearray / 1-d "B" memoryview, none empty */
    Py_ssize_t index;  /* the first buffer not completely written */
    Py_ssize_t size;
    Py_ssize_t remaining;
    char tls_chunked;
} NetworkSend;

typedef struct {
    PyObject_HEAD
    PyObject *source;
    PyObject *payload; /* a bytearray (read_from grows it) */
    Py_ssize_t size;
    Py_ssize_t filled;
} NetworkReceive;

#endif
