/*
 * kclient.network._channel: the per-request work of kclient/network/channel.py in C.
 *
 * Channel is the base of channel.py's CKafkaChannel: its attributes (node_id, sock, address,
 * max_receive_bytes, tls_context, send, receive, _chunk, _chunk_view, _chunk_len) live here,
 * and so do write() and, for plain TCP, read(): one recv_into the 64 KiB chunk buffer, every
 * whole size-prefixed frame cut into a NetworkReceive (_send.c), a frame larger than the chunk
 * read into its own growing buffer. TLS reads call the Python _read_tls (channel.py).
 *
 * Optional: channel.py keeps PyKafkaChannel, PyNetworkSend and PyNetworkReceive, the
 * reference, run when this module is not built or KCLIENT_PURE_PYTHON is set. Both give the
 * same frames, the same errors with the same messages, and leave the same state (tested
 * against each other). One thread drives a channel (the Sender's, or the event loop's).
 */
#include "_channel.h"
#include "../_pycall.h"

#include <structmember.h>

PyObject *str_send, *str_sendmsg, *str_recv_into, *str_release, *str_cast, *str_B,
    *str_awaits_response;
static PyObject *str_write_to, *str_write_to_tls, *str_read_from, *str_read_tls, *str_completed,
    *str_complete, *str_append;
PyObject *ssl_socket_type, *tls_recv_into, *peer_closed_error, *protocol_decode_error;

typedef struct {
    PyObject_HEAD
    PyObject *node_id;
    PyObject *sock;
    PyObject *address;
    PyObject *max_receive_bytes;
    PyObject *tls_context;
    PyObject *send;
    PyObject *receive;
    PyObject *chunk;      /* bytearray */
    PyObject *chunk_view; /* memoryview of chunk */
    Py_ssize_t chunk_len; /* bytes of chunk holding the start of frames not whole yet */
} Channel;

static PyObject *
channel_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Channel *self = (Channel *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    PyObject **fields[] = {&self->node_id, &self->sock,        &self->address,
                           &self->max_receive_bytes, &self->tls_context, &self->send,
                           &self->receive, &self->chunk,       &self->chunk_view};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        *fields[i] = Py_NewRef(Py_None);
    }
    return (PyObject *)self;
}

static int
channel_traverse(Channel *self, visitproc visit, void *arg)
{
    Py_VISIT(self->node_id);
    Py_VISIT(self->sock);
    Py_VISIT(self->address);
    Py_VISIT(self->max_receive_bytes);
    Py_VISIT(self->tls_context);
    Py_VISIT(self->send);
    Py_VISIT(self->receive);
    Py_VISIT(self->chunk);
    Py_VISIT(self->chunk_view);
    return 0;
}

static int
channel_clear(Channel *self)
{
    Py_CLEAR(self->node_id);
    Py_CLEAR(self->sock);
    Py_CLEAR(self->address);
    Py_CLEAR(self->max_receive_bytes);
    Py_CLEAR(self->tls_context);
    Py_CLEAR(self->send);
    Py_CLEAR(self->receive);
    Py_CLEAR(self->chunk_view);
    Py_CLEAR(self->chunk);
    return 0;
}

static void
channel_dealloc(Channel *self)
{
    PyObject_GC_UnTrack(self);
    channel_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
append(PyObject *completed, PyObject *item)
{
    if (PyList_CheckExact(completed)) {
        return PyList_Append(completed, item);
    }
    PyObject *res = call_method1(completed, str_append, item);
    Py_XDECREF(res);
    return res == NULL ? -1 : 0;
}

static int
too_large(Channel *self, long long size)
{
    PyObject *message = PyUnicode_FromFormat(
        "node %S at %S announced a response of %lld bytes, more than "
        "'receive.message.max.bytes' (%S); closing the connection. Is %S a Kafka listener "
        "(it may speak another protocol, or TLS)? If the broker is right, raise "
        "'receive.message.max.bytes'",
        self->node_id, self->address, size, self->max_receive_bytes, self->address);
    if (message != NULL) {
        PyErr_SetObject(protocol_decode_error, message);
        Py_DECREF(message);
    }
    return -1;
}

/* 0 if every attribute read and write use is set (none was deleted), else -1. */
static int
channel_check(Channel *self)
{
    if (self->node_id && self->sock && self->address && self->max_receive_bytes &&
        self->tls_context && self->send && self->receive && self->chunk && self->chunk_view) {
        return 0;
    }
    PyErr_SetString(PyExc_AttributeError, "a KafkaChannel attribute was deleted");
    return -1;
}

/* The rest of a frame too large for the chunk, read into its own buffer (self->receive).
 * 1, 0 (TLS: nothing yet), or -1 with an error set. */
static int
read_big(Channel *self, PyObject *completed)
{
    PyObject *big = Py_NewRef(self->receive), *sock = Py_NewRef(self->sock);
    PyObject *got = call_method1(big, str_read_from, sock);
    Py_DECREF(sock);
    if (got == NULL) {
        Py_DECREF(big);
        return -1;
    }
    if (got == Py_None) {
        Py_DECREF(big);
        Py_DECREF(got);
        return 0;
    }
    Py_ssize_t n = PyLong_AsSsize_t(got);
    Py_DECREF(got);
    if (n == 0 || (n == -1 && PyErr_Occurred())) {
        if (n == 0) {
            PyErr_SetNone(peer_closed_error);
        }
        Py_DECREF(big);
        return -1;
    }
    int complete = Py_IS_TYPE(big, &NetworkReceiveType)
                       ? ((NetworkReceive *)big)->filled == ((NetworkReceive *)big)->size
                       : attr_truth(big, str_complete);
    if (complete > 0) {
        Py_XSETREF(self->receive, Py_NewRef(Py_None));
        complete = append(completed, big);
    }
    Py_DECREF(big);
    return complete < 0 ? -1 : 1;
}

/* Every whole frame in chunk[0:end] becomes a NetworkReceive appended to completed; a frame
 * larger than the chunk starts self->receive; the start of the next frame moves to the front.
 * 0, or -1 with an error set (then _chunk_len is left as it was, as in Python). */
static int
cut_frames(Channel *self, PyObject *chunk, Py_ssize_t end, PyObject *completed)
{
    long long limit;
    int overflow;
    if (!PyLong_Check(self->max_receive_bytes)) {
        PyErr_SetString(PyExc_TypeError, "KafkaChannel.max_receive_bytes must be an int");
        return -1;
    }
    limit = PyLong_AsLongLongAndOverflow(self->max_receive_bytes, &overflow);
    if (overflow) {
        limit = overflow > 0 ? LLONG_MAX : -1;
    }
    Py_ssize_t capacity = PyByteArray_GET_SIZE(chunk), pos = 0;
    while (end - pos >= 4) {
        const unsigned char *p = (const unsigned char *)PyByteArray_AS_STRING(chunk) + pos;
        int32_t size = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                                 ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
        if (size < 0 || size > limit) {
            return too_large(self, size);
        }
        Py_ssize_t available = end - pos - 4;
        if (available >= size) {
            PyObject *payload = PyByteArray_FromStringAndSize((const char *)p + 4, size);
            PyObject *frame = payload ? receive_new(self->node_id, payload, size, size) : NULL;
            if (frame == NULL) {
                return -1;
            }
            int failed = append(completed, frame);
            Py_DECREF(frame);
            if (failed) {
                return -1;
            }
            pos += 4 + (Py_ssize_t)size;
        }
        else if ((Py_ssize_t)size + 4 > capacity) {
            /* only what arrived, not the announced size: the buffer grows as bytes come */
            PyObject *payload = PyByteArray_FromStringAndSize((const char *)p + 4, available);
            PyObject *big = payload ? receive_new(self->node_id, payload, available, size) : NULL;
            if (big == NULL) {
                return -1;
            }
            Py_XSETREF(self->receive, big);
            pos = end;
            break;
        }
        else {
            break;
        }
    }
    if (pos) {
        char *start = PyByteArray_AS_STRING(chunk);
        memmove(start, start + pos, (size_t)(end - pos));
    }
    self->chunk_len = end - pos;
    return 0;
}

/* One recv_into on a plain socket (channel.py's _read_once without TLS). 0 or -1. */
static int
read_plain(Channel *self, PyObject *completed)
{
    if (self->receive != Py_None) { /* a frame too large for the chunk is read into place */
        return read_big(self, completed) < 0 ? -1 : 0;
    }
    PyObject *chunk = self->chunk, *view = self->chunk_view;
    if (!PyByteArray_CheckExact(chunk) || !PyMemoryView_Check(view) ||
        PyMemoryView_GET_BUFFER(view)->buf != PyByteArray_AS_STRING(chunk) ||
        PyMemoryView_GET_BUFFER(view)->len != PyByteArray_GET_SIZE(chunk)) {
        PyErr_SetString(PyExc_TypeError,
                        "KafkaChannel._chunk must be a bytearray and _chunk_view its memoryview");
        return -1;
    }
    Py_ssize_t have = self->chunk_len, capacity = PyByteArray_GET_SIZE(chunk);
    if (have < 0 || have > capacity) {
        PyErr_Format(PyExc_ValueError, "KafkaChannel._chunk_len %zd is outside the chunk", have);
        return -1;
    }
    Py_INCREF(chunk);
    PyObject *target = have ? PySequence_GetSlice(view, have, capacity) : Py_NewRef(view);
    PyObject *sock = Py_NewRef(self->sock);
    PyObject *got = target ? call_method1(sock, str_recv_into, target) : NULL;
    Py_DECREF(sock);
    Py_XDECREF(target);
    if (got == NULL) {
        Py_DECREF(chunk);
        return -1;
    }
    Py_ssize_t n = PyLong_AsSsize_t(got);
    Py_DECREF(got);
    int result = -1;
    if (n == -1 && PyErr_Occurred()) {
        /* not an int */
    }
    else if (n == 0) {
        PyErr_SetNone(peer_closed_error);
    }
    else if (n < 0 || n > capacity - have) {
        PyErr_Format(PyExc_ValueError, "recv_into reported %zd bytes read into %zd", n,
                     capacity - have);
    }
    else if (channel_check(self) == 0) { /* recv_into may have run anything */
        result = cut_frames(self, chunk, have + n, completed);
    }
    Py_DECREF(chunk);
    return result;
}

/* read(completed): one read from the socket (with TLS: the Python _read_tls, until the TLS
 * layer holds nothing more); appends every frame it completes to completed. */
static PyObject *
channel_read(Channel *self, PyObject *completed)
{
    if (channel_check(self) < 0) {
        return NULL;
    }
    if (self->tls_context != Py_None) {
        return call_method1((PyObject *)self, str_read_tls, completed);
    }
    if (read_plain(self, completed) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* write(): write the pending send; return it once completely written, else None. */
static PyObject *
channel_write(Channel *self, PyObject *Py_UNUSED(ignored))
{
    if (channel_check(self) < 0) {
        return NULL;
    }
    PyObject *send = self->send;
    if (send == Py_None) {
        Py_RETURN_NONE;
    }
    Py_INCREF(send);
    PyObject *sock = Py_NewRef(self->sock);
    PyObject *res = call_method1(send, self->tls_context == Py_None ? str_write_to : str_write_to_tls,
                                 sock);
    Py_DECREF(sock);
    if (res == NULL) {
        Py_DECREF(send);
        return NULL;
    }
    Py_DECREF(res);
    int done = PyObject_TypeCheck(send, &NetworkSendType)
                   ? ((NetworkSend *)send)->remaining == 0
                   : attr_truth(send, str_completed);
    if (done > 0) {
        Py_XSETREF(self->send, Py_NewRef(Py_None));
        return send;
    }
    Py_DECREF(send);
    if (done < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef channel_methods[] = {
    {"read", (PyCFunction)channel_read, METH_O,
     "read(completed): one read; appends every frame it completes to completed."},
    {"write", (PyCFunction)channel_write, METH_NOARGS,
     "write() -> NetworkSend | None: the pending send once completely written."},
    {NULL, NULL, 0, NULL},
};

#define CHANNEL_OBJECT(name, field) {name, T_OBJECT_EX, offsetof(Channel, field), 0, NULL}
static PyMemberDef channel_members[] = {
    CHANNEL_OBJECT("node_id", node_id),
    CHANNEL_OBJECT("sock", sock),
    CHANNEL_OBJECT("address", address),
    CHANNEL_OBJECT("max_receive_bytes", max_receive_bytes),
    CHANNEL_OBJECT("tls_context", tls_context),
    CHANNEL_OBJECT("send", send),
    CHANNEL_OBJECT("receive", receive),
    CHANNEL_OBJECT("_chunk", chunk),
    CHANNEL_OBJECT("_chunk_view", chunk_view),
    {"_chunk_len", T_PYSSIZET, offsetof(Channel, chunk_len), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ChannelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.network._channel.Channel",
    .tp_doc = "The state and the per-request reads and writes of KafkaChannel.",
    .tp_basicsize = sizeof(Channel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = channel_new,
    .tp_dealloc = (destructor)channel_dealloc,
    .tp_traverse = (traverseproc)channel_traverse,
    .tp_clear = (inquiry)channel_clear,
    .tp_methods = channel_methods,
    .tp_members = channel_members,
};

/* ---- the module -------------------------------------------------------------------------- */

/* bind(PeerClosedError, ProtocolDecodeError, ssl.SSLSocket, tls.recv_into). */
static PyObject *
bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind(PeerClosedError, ProtocolDecodeError, SSLSocket, tls_recv_into)");
        return NULL;
    }
    PyObject **slots[4] = {&peer_closed_error, &protocol_decode_error, &ssl_socket_type,
                           &tls_recv_into};
    for (int i = 0; i < 4; i++) {
        Py_XSETREF(*slots[i], Py_NewRef(args[i]));
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(PeerClosedError, ProtocolDecodeError, SSLSocket, tls_recv_into): from channel.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.network._channel",
    .m_doc = "KafkaChannel's per-request reads and writes, NetworkSend and NetworkReceive in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__channel(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&str_send, "send"},
        {&str_sendmsg, "sendmsg"},
        {&str_recv_into, "recv_into"},
        {&str_release, "release"},
        {&str_cast, "cast"},
        {&str_B, "B"},
        {&str_awaits_response, "awaits_response"},
        {&str_write_to, "write_to"},
        {&str_write_to_tls, "write_to_tls"},
        {&str_read_from, "read_from"},
        {&str_read_tls, "_read_tls"},
        {&str_completed, "completed"},
        {&str_complete, "complete"},
        {&str_append, "append"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].slot == NULL &&
            (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL) {
            return NULL;
        }
    }
    if (PyType_Ready(&NetworkSendType) < 0 || PyType_Ready(&NetworkReceiveType) < 0 ||
        PyType_Ready(&ChannelType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "NetworkSend", (PyObject *)&NetworkSendType) < 0 ||
        PyModule_AddObjectRef(module, "NetworkReceive", (PyObject *)&NetworkReceiveType) < 0 ||
        PyModule_AddObjectRef(module, "Channel", (PyObject *)&ChannelType) < 0 ||
        PyModule_AddIntConstant(module, "IOV_MAX", CHANNEL_IOV_MAX) < 0 ||
        PyModule_AddIntConstant(module, "FIRST_FRAME_BUFFER_BYTES",
                                CHANNEL_FIRST_FRAME_BUFFER_BYTES) < 0 ||
        selector_add_to_module(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
