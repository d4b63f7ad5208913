/*
 * kclient.protocol._produce: the producer's round trip in its common shape (a ProduceRequest
 * for one partition's batch, and the answer saying it was written) in C.
 *
 * Optional: kclient/protocol/produce_fast.py keeps the pure-Python functions, the reference,
 * and runs them when this module is not built or KCLIENT_PURE_PYTHON is set. Both give the
 * same frames, the same dicts and None in the same cases (tested against each other and
 * against the generic codec). This code takes only exact types (dict, list, str, int, bytes,
 * bytearray); for anything else it calls the Python function with the same arguments, so an
 * unusual argument behaves as the Python code makes it behave. The prefix cache is the
 * Python module's dict, filled by its _make_prefix (the generic encoder, checked). GIL held
 * throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_produce.h"

#define SMALL_RECORDS 16384 /* batches up to this size are copied into the one buffer */

/* From produce_fast.py by bind(): the Python encode_produce and decode_produce (for shapes
 * this code does not take), _PREFIXES, _make_prefix, uuid.UUID (a topic id's exact type),
 * topic_id (an answer's id) and _IDS (the ids it made). NULL until bind() is called. */
static PyObject *py_encode, *prefixes, *make_prefix, *uuid_type;
PyObject *py_decode, *py_topic_id, *topic_ids;
static PyObject *flex_tail; /* b"\0\0\0": the tagged fields after a v9+ batch */
static PyObject *str_topic_data, *str_transactional_id, *str_acks, *str_timeout_ms,
    *str_partition_data, *str_records;
PyObject *str_name, *str_topic_id, *str_index, *str_responses, *str_partition_responses,
    *str_throttle_time_ms, *str_error_code, *str_base_offset, *str_log_append_time_ms, *str_log_start_offset,
    *str_record_errors, *str_error_message;

/* ---- the request ------------------------------------------------------------------------- */

/* An exact int in the int32 range into *out: 1; 0 for any other value (no error set). */
static int
as_int32(PyObject *value, int32_t *out)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        return 0;
    }
    *out = (int32_t)v;
    return 1;
}

static void
put_int32(unsigned char *p, int32_t value)
{
    uint32_t v = (uint32_t)value;
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* The frame from a cached prefix (size and correlation id zero, up to the partition index):
 * [one bytearray] for records up to SMALL_RECORDS bytes, else [head, records(, tail)] with
 * records by reference; None when a value is out of range (the generic way says which). */
static PyObject *
assemble_frame(PyObject *prefix, int flexible, PyObject *correlation_obj, PyObject *index_obj,
               PyObject *records)
{
    int32_t correlation_id, index;
    if (!as_int32(index_obj, &index) || !as_int32(correlation_obj, &correlation_id)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyBytes_CheckExact(records) ? PyBytes_GET_SIZE(records)
                                               : PyByteArray_GET_SIZE(records);
    const char *data = PyBytes_CheckExact(records) ? PyBytes_AS_STRING(records)
                                                   : PyByteArray_AS_STRING(records);
    Py_ssize_t prefix_len = PyBytes_GET_SIZE(prefix);
    unsigned char length[10]; /* the records' length: int32, or (v9+) varint of length + 1 */
    Py_ssize_t length_len = 0, tail_len = 0;
    if (flexible) {
        uint64_t size = (uint64_t)n + 1; /* 0 is null */
        while (size > 0x7F) {
            length[length_len++] = (unsigned char)((size & 0x7F) | 0x80);
            size >>= 7;
        }
        length[length_len++] = (unsigned char)size;
        tail_len = 3;
    }
    else {
        if (n > INT32_MAX) {
            Py_RETURN_NONE;
        }
        put_int32(length, (int32_t)n);
        length_len = 4;
    }
    Py_ssize_t head_len = prefix_len + 4 + length_len;
    if (prefix_len < 12 || (uint64_t)head_len + (uint64_t)n + (uint64_t)tail_len - 4 >
                               (uint64_t)INT32_MAX) {
        Py_RETURN_NONE;
    }
    int small = n <= SMALL_RECORDS;
    PyObject *head = PyByteArray_FromStringAndSize(NULL, head_len + (small ? n + tail_len : 0));
    if (head == NULL) {
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(head);
    memcpy(out, PyBytes_AS_STRING(prefix), (size_t)prefix_len);
    put_int32(out, (int32_t)(head_len + n + tail_len - 4)); /* the size */
    put_int32(out + 8, correlation_id);                    /* after api key and version */
    put_int32(out + prefix_len, index);
    memcpy(out + prefix_len + 4, length, (size_t)length_len);
    if (small) {
        memcpy(out + head_len, data, (size_t)n);
        memset(out + head_len + n, 0, (size_t)tail_len);
        PyObject *frame = PyList_New(1);
        if (frame == NULL) {
            Py_DECREF(head);
            return NULL;
        }
        PyList_SET_ITEM(frame, 0, head);
        return frame;
    }
    PyObject *frame = PyList_New(tail_len ? 3 : 2);
    if (frame == NULL) {
        Py_DECREF(head);
        return NULL;
    }
    PyList_SET_ITEM(frame, 0, head);
    Py_INCREF(records);
    PyList_SET_ITEM(frame, 1, records);
    if (tail_len) {
        Py_INCREF(flex_tail);
        PyList_SET_ITEM(frame, 2, flex_tail);
    }
    return frame;
}

static int
is_records(PyObject *obj)
{
    return PyBytes_CheckExact(obj) || PyByteArray_CheckExact(obj);
}

/* assemble(prefix, flexible, correlation_id, index, records) -> list | None: produce_fast's
 * _assemble (prefix: bytes, records: bytes or bytearray). */
static PyObject *
assemble(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "assemble(prefix, flexible, correlation_id, index, records) takes 5 "
                        "arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || !is_records(args[4]) || !PyLong_CheckExact(args[2]) ||
        !PyLong_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "assemble(): prefix must be bytes, correlation_id and index int, records "
                        "bytes or bytearray");
        return NULL;
    }
    int flexible = PyObject_IsTrue(args[1]);
    if (flexible < 0) {
        return NULL;
    }
    return assemble_frame(args[0], flexible, args[2], args[3], args[4]);
}

/* d[key] for an exact dict and an interned str key: a borrowed reference, NULL (no error
 * set) when it is missing or the lookup failed. */
static PyObject *
item(PyObject *d, PyObject *key)
{
    PyObject *value = PyDict_GetItemWithError(d, key);
    if (value == NULL) {
        PyErr_Clear();
    }
    return value;
}

static int
is_name(PyObject *obj)
{
    return obj == Py_None || PyUnicode_CheckExact(obj);
}

/* encode_produce(api_version, correlation_id, client_id, body, generic) -> list | None:
 * produce_fast's encode_produce. */
static PyObject *
encode_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (py_encode == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.protocol._produce.bind() was not called");
        return NULL;
    }
    if (nargs != 5 || kwnames != NULL) {
        goto general;
    }
    PyObject *api_version = args[0], *correlation_id = args[1], *client_id = args[2],
             *body = args[3], *generic = args[4];
    if (!PyDict_CheckExact(body)) {
        goto general;
    }
    PyObject *topic_data = item(body, str_topic_data);
    if (topic_data == NULL || !PyList_CheckExact(topic_data)) {
        goto general;
    }
    if (PyList_GET_SIZE(topic_data) != 1 || PyDict_GET_SIZE(body) != 4) {
        Py_RETURN_NONE;
    }
    PyObject *topic = PyList_GET_ITEM(topic_data, 0);
    if (!PyDict_CheckExact(topic)) {
        goto general;
    }
    PyObject *parts = item(topic, str_partition_data);
    if (parts == NULL || !PyList_CheckExact(parts)) {
        goto general;
    }
    Py_ssize_t fields = PyDict_GET_SIZE(topic);
    if (PyList_GET_SIZE(parts) != 1 || fields < 2 || fields > 3) {
        Py_RETURN_NONE;
    }
    /* {name, topic_id, partition_data}: the id an exact uuid.UUID (its hash is the UUID's) */
    PyObject *topic_id = NULL;
    if (fields == 3) {
        topic_id = item(topic, str_topic_id);
        if (topic_id == NULL || Py_TYPE(topic_id) != (PyTypeObject *)uuid_type) {
            goto general;
        }
    }
    PyObject *part = PyList_GET_ITEM(parts, 0);
    if (!PyDict_CheckExact(part)) {
        goto general;
    }
    PyObject *records = item(part, str_records), *index = item(part, str_index);
    PyObject *transactional_id = item(body, str_transactional_id), *acks = item(body, str_acks),
             *timeout_ms = item(body, str_timeout_ms), *name = item(topic, str_name);
    /* the key's values of exact types: hashing them cannot fail or run Python code */
    if (records == NULL || index == NULL || transactional_id == NULL || acks == NULL ||
        timeout_ms == NULL || name == NULL || !PyLong_CheckExact(api_version) ||
        !is_name(client_id) || !is_name(transactional_id) || !PyLong_CheckExact(acks) ||
        !PyLong_CheckExact(timeout_ms) || !PyUnicode_CheckExact(name)) {
        goto general;
    }
    if (PyDict_GET_SIZE(part) != 2 || !PyLong_CheckExact(index) ||
        !PyLong_CheckExact(correlation_id) || !is_records(records)) {
        Py_RETURN_NONE;
    }
    int overflow;
    long version = PyLong_AsLongAndOverflow(api_version, &overflow);
    PyObject *key;
    if (!overflow && version == BY_ID) {
        if (topic_id == NULL) {
            Py_RETURN_NONE;
        }
        key = PyTuple_Pack(7, api_version, client_id, transactional_id, acks, timeout_ms, name,
                           topic_id);
    }
    else {
        key = PyTuple_Pack(6, api_version, client_id, transactional_id, acks, timeout_ms, name);
    }
    if (key == NULL) {
        return NULL;
    }
    PyObject *prefix = PyDict_GetItemWithError(prefixes, key); /* borrowed */
    if (prefix != NULL) {
        Py_DECREF(key);
        if (prefix == Py_None) {
            Py_RETURN_NONE;
        }
        if (!PyBytes_CheckExact(prefix)) {
            goto general;
        }
        return assemble_frame(prefix, version >= FIRST_FLEXIBLE, correlation_id, index, records);
    }
    if (PyErr_Occurred() || overflow || version < FIRST_VERSION || version > BY_ID) {
        Py_DECREF(key);
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *made = PyObject_CallFunctionObjArgs(make_prefix, key, generic, NULL);
    Py_DECREF(key);
    if (made == NULL || made == Py_None) {
        return made;
    }
    if (!PyBytes_CheckExact(made)) {
        Py_DECREF(made);
        goto general;
    }
    PyObject *frame =
        assemble_frame(made, version >= FIRST_FLEXIBLE, correlation_id, index, records);
    Py_DECREF(made);
    return frame;
general:
    return PyObject_Vectorcall(py_encode, args, (size_t)nargs, kwnames);
}

/* ---- the module -------------------------------------------------------------------------- */

/* bind(encode_produce, decode_produce, prefixes, make_prefix, uuid_type, topic_id, ids): the
 * Python module's reference functions, its prefix cache (a dict) and the function that fills
 * it, the type of a topic id, the function that makes one from an answer's 16 bytes and the
 * dict of those it made (by their bytes). */
static PyObject *
bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyDict_CheckExact(args[2]) || !PyType_Check(args[4]) ||
        !PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind(encode_produce, decode_produce, prefixes: dict, make_prefix, "
                        "uuid_type: type, topic_id, ids: dict)");
        return NULL;
    }
    PyObject **slots[7] = {&py_encode, &py_decode, &prefixes, &make_prefix, &uuid_type,
                           &py_topic_id, &topic_ids};
    for (int i = 0; i < 7; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(*slots[i], args[i]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(encode_produce, decode_produce, prefixes, make_prefix, uuid_type, topic_id, ids): "
     "the Python fallbacks and helpers."},
    {"assemble", (PyCFunction)(void (*)(void))assemble, METH_FASTCALL,
     "assemble(prefix, flexible, correlation_id, index, records) -> list | None"},
    {"encode_produce", (PyCFunction)(void (*)(void))encode_produce,
     METH_FASTCALL | METH_KEYWORDS,
     "encode_produce(api_version, correlation_id, client_id, body, generic) -> list | None"},
    {"decode_produce", (PyCFunction)(void (*)(void))kclient_decode_produce,
     METH_FASTCALL | METH_KEYWORDS,
     "decode_produce(api_version, frame) -> (correlation_id, body) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.protocol._produce",
    .m_doc = "The one-partition ProduceRequest and its answer in C (see produce_fast).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__produce(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&str_topic_data, "topic_data"},
        {&str_transactional_id, "transactional_id"},
        {&str_acks, "acks"},
        {&str_timeout_ms, "timeout_ms"},
        {&str_name, "name"},
        {&str_topic_id, "topic_id"},
        {&str_partition_data, "partition_data"},
        {&str_index, "index"},
        {&str_records, "records"},
        {&str_responses, "responses"},
        {&str_partition_responses, "partition_responses"},
        {&str_throttle_time_ms, "throttle_time_ms"},
        {&str_error_code, "error_code"},
        {&str_base_offset, "base_offset"},
        {&str_log_append_time_ms, "log_append_time_ms"},
        {&str_log_start_offset, "log_start_offset"},
        {&str_record_errors, "record_errors"},
        {&str_error_message, "error_message"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].slot == NULL) {
            *names[i].slot = PyUnicode_InternFromString(names[i].text);
            if (*names[i].slot == NULL) {
                return NULL;
            }
        }
    }
    if (flex_tail == NULL) {
        flex_tail = PyBytes_FromStringAndSize("\0\0\0", 3);
        if (flex_tail == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&module_def);
}
