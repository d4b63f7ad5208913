/*
 * kclient.protocol._produce's answer (see _produce.c): a ProduceResponse for one partition,
 * written without errors or tags, read into the dict produce_fast's decode_produce (and the
 * generic decoder) makes of the same bytes; anything else is None (the generic decoder then
 * reads it) or, for an argument not of the exact types taken, the Python function's answer.
 * GIL held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_produce.h"

/* ---- the response ------------------------------------------------------------------------ */

static int32_t
get_int32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static int16_t
get_int16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

static int64_t
get_int64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)get_int32(p) << 32) | (uint64_t)(uint32_t)get_int32(p + 4));
}

/* The fields of a written partition's answer, as read. */
typedef struct {
    int32_t correlation_id, index, throttle_ms;
    int16_t error_code;
    int64_t base_offset, log_append_time_ms, log_start_offset;
    int has_start, has_errors; /* v5+: log_start_offset; v8+: record_errors, error_message */
    const unsigned char *name; /* the name's bytes; v13: the topic id's 16 */
    Py_ssize_t name_len;
} Answer;

/* v3-v8: 1 with *answer filled when the frame is the common shape, else 0. */
static int
read_fixed(long version, const unsigned char *p, Py_ssize_t len, Answer *answer)
{
    if (len < 10 || get_int32(p + 4) != 1 || get_int16(p + 8) < 0) {
        return 0;
    }
    Py_ssize_t name_len = get_int16(p + 8);
    Py_ssize_t pos = 10 + name_len;
    /* partitions, index, error code, base offset, log append time, [log start offset],
     * [record errors count, error message length] */
    Py_ssize_t fields = version >= 8 ? 40 : version >= 5 ? 34 : 26;
    if (pos + fields + 4 != len || get_int32(p + pos) != 1) {
        return 0;
    }
    if (version >= 8 && (get_int32(p + pos + 34) != 0 || get_int16(p + pos + 38) != -1)) {
        return 0;
    }
    answer->correlation_id = get_int32(p);
    answer->name = p + 10;
    answer->name_len = name_len;
    answer->index = get_int32(p + pos + 4);
    answer->error_code = get_int16(p + pos + 8);
    answer->base_offset = get_int64(p + pos + 10);
    answer->log_append_time_ms = get_int64(p + pos + 18);
    answer->has_start = version >= 5;
    answer->log_start_offset = version >= 5 ? get_int64(p + pos + 26) : 0;
    answer->has_errors = version >= 8;
    answer->throttle_ms = get_int32(p + pos + fields);
    return 1;
}

/* v9+: the correlation id (frame at p), and the partition's fields at f (index, code, base
 * offset, log append time, log start offset, then the throttle time 34 bytes in), once the
 * frame's shape is checked. */
static void
read_flexible_partition(const unsigned char *p, const unsigned char *f, Answer *answer)
{
    answer->correlation_id = get_int32(p);
    answer->index = get_int32(f);
    answer->error_code = get_int16(f + 4);
    answer->base_offset = get_int64(f + 6);
    answer->log_append_time_ms = get_int64(f + 14);
    answer->log_start_offset = get_int64(f + 22);
    answer->has_start = answer->has_errors = 1;
    answer->throttle_ms = get_int32(f + 34);
}

/* v9-v12: no header tags, one topic named in fewer than 127 bytes, one partition, no record
 * errors, a null message, no tags. 1 with *answer filled, else 0. */
static int
read_flexible(const unsigned char *p, Py_ssize_t len, Answer *answer)
{
    if (len < 7 || p[4] != 0 || p[5] != 2 || p[6] < 1 || p[6] > 0x7F) {
        return 0;
    }
    Py_ssize_t name_len = p[6] - 1;
    Py_ssize_t pos = 7 + name_len;
    if (len != 47 + name_len || p[pos] != 2) {
        return 0;
    }
    const unsigned char *f = p + pos + 1; /* index, code, base, log append, log start */
    /* no record errors, null message, no partition tags, no topic tags, throttle, no tags */
    if (f[30] != 1 || f[31] != 0 || f[32] != 0 || f[33] != 0 || f[38] != 0) {
        return 0;
    }
    read_flexible_partition(p, f, answer);
    answer->name = p + 7;
    answer->name_len = name_len;
    return 1;
}

/* v13: as read_flexible, the topic named by its 16-byte id (at p + 6). */
static int
read_by_id(const unsigned char *p, Py_ssize_t len, Answer *answer)
{
    if (len != 62 || p[4] != 0 || p[5] != 2 || p[22] != 2) {
        return 0;
    }
    const unsigned char *f = p + 23; /* index, code, base, log append, log start */
    if (f[30] != 1 || f[31] != 0 || f[32] != 0 || f[33] != 0 || f[38] != 0) {
        return 0;
    }
    read_flexible_partition(p, f, answer);
    answer->name = p + 6; /* the id */
    answer->name_len = 16;
    return 1;
}

/* d[key] = value, value stolen; -1 on error (value released). */
static int
set_new(PyObject *d, PyObject *key, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int rc = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* [value], value stolen; NULL on error (value released). */
static PyObject *
list_of(PyObject *value)
{
    if (value == NULL) {
        return NULL;
    }
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, value);
    return list;
}

/* The generic decoder's part dict, keys in its order; NULL on error. */
static PyObject *
part_dict(const Answer *a)
{
    PyObject *part = PyDict_New();
    if (part == NULL || set_new(part, str_index, PyLong_FromLong(a->index)) < 0 ||
        set_new(part, str_error_code, PyLong_FromLong(a->error_code)) < 0 ||
        set_new(part, str_base_offset, PyLong_FromLongLong(a->base_offset)) < 0 ||
        set_new(part, str_log_append_time_ms, PyLong_FromLongLong(a->log_append_time_ms)) < 0 ||
        (a->has_start &&
         set_new(part, str_log_start_offset, PyLong_FromLongLong(a->log_start_offset)) < 0) ||
        (a->has_errors && (set_new(part, str_record_errors, PyList_New(0)) < 0 ||
                           PyDict_SetItem(part, str_error_message, Py_None) < 0))) {
        Py_XDECREF(part);
        return NULL;
    }
    return part;
}

/* (correlation_id, {"responses": [{key: name, "partition_responses": [part]}],
 * "throttle_time_ms"}): the generic decoder's answer (key "name", or v13's "topic_id");
 * NULL on error. */
static PyObject *
answer_tuple(const Answer *a, PyObject *key, PyObject *name)
{
    PyObject *topic = PyDict_New(), *body = NULL;
    if (topic == NULL || PyDict_SetItem(topic, key, name) < 0 ||
        set_new(topic, str_partition_responses, list_of(part_dict(a))) < 0) {
        Py_XDECREF(topic);
        return NULL;
    }
    body = PyDict_New();
    if (body == NULL || set_new(body, str_responses, list_of(topic)) < 0) {
        Py_XDECREF(body);
        if (body == NULL) {
            Py_DECREF(topic);
        }
        return NULL;
    }
    if (set_new(body, str_throttle_time_ms, PyLong_FromLong(a->throttle_ms)) < 0) {
        Py_DECREF(body);
        return NULL;
    }
    PyObject *correlation_id = PyLong_FromLong(a->correlation_id);
    if (correlation_id == NULL) {
        Py_DECREF(body);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, correlation_id, body);
    Py_DECREF(correlation_id);
    Py_DECREF(body);
    return result;
}

/* decode_produce(api_version, frame) -> (correlation_id, body) | None: produce_fast's
 * decode_produce. */
PyObject *
kclient_decode_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    if (py_decode == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kclient.protocol._produce.bind() was not called");
        return NULL;
    }
    if (nargs != 2 || kwnames != NULL) {
        goto general;
    }
    if (!PyLong_CheckExact(args[0])) {
        Py_RETURN_NONE;
    }
    int overflow;
    long version = PyLong_AsLongAndOverflow(args[0], &overflow);
    if (overflow || version < FIRST_VERSION || version > BY_ID) {
        Py_RETURN_NONE;
    }
    PyObject *frame = args[1];
    if (!PyBytes_CheckExact(frame) && !PyByteArray_CheckExact(frame)) {
        goto general;
    }
    Py_buffer view; /* held: a bytearray cannot be resized under us */
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Answer answer;
    PyObject *result = NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    if (version == BY_ID) {
        if (read_by_id(p, view.len, &answer)) {
            /* produce_fast's _IDS first (bytes keys: no Python code), else its topic_id() */
            PyObject *id = PyBytes_FromStringAndSize((const char *)answer.name, 16);
            PyObject *topic_id = id == NULL ? NULL : PyDict_GetItemWithError(topic_ids, id);
            if (topic_id != NULL) {
                Py_INCREF(topic_id);
            }
            else if (id != NULL && !PyErr_Occurred()) {
                topic_id = PyObject_CallOneArg(py_topic_id, id);
            }
            Py_XDECREF(id);
            if (topic_id != NULL) {
                result = answer_tuple(&answer, str_topic_id, topic_id);
                Py_DECREF(topic_id);
            }
        }
        else {
            Py_INCREF(Py_None);
            result = Py_None;
        }
    }
    else if (version >= FIRST_FLEXIBLE ? read_flexible(p, view.len, &answer)
                                  : read_fixed(version, p, view.len, &answer)) {
        PyObject *name =
            PyUnicode_DecodeUTF8((const char *)answer.name, answer.name_len, NULL);
        if (name == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                Py_INCREF(Py_None);
                result = Py_None;
            }
        }
        else {
            result = answer_tuple(&answer, str_name, name);
            Py_DECREF(name);
        }
    }
    else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    PyBuffer_Release(&view);
    return result;
general:
    return PyObject_Vectorcall(py_decode, args, (size_t)nargs, kwnames);
}
