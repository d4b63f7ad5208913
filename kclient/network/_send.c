/*
 * kclient.network._channel's NetworkSend and NetworkReceive: channel.py's PyNetworkSend and
 * PyNetworkReceive (the reference) in C, same attributes, same results, same errors.
 *
 * A NetworkSend keeps its buffers by reference (a memoryview of anything that is not bytes or
 * a bytearray, cast to bytes when its format is not "B") and writes them with the socket's own
 * send / sendmsg methods, so timeouts and errors are Python's. write_to_tls stays Python
 * (channel.py), working on the same attributes (_buffers, _index, _advance).
 */
#include "_channel.h"

#include <structmember.h>

/* ---- NetworkSend ------------------------------------------------------------------------- */

/* The length of one queued buffer (bytes, bytearray or a memoryview). */
static inline Py_ssize_t
buffer_len(PyObject *buf)
{
    if (PyBytes_CheckExact(buf)) {
        return PyBytes_GET_SIZE(buf);
    }
    if (PyByteArray_CheckExact(buf)) {
        return PyByteArray_GET_SIZE(buf);
    }
    return PyObject_Size(buf);
}

/* A buffer as queued: bytes and bytearrays as they are, anything else a 1-d "B" memoryview. */
static PyObject *
as_queued(PyObject *buf)
{
    if (PyBytes_CheckExact(buf) || PyByteArray_CheckExact(buf)) {
        return Py_NewRef(buf);
    }
    PyObject *view = PyMemoryView_FromObject(buf);
    if (view == NULL) {
        return NULL;
    }
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    if (b->ndim == 1 && (b->format == NULL || strcmp(b->format, "B") == 0)) {
        return view;
    }
    PyObject *cast = call_method1(view, str_cast, str_B);
    Py_DECREF(view);
    return cast;
}

static PyObject *
send_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"destination", "buffers", "awaits_response", NULL};
    PyObject *destination, *buffers, *awaits_response = Py_True;
    Py_ssize_t nkw = kwds == NULL ? 0 : PyDict_GET_SIZE(kwds);
    if (PyTuple_GET_SIZE(args) == 2 &&
        (nkw == 0 ||
         (nkw == 1 && (awaits_response = PyDict_GetItemWithError(kwds, str_awaits_response))))) {
        destination = PyTuple_GET_ITEM(args, 0); /* the common call, parsed quickly */
        buffers = PyTuple_GET_ITEM(args, 1);
    }
    else {
        awaits_response = Py_True;
        if (PyErr_Occurred() ||
            !PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:NetworkSend", kwlist, &destination,
                                         &buffers, &awaits_response)) {
            return NULL;
        }
    }
    PyObject *seq = (PyList_CheckExact(buffers) || PyTuple_CheckExact(buffers))
                        ? Py_NewRef(buffers)
                        : PySequence_List(buffers);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *parts = PyList_New(0);
    if (parts == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *buf = as_queued(item);
        Py_DECREF(item);
        if (buf == NULL) {
            goto error;
        }
        Py_ssize_t n = buffer_len(buf);
        if (n < 0 || (n > 0 && PyList_Append(parts, buf) < 0)) {
            Py_DECREF(buf);
            goto error;
        }
        Py_DECREF(buf);
        size += n;
    }
    Py_DECREF(seq);
    NetworkSend *self = (NetworkSend *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(parts);
        return NULL;
    }
    self->destination = Py_NewRef(destination);
    self->awaits_response = Py_NewRef(awaits_response);
    self->buffers = parts;
    self->index = 0;
    self->size = size;
    self->remaining = size;
    self->tls_chunked = 0;
    return (PyObject *)self;
error:
    Py_DECREF(seq);
    Py_DECREF(parts);
    return NULL;
}

static void
send_dealloc(NetworkSend *self)
{
    Py_XDECREF(self->destination);
    Py_XDECREF(self->awaits_response);
    Py_XDECREF(self->buffers);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
send_buffers(NetworkSend *self)
{
    if (self->buffers == NULL || !PyList_CheckExact(self->buffers)) {
        PyErr_SetString(PyExc_TypeError, "NetworkSend._buffers must be a list");
        return NULL;
    }
    return self->buffers;
}

/* Moves past `written` bytes: the buffers written whole are skipped, a partly written one is
 * replaced by a memoryview of its rest (no copy). 0, or -1 with an error set. */
static int
send_advance(NetworkSend *self, Py_ssize_t written)
{
    PyObject *buffers = send_buffers(self);
    if (buffers == NULL) {
        return -1;
    }
    if (written < 0 || written > self->remaining) {
        PyErr_Format(PyExc_ValueError,
                     "the socket reported %zd bytes written of the %zd bytes offered", written,
                     self->remaining);
        return -1;
    }
    self->remaining -= written;
    if (self->remaining == 0) {
        self->index = PyList_GET_SIZE(buffers);
        return 0;
    }
    Py_ssize_t index = self->index, left = written;
    while (left) {
        if (index < 0 || index >= PyList_GET_SIZE(buffers)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            return -1;
        }
        PyObject *head = PyList_GET_ITEM(buffers, index);
        Py_ssize_t n = buffer_len(head);
        if (n < 0) {
            return -1;
        }
        if (left >= n) {
            left -= n;
            index++;
            continue;
        }
        PyObject *view = PyMemoryView_FromObject(head);
        if (view == NULL) {
            return -1;
        }
        PyObject *rest = PySequence_GetSlice(view, left, PY_SSIZE_T_MAX);
        Py_DECREF(view);
        if (rest == NULL) {
            return -1;
        }
        PyList_SetItem(buffers, index, rest); /* steals rest */
        left = 0;
    }
    self->index = index;
    return 0;
}

static PyObject *
send_advance_method(NetworkSend *self, PyObject *arg)
{
    Py_ssize_t written = PyLong_AsSsize_t(arg);
    if (written == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (send_advance(self, written) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
send_write_to(NetworkSend *self, PyObject *sock)
{
    if (self->remaining == 0) {
        return PyLong_FromLong(0);
    }
    PyObject *buffers = send_buffers(self);
    if (buffers == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(buffers) - self->index;
    PyObject *result;
    if (count == 1) {
        PyObject *head = Py_NewRef(PyList_GET_ITEM(buffers, self->index));
        result = call_method1(sock, str_send, head);
        Py_DECREF(head);
    }
    else {
        Py_ssize_t start = self->index < 0 ? 0 : self->index;
        PyObject *some = start == 0 && count <= CHANNEL_IOV_MAX /* all of them: no copy */
                             ? Py_NewRef(buffers)
                             : PyList_GetSlice(buffers, start, start + CHANNEL_IOV_MAX);
        if (some == NULL) {
            return NULL;
        }
        result = call_method1(sock, str_sendmsg, some);
        Py_DECREF(some);
    }
    if (result == NULL) {
        if (PyErr_ExceptionMatches(PyExc_BlockingIOError) ||
            PyErr_ExceptionMatches(PyExc_InterruptedError)) {
            PyErr_Clear();
            return PyLong_FromLong(0);
        }
        return NULL;
    }
    Py_ssize_t written = PyLong_AsSsize_t(result);
    if ((written == -1 && PyErr_Occurred()) || send_advance(self, written) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *
send_get_completed(NetworkSend *self, void *closure)
{
    return PyBool_FromLong(self->remaining == 0);
}

static PyMethodDef send_methods[] = {
    {"write_to", (PyCFunction)send_write_to, METH_O,
     "write_to(sock) -> int: write as much as the socket takes; 0 if it would block."},
    {"_advance", (PyCFunction)send_advance_method, METH_O,
     "_advance(written): move past `written` bytes."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef send_members[] = {
    {"destination", T_OBJECT_EX, offsetof(NetworkSend, destination), 0, NULL},
    {"awaits_response", T_OBJECT_EX, offsetof(NetworkSend, awaits_response), 0,
     "False when writing it completes something (acks=0): poll then returns at once."},
    {"_buffers", T_OBJECT_EX, offsetof(NetworkSend, buffers), 0, NULL},
    {"_index", T_PYSSIZET, offsetof(NetworkSend, index), 0, NULL},
    {"_tls_chunked", T_BOOL, offsetof(NetworkSend, tls_chunked), 0, NULL},
    {"size", T_PYSSIZET, offsetof(NetworkSend, size), 0, NULL},
    {"remaining", T_PYSSIZET, offsetof(NetworkSend, remaining), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef send_getset[] = {
    {"completed", (getter)send_get_completed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject NetworkSendType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.network._channel.NetworkSend",
    .tp_doc = "NetworkSend(destination, buffers, *, awaits_response=True): a request's "
              "buffers, written in order.",
    .tp_basicsize = sizeof(NetworkSend),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = send_new,
    .tp_dealloc = (destructor)send_dealloc,
    .tp_methods = send_methods,
    .tp_members = send_members,
    .tp_getset = send_getset,
};

/* ---- NetworkReceive ---------------------------------------------------------------------- */

PyObject *
receive_new(PyObject *source, PyObject *payload, Py_ssize_t filled, Py_ssize_t size)
{
    NetworkReceive *self = PyObject_New(NetworkReceive, &NetworkReceiveType);
    if (self == NULL) {
        Py_DECREF(payload);
        return NULL;
    }
    self->source = Py_NewRef(source);
    self->payload = payload;
    self->filled = filled;
    self->size = size;
    return (PyObject *)self;
}

static PyObject *
receive_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"source", "payload", "filled", "size", NULL};
    PyObject *source, *payload, *filled_obj = Py_None, *size_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OO:NetworkReceive", kwlist, &source,
                                     &payload, &filled_obj, &size_obj)) {
        return NULL;
    }
    Py_ssize_t size =
        size_obj == Py_None ? PyObject_Size(payload) : PyLong_AsSsize_t(size_obj);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t filled = filled_obj == Py_None ? size : PyLong_AsSsize_t(filled_obj);
    if (filled == -1 && PyErr_Occurred()) {
        return NULL;
    }
    NetworkReceive *self = (NetworkReceive *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->source = Py_NewRef(source);
    self->payload = Py_NewRef(payload);
    self->size = size;
    self->filled = filled;
    return (PyObject *)self;
}

static void
receive_dealloc(NetworkReceive *self)
{
    Py_XDECREF(self->source);
    Py_XDECREF(self->payload);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
receive_get_complete(NetworkReceive *self, void *closure)
{
    return PyBool_FromLong(self->filled == self->size);
}

/* read_from(sock): more of the body straight into payload (grown first if it is full,
 * doubling up to the frame's size); the bytes read (0: the peer closed), or None (TLS only)
 * when no whole TLS record has arrived yet. */
static PyObject *
receive_read_from(NetworkReceive *self, PyObject *sock)
{
    PyObject *payload = self->payload;
    if (payload == NULL || !PyByteArray_Check(payload)) {
        PyErr_SetString(PyExc_TypeError, "NetworkReceive.payload must be a bytearray");
        return NULL;
    }
    if (ssl_socket_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.network._channel.bind() was not called");
        return NULL;
    }
    Py_INCREF(payload);
    Py_ssize_t have = PyByteArray_GET_SIZE(payload), filled = self->filled;
    if (have == filled) { /* double the buffer, up to the frame's size */
        Py_ssize_t room = have > CHANNEL_FIRST_FRAME_BUFFER_BYTES
                              ? have
                              : CHANNEL_FIRST_FRAME_BUFFER_BYTES;
        if (room > self->size - filled) {
            room = self->size - filled;
        }
        if (room > 0) {
            if (PyByteArray_Resize(payload, have + room) < 0) {
                Py_DECREF(payload);
                return NULL;
            }
            memset(PyByteArray_AS_STRING(payload) + have, 0, (size_t)room);
        }
    }
    PyObject *result = NULL;
    PyObject *view = PyMemoryView_FromObject(payload);
    if (view != NULL) {
        PyObject *target = PySequence_GetSlice(view, filled, PY_SSIZE_T_MAX);
        if (target != NULL) {
            if (PyObject_TypeCheck(sock, (PyTypeObject *)ssl_socket_type)) {
                PyObject *args[2] = {sock, target};
                result = PyObject_Vectorcall(tls_recv_into, args, 2, NULL);
            }
            else {
                result = call_method1(sock, str_recv_into, target);
            }
            release_view(target); /* no export left: the buffer may grow again */
            Py_DECREF(target);
        }
        release_view(view);
        Py_DECREF(view);
    }
    Py_DECREF(payload);
    if (result == NULL || PyErr_Occurred()) {
        Py_XDECREF(result);
        return NULL;
    }
    if (result != Py_None) {
        Py_ssize_t n = PyLong_AsSsize_t(result);
        if (n == -1 && PyErr_Occurred()) {
            Py_DECREF(result);
            return NULL;
        }
        self->filled += n;
    }
    return result;
}

static PyObject *
receive_repr(NetworkReceive *self)
{
    if (self->source == NULL) {
        PyErr_SetString(PyExc_AttributeError, "NetworkReceive.source was deleted");
        return NULL;
    }
    return PyUnicode_FromFormat("NetworkReceive(source=%S, size=%zd, filled=%zd)", self->source,
                                self->size, self->filled);
}

static PyMethodDef receive_methods[] = {
    {"read_from", (PyCFunction)receive_read_from, METH_O,
     "read_from(sock) -> int | None: more of the body straight into payload."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef receive_members[] = {
    {"source", T_OBJECT_EX, offsetof(NetworkReceive, source), 0, NULL},
    {"payload", T_OBJECT_EX, offsetof(NetworkReceive, payload), 0, NULL},
    {"size", T_PYSSIZET, offsetof(NetworkReceive, size), 0, NULL},
    {"filled", T_PYSSIZET, offsetof(NetworkReceive, filled), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef receive_getset[] = {
    {"complete", (getter)receive_get_complete, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject NetworkReceiveType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.network._channel.NetworkReceive",
    .tp_doc = "NetworkReceive(source, payload, filled=None, size=None): one size-prefixed "
              "frame from a node; payload is the body without the size.",
    .tp_basicsize = sizeof(NetworkReceive),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = receive_tp_new,
    .tp_dealloc = (destructor)receive_dealloc,
    .tp_repr = (reprfunc)receive_repr,
    .tp_methods = receive_methods,
    .tp_members = receive_members,
    .tp_getset = receive_getset,
};
