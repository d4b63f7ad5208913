/*
 * kclient.sender._drain's build (see _drain.c): RecordBatchBuilder.build's common case, an
 * uncompressed batch of the C builder, without the Python frame: the 61-byte header
 * (kclient/record/layout.py's HEADER_PREFIX and HEADER_TAIL: base offset, batch length,
 * partition leader epoch, magic, CRC 0; attributes, last offset delta, first and max
 * timestamps, producer id and epoch, base sequence, record count, all big-endian) handed to
 * the builder's _close_framed with crc32c, as build() does. Anything else is left to the
 * Python method. Sender thread, GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_drain.h"

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define MAGIC 2
#define TRANSACTIONAL_MASK 0x10

static inline uint8_t *
put(uint8_t *p, uint64_t value, int size)
{
    for (int i = size - 1; i >= 0; i--) {
        p[i] = (uint8_t)value;
        value >>= 8;
    }
    return p + size;
}

/* A slot holding an exact int within [low, high] into *out; 0 when it is not one. */
static inline int
bounded(PyObject *builder, Py_ssize_t offset, long long low, long long high, long long *out)
{
    PyObject *value = SLOT(builder, offset);
    if (value == NULL || !PyLong_CheckExact(value)) {
        return 0;
    }
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (n == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = n;
    return low <= n && n <= high;
}

PyObject *
kclient_drain_build(PyObject *builder)
{
    if (cfg.builder == NULL || Py_TYPE(builder) != cfg.builder) {
        return NULL;
    }
    RecordsWriter *w = (RecordsWriter *)builder;
    PyObject *built = SLOT(builder, cfg.w_built);
    PyObject *transactional = SLOT(builder, cfg.w_transactional);
    if (built != Py_None || w->closed || w->count <= 0 ||
        SLOT(builder, cfg.w_codec) != cfg.none_codec ||
        (transactional != Py_True && transactional != Py_False)) {
        return NULL;
    }
    long long base_offset, leader_epoch, producer_id, producer_epoch, base_sequence;
    if (!bounded(builder, cfg.w_base_offset, INT64_MIN, INT64_MAX, &base_offset) ||
        !bounded(builder, cfg.w_leader_epoch, INT32_MIN, INT32_MAX, &leader_epoch) ||
        !bounded(builder, cfg.w_producer_id, INT64_MIN, INT64_MAX, &producer_id) ||
        !bounded(builder, cfg.w_producer_epoch, INT16_MIN, INT16_MAX, &producer_epoch) ||
        !bounded(builder, cfg.w_base_sequence, INT32_MIN, INT32_MAX, &base_sequence) ||
        w->size - LOG_OVERHEAD > INT32_MAX || w->count > INT32_MAX ||
        (transactional == Py_True && producer_id < 0)) {
        return NULL;
    }
    uint8_t header[HEADER_SIZE];
    uint8_t *p = header;
    p = put(p, (uint64_t)base_offset, 8);
    p = put(p, (uint64_t)(w->size - LOG_OVERHEAD), 4);
    p = put(p, (uint64_t)leader_epoch, 4);
    p = put(p, MAGIC, 1);
    p = put(p, 0, 4); /* the CRC, written by _close_framed */
    p = put(p, transactional == Py_True ? TRANSACTIONAL_MASK : 0, 2); /* codec NONE: 0 */
    p = put(p, (uint64_t)(w->count - 1), 4);
    p = put(p, (uint64_t)w->base_ts, 8);
    p = put(p, (uint64_t)w->max_ts, 8);
    p = put(p, (uint64_t)producer_id, 8);
    p = put(p, (uint64_t)producer_epoch, 2);
    p = put(p, (uint64_t)base_sequence, 4);
    put(p, (uint64_t)w->count, 4);
    PyObject *args[3] = {builder, PyBytes_FromStringAndSize((const char *)header, HEADER_SIZE),
                         cfg.crc32c};
    if (args[1] == NULL) {
        return NULL;
    }
    built = PyObject_VectorcallMethod(s_close_framed, args,
                                      3, NULL);
    Py_DECREF(args[1]);
    if (built == NULL) {
        return NULL;
    }
    Py_INCREF(built);
    PyObject *old = SLOT(builder, cfg.w_built);
    SLOT(builder, cfg.w_built) = built;
    Py_XDECREF(old);
    return built;
}
