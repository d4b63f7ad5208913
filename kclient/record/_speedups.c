/*
 * kclient.record._speedups: the optional C accelerator of kclient's record batches (v2).
 *
 * Two hot paths, each a drop-in for a pure-Python one that stays the reference:
 *
 *   RecordsWriter        the per-record state of a RecordBatchBuilder (builder.py): append()
 *                        encodes one record (Kafka's DefaultRecord.writeTo) straight into a
 *                        growing buffer and keeps the count, size and timestamps; _close()
 *                        hands the records section to the Python build(), which compresses
 *                        it and writes the header and CRC. kclient.record.builder subclasses
 *                        it as CRecordBatchBuilder.
 *   BinaryColumn         an Arrow binary array read in place (_column.c), for
 *                        RecordsWriter.append_rows, send_batch's bulk path.
 *   decode_records()     the records of one batch as Record tuples (batch.py's
 *                        _py_decode_records, Kafka's DefaultRecord.readFrom): checks the
 *                        whole batch, then makes the records as they are iterated.
 *
 * Both write and read exactly what the Python code does, byte for byte and error for error:
 * the tests run the record suite against both and compare them on generated and fuzzed input.
 * The layout of a record is described in layout.py. Every integer in a record is a zig-zag
 * varint; 64-bit arithmetic on timestamps and offsets wraps, as it does in Java.
 *
 * The C of the layers above (kclient.sender._speedups: the accumulator's append, the
 * keyed partitioner) reaches RecordsWriter and BinaryColumn through one capsule, _C_API
 * (_capi.h), made in the module init below.
 *
 * Threads: the GIL is held throughout; a RecordsWriter is not thread-safe (like the builder).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_capi.h"
#include "_column.h"
#include "_crc32c.h"
#include "_writer.h"

#define HEADER_SIZE 61     /* RecordBatch header; layout.HEADER_SIZE */
#define MIN_RECORD_BODY 6  /* layout.MIN_RECORD_SIZE - 1: a record without its length */
#define MAX_FIELD (PY_SSIZE_T_MAX / 8)

static PyObject *CorruptRecordError; /* kclient.errors.CorruptRecordError */
static PyObject *IllegalStateError;  /* kclient.errors.IllegalStateError */
static PyObject *header_encoder;     /* set_header_encoder(): the Python header encoder */
static PyObject *str_name;           /* "__name__" */

/* ---- varints ------------------------------------------------------------------------- */

/* The zig-zag encoding of a signed 64-bit value (Java: (v << 1) ^ (v >> 63)). */
static inline uint64_t
zigzag(int64_t value)
{
    uint64_t u = (uint64_t)value;
    return (u << 1) ^ (0 - (u >> 63));
}

/* The signed value of a zig-zag encoded 64-bit value. */
static inline int64_t
unzigzag(uint64_t raw)
{
    return (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
}

/* How many bytes the base-128 varint of `u` takes (1..10). */
static inline Py_ssize_t
varint_size(uint64_t u)
{
    Py_ssize_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

/* Write the base-128 varint of `u` at `p`; returns the bytes written. */
static inline Py_ssize_t
write_varint(uint8_t *p, uint64_t u)
{
    Py_ssize_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

/* Bytes taken by a length-prefixed field of `len` bytes, or 1 for a null one (len -1). */
static inline Py_ssize_t
field_size(Py_ssize_t len)
{
    return len < 0 ? 1 : varint_size(zigzag(len)) + len;
}

/* ---- RecordsWriter: one batch's records ------------------------------------------------ */


/* A key or value being appended: its bytes, or null, or a "bad" object that is
 * not bytes-like. The pure-Python builder takes such an object (counting len() bytes) and
 * only fails in build(); so does this one. */
typedef struct {
    const char *ptr;   /* the bytes (NULL when null or bad) */
    Py_ssize_t len;    /* their length; -1 for null */
    Py_buffer view;    /* held while appending a non-bytes buffer (bytearray, memoryview) */
    int has_view;
    PyObject *bad_type; /* for a bad object: the name of its type (new reference) */
} Field;

/* Fill `f` from a key or value argument; returns -1 with an exception set on failure. */
static int
field_get(Field *f, PyObject *obj)
{
    f->has_view = 0;
    f->bad_type = NULL;
    f->ptr = NULL;
    if (obj == Py_None) {
        f->len = -1;
        return 0;
    }
    if (PyBytes_Check(obj)) {
        f->ptr = PyBytes_AS_STRING(obj);
        f->len = PyBytes_GET_SIZE(obj);
    }
    else if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        f->has_view = 1;
        f->ptr = (const char *)f->view.buf;
        f->len = f->view.len;
    }
    else {
        f->len = PyObject_Size(obj); /* as the pure builder's len(key) */
        if (f->len < 0) {
            return -1;
        }
        f->bad_type = PyObject_GetAttr((PyObject *)Py_TYPE(obj), str_name);
        if (f->bad_type == NULL) {
            return -1;
        }
    }
    if (f->len > MAX_FIELD) {
        PyErr_SetString(PyExc_OverflowError, "a record's key or value is too large");
        return -1;
    }
    return 0;
}

/* Release what field_get() holds. */
static void
field_release(Field *f)
{
    if (f->has_view) {
        PyBuffer_Release(&f->view);
        f->has_view = 0;
    }
    Py_CLEAR(f->bad_type);
}

/* The headers of a record being appended: either a list/tuple of (str, bytes | None) pairs
 * encoded here, or `blob`, what the Python encoder made of anything else. */
typedef struct {
    PyObject *seq;  /* the list or tuple (borrowed), or NULL */
    PyObject *blob; /* the Python encoder's bytes (new reference), or NULL */
    Py_ssize_t size;
} Headers;

/* Size the headers of a record; sets h->seq for the fast encoding, or h->blob from
 * self._encode_headers(headers) for anything the fast one does not take (including every
 * malformed header, so that errors are the Python ones). -1 with an exception on error. */
static int
headers_prepare(PyObject *self, Headers *h, PyObject *headers)
{
    h->seq = NULL;
    h->blob = NULL;
    h->size = 1; /* the varint 0: no headers */
    if (headers == NULL) {
        return 0;
    }
    if (PyList_CheckExact(headers) || PyTuple_CheckExact(headers)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
        PyObject **items = PySequence_Fast_ITEMS(headers);
        Py_ssize_t size = varint_size(zigzag(n));
        if (n == 0) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *pair = items[i];
            PyObject *name, *value;
            Py_ssize_t name_len;
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
                goto python;
            }
            name = PyTuple_GET_ITEM(pair, 0);
            value = PyTuple_GET_ITEM(pair, 1);
            if (!PyUnicode_CheckExact(name) || !(value == Py_None || PyBytes_CheckExact(value))) {
                goto python;
            }
            if (PyUnicode_AsUTF8AndSize(name, &name_len) == NULL) {
                return -1; /* a lone surrogate: UnicodeEncodeError, as name.encode() */
            }
            size += field_size(name_len);
            size += field_size(value == Py_None ? -1 : PyBytes_GET_SIZE(value));
            if (size > MAX_FIELD) {
                PyErr_SetString(PyExc_OverflowError, "a record's headers are too large");
                return -1;
            }
        }
        h->seq = headers;
        h->size = size;
        return 0;
    }
    else {
        int truth = PyObject_IsTrue(headers); /* the pure builder's `if headers:` */
        if (truth <= 0) {
            return truth;
        }
    }
python:
    if (header_encoder == NULL) {
        PyErr_SetString(PyExc_TypeError, "headers: set_header_encoder() was not called");
        return -1;
    }
    h->blob = PyObject_CallOneArg(header_encoder, headers);
    if (h->blob == NULL) {
        return -1;
    }
    if (!PyBytes_Check(h->blob)) {
        PyErr_SetString(PyExc_TypeError, "the header encoder must return bytes");
        Py_CLEAR(h->blob);
        return -1;
    }
    h->size = PyBytes_GET_SIZE(h->blob);
    return 0;
}

/* Write the headers sized by headers_prepare() at `p`; returns the bytes written. No Python
 * code runs between the two, so the sequence and its strings are unchanged. */
static Py_ssize_t
headers_write(Headers *h, uint8_t *p)
{
    if (h->blob != NULL) {
        memcpy(p, PyBytes_AS_STRING(h->blob), (size_t)h->size);
        return h->size;
    }
    if (h->seq == NULL) {
        *p = 0;
        return 1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(h->seq);
    PyObject **items = PySequence_Fast_ITEMS(h->seq);
    uint8_t *start = p;
    p += write_varint(p, zigzag(n));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(items[i], 0);
        PyObject *value = PyTuple_GET_ITEM(items[i], 1);
        Py_ssize_t name_len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &name_len); /* cached: cannot fail */
        p += write_varint(p, zigzag(name_len));
        memcpy(p, utf8, (size_t)name_len);
        p += name_len;
        if (value == Py_None) {
            *p++ = 1;
        }
        else {
            Py_ssize_t value_len = PyBytes_GET_SIZE(value);
            p += write_varint(p, zigzag(value_len));
            memcpy(p, PyBytes_AS_STRING(value), (size_t)value_len);
            p += value_len;
        }
    }
    return p - start;
}

/* Write a key or value field at `p` (its bytes are left out for a bad object: build() will
 * fail anyway); returns the bytes written. */
static inline Py_ssize_t
field_write(Field *f, uint8_t *p)
{
    if (f->len < 0) {
        *p = 1; /* the varint -1 */
        return 1;
    }
    Py_ssize_t n = write_varint(p, zigzag(f->len));
    if (f->bad_type == NULL && f->len) {
        memcpy(p + n, f->ptr, (size_t)f->len);
        n += f->len;
    }
    return n;
}

/* Make room for `extra` more bytes in the buffer; -1 with MemoryError on failure. */
static int
writer_reserve(RecordsWriter *self, Py_ssize_t extra)
{
    Py_ssize_t need = self->len + extra;
    if (need <= self->cap) {
        return 0;
    }
    Py_ssize_t cap = self->cap ? self->cap : Py_MIN(Py_MAX(self->limit, 256), 16384);
    while (cap < need) {
        cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    }
    uint8_t *buf = PyMem_Realloc(self->buf, (size_t)cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = buf;
    self->cap = cap;
    return 0;
}

/* Raise IllegalStateError for a builder used after build(); returns NULL. */
static PyObject *
writer_closed_error(void)
{
    PyErr_SetString(IllegalStateError,
                    "record batch is already built; start a new RecordBatchBuilder for more "
                    "records");
    return NULL;
}

/* Parse append()'s arguments (timestamp_ms, key, value, headers=()) into argv[4]. */
static int
append_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **argv)
{
    static const char *const names[4] = {"timestamp_ms", "key", "value", "headers"};
    argv[0] = argv[1] = argv[2] = argv[3] = NULL;
    if (nargs > 4) {
        PyErr_Format(PyExc_TypeError, "append() takes at most 4 arguments (%zd given)", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        argv[i] = args[i];
    }
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *kw = PyTuple_GET_ITEM(kwnames, i);
            int j = 0;
            while (j < 4 && PyUnicode_CompareWithASCIIString(kw, names[j]) != 0) {
                j++;
            }
            if (j == 4) {
                PyErr_Format(PyExc_TypeError,
                             "append() got an unexpected keyword argument '%U'", kw);
                return -1;
            }
            if (argv[j] != NULL) {
                PyErr_Format(PyExc_TypeError, "append() got multiple values for argument '%s'",
                             names[j]);
                return -1;
            }
            argv[j] = args[nargs + i];
        }
    }
    for (int j = 0; j < 3; j++) {
        if (argv[j] == NULL) {
            PyErr_Format(PyExc_TypeError, "append() missing required argument '%s'", names[j]);
            return -1;
        }
    }
    return 0;
}

/* append(timestamp_ms, key, value, headers=()) -> offset delta, or -1 when the record does
 * not fit (the first record always does). Encodes one record:
 *   length | attributes 0 | timestampDelta | offsetDelta | key | value | headers
 * Everything that may run Python code (conversions, len(), the Python header encoder) runs
 * before the builder's state is read, so reentrant calls cannot leave it inconsistent. */
Py_ssize_t
kclient_writer_append(RecordsWriter *self, PyObject *timestamp_ms, PyObject *key_obj,
                      PyObject *value_obj, PyObject *headers_obj)
{
    Field key, value;
    Headers headers = {NULL, NULL, 0};
    Py_ssize_t result = -2;
    long long ts;
    int overflow;

    if (self->closed) {
        writer_closed_error();
        return -2;
    }
    ts = PyLong_AsLongLongAndOverflow(timestamp_ms, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "timestamp_ms %R does not fit in 64 bits",
                     timestamp_ms);
        return -2;
    }
    if (ts == -1 && PyErr_Occurred()) {
        return -2;
    }
    if (field_get(&key, key_obj) < 0) {
        field_release(&key);
        return -2;
    }
    if (field_get(&value, value_obj) < 0) {
        field_release(&value);
        field_release(&key);
        return -2;
    }
    if (headers_prepare((PyObject *)self, &headers, headers_obj) < 0) {
        goto done;
    }
    if (self->closed) { /* built by Python code run above */
        writer_closed_error();
        goto done;
    }

    Py_ssize_t count = self->count;
    int64_t base_ts = count ? self->base_ts : (int64_t)ts;
    uint64_t delta = zigzag((int64_t)((uint64_t)ts - (uint64_t)base_ts)); /* wraps, as Java */
    uint64_t offset_delta = zigzag(count);
    Py_ssize_t body = 1 + varint_size(delta) + varint_size(offset_delta) + field_size(key.len) +
                      field_size(value.len) + headers.size;
    Py_ssize_t total = varint_size(zigzag(body)) + body;
    if (total > PY_SSIZE_T_MAX - self->size) {
        PyErr_SetString(PyExc_OverflowError, "record batch is too large");
        goto done;
    }
    if (self->size + total > self->limit && count) {
        result = -1;
        goto done;
    }
    Py_ssize_t written = total;
    if (key.bad_type != NULL) {
        written -= key.len;
    }
    if (value.bad_type != NULL) {
        written -= value.len;
    }
    if (writer_reserve(self, written) < 0) {
        goto done;
    }
    uint8_t *p = self->buf + self->len;
    p += write_varint(p, zigzag(body));
    *p++ = 0; /* attributes */
    p += write_varint(p, delta);
    p += write_varint(p, offset_delta);
    p += field_write(&key, p);
    p += field_write(&value, p);
    p += headers_write(&headers, p);
    self->len = p - self->buf;
    self->size += total;
    if (self->bad_index < 0 && (key.bad_type != NULL || value.bad_type != NULL)) {
        self->bad_index = count;
        self->bad_field = key.bad_type != NULL ? "key" : "value";
        self->bad_type = key.bad_type != NULL ? key.bad_type : value.bad_type;
        Py_INCREF(self->bad_type);
    }
    self->base_ts = base_ts;
    if (ts > self->max_ts) {
        self->max_ts = ts;
    }
    self->count = count + 1;
    result = count;
done:
    Py_XDECREF(headers.blob);
    field_release(&value);
    field_release(&key);
    return result;
}

/* append(timestamp_ms, key, value, headers=()) -> offset delta, or -1 when full. */
static PyObject *
writer_append(RecordsWriter *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *argv[4];

    if (append_args(args, nargs, kwnames, argv) < 0) {
        return NULL;
    }
    Py_ssize_t delta = kclient_writer_append(self, argv[0], argv[1], argv[2], argv[3]);
    return delta < -1 ? NULL : PyLong_FromSsize_t(delta);
}

/* The bytes of a key or value for append_rows(): NULL/-1 for None; -2 with a TypeError for
 * anything but bytes (send_batch checked the columns). */
static inline Py_ssize_t
row_field(PyObject *obj, const char **ptr, const char *what, Py_ssize_t row)
{
    if (obj == Py_None) {
        *ptr = NULL;
        return -1;
    }
    if (!PyBytes_CheckExact(obj)) {
        PyErr_Format(PyExc_TypeError, "row %zd: %s must be bytes or None, got %s", row, what,
                     Py_TYPE(obj)->tp_name);
        return -2;
    }
    if (PyBytes_GET_SIZE(obj) > MAX_FIELD) {
        PyErr_SetString(PyExc_OverflowError, "a record's key or value is too large");
        return -2;
    }
    *ptr = PyBytes_AS_STRING(obj);
    return PyBytes_GET_SIZE(obj);
}

/* An int64 buffer (array('q'), or a memoryview of format q/l): -1 with TypeError naming
 * `what` when `obj` is not one. */
static int
int64_view(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT) < 0) {
        PyErr_Format(PyExc_TypeError, "append_rows(): %s must be an array('q')", what);
        return -1;
    }
    if (view->itemsize != 8 || view->format == NULL ||
        (strcmp(view->format, "q") != 0 && strcmp(view->format, "l") != 0)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "append_rows(): %s must be an array('q')", what);
        return -1;
    }
    return 0;
}

/* A column of append_rows(): a list of Python items, a BinaryColumn, or an int64 buffer. */
typedef struct {
    PyObject *list;      /* a list, or NULL */
    BinaryColumn *col;   /* a BinaryColumn, or NULL */
    const int64_t *ints; /* an int64 buffer's items, or NULL */
    Py_ssize_t len;      /* rows */
    Py_buffer view;      /* held for ints */
    const char *what;
} Source;

/* Fill `src` from a column argument; `ints` allows an int64 buffer (timestamps, rows),
 * `binary` a BinaryColumn (keys, values). -1 with TypeError when it is none of those. */
static int
source_get(Source *src, PyObject *obj, const char *what, int ints, int binary)
{
    src->list = NULL;
    src->col = NULL;
    src->ints = NULL;
    src->what = what;
    if (PyList_CheckExact(obj)) {
        src->list = obj;
        src->len = PyList_GET_SIZE(obj);
        return 0;
    }
    if (binary && Py_IS_TYPE(obj, &kclient_BinaryColumnType)) {
        src->col = (BinaryColumn *)obj;
        src->len = src->col->length;
        return 0;
    }
    if (ints && int64_view(obj, &src->view, 0, what) == 0) {
        src->ints = (const int64_t *)src->view.buf;
        src->len = src->view.len / 8;
        return 0;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "append_rows(): %s must be a list%s%s", what,
                 ints ? " or an array('q')" : "", binary ? " or a BinaryColumn" : "");
    return -1;
}

static void
source_release(Source *src)
{
    if (src->ints != NULL) {
        PyBuffer_Release(&src->view);
        src->ints = NULL;
    }
}

/* Row `row` of an int column (timestamps, rows): 0 with *out set, -1 with an error. */
static inline int
source_int(const Source *src, Py_ssize_t row, int64_t *out)
{
    if (row < 0 || row >= src->len) {
        PyErr_Format(PyExc_TypeError, "append_rows(): %s has no item %zd", src->what, row);
        return -1;
    }
    if (src->ints != NULL) {
        *out = src->ints[row];
        return 0;
    }
    PyObject *item = PyList_GET_ITEM(src->list, row);
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%s: %R does not fit in 64 bits", src->what, item);
        return -1;
    }
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Row `row` of a key or value column: its length with *ptr set (-1 for null), or -2 with
 * an error. */
static inline Py_ssize_t
source_bytes(const Source *src, Py_ssize_t row, const char **ptr, const char *what)
{
    if (row < 0 || row >= src->len) {
        PyErr_Format(PyExc_TypeError, "append_rows(): %s has no item %zd", src->what, row);
        return -2;
    }
    if (src->col != NULL) {
        return column_row(src->col, row, ptr);
    }
    return row_field(PyList_GET_ITEM(src->list, row), ptr, what, row);
}

/* append_rows(timestamps, keys, values, rows, start, stop, results, deltas, result) -> count
 * Appends, as append() would without headers, the rows rows[start:stop] of the columns (rows
 * None: the rows start..stop-1) until one does not fit (the first record of an empty batch
 * always does); for each row appended, results[row] = result and deltas[row] = its offset
 * delta. values is a list or a BinaryColumn, keys too or None; timestamps and rows lists or
 * array('q')s (rows may be None); results a list, deltas an array('q'). List items of keys
 * and values are bytes or None, of timestamps and rows ints. Returns the rows appended. */
static PyObject *
writer_append_rows(RecordsWriter *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "append_rows() takes 9 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *results = args[6], *deltas = args[7], *result = args[8];
    Py_ssize_t start = PyLong_AsSsize_t(args[4]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t stop = PyLong_AsSsize_t(args[5]);
    if (stop == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (self->closed) {
        return writer_closed_error();
    }
    if (!PyList_CheckExact(results)) {
        PyErr_SetString(PyExc_TypeError, "append_rows(): results must be a list");
        return NULL;
    }
    Py_buffer deltas_view;
    if (int64_view(deltas, &deltas_view, 1, "deltas") < 0) {
        return NULL;
    }
    Source ts_src = {0}, key_src = {0}, value_src = {0}, row_src = {0};
    int has_keys = args[1] != Py_None, has_rows = args[3] != Py_None;
    PyObject *out = NULL;
    if (source_get(&ts_src, args[0], "timestamps", 1, 0) < 0 ||
        (has_keys && source_get(&key_src, args[1], "keys", 0, 1) < 0) ||
        source_get(&value_src, args[2], "values", 0, 1) < 0 ||
        (has_rows && source_get(&row_src, args[3], "rows", 1, 0) < 0)) {
        goto done;
    }
    int64_t *delta_items = (int64_t *)deltas_view.buf;
    Py_ssize_t n_deltas = deltas_view.len / 8, n_results = PyList_GET_SIZE(results);
    Py_ssize_t appended = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        int64_t row = i;
        if (has_rows && source_int(&row_src, i, &row) < 0) {
            goto done;
        }
        if (row < 0 || row >= n_deltas || row >= n_results) {
            PyErr_Format(PyExc_IndexError, "append_rows(): %s has no item %lld",
                         row < 0 || row >= n_deltas ? "deltas" : "results", (long long)row);
            goto done;
        }
        int64_t ts;
        if (source_int(&ts_src, row, &ts) < 0) {
            goto done;
        }
        const char *key_ptr = NULL, *value_ptr;
        Py_ssize_t key_len = has_keys ? source_bytes(&key_src, row, &key_ptr, "key") : -1;
        Py_ssize_t value_len = source_bytes(&value_src, row, &value_ptr, "value");
        if (key_len == -2 || value_len == -2) {
            goto done;
        }
        Py_ssize_t count = self->count;
        int64_t base_ts = count ? self->base_ts : ts;
        uint64_t delta = zigzag((int64_t)((uint64_t)ts - (uint64_t)base_ts));
        uint64_t offset_delta = zigzag(count);
        Py_ssize_t body = 1 + varint_size(delta) + varint_size(offset_delta) +
                          field_size(key_len) + field_size(value_len) + 1;
        Py_ssize_t total = varint_size(zigzag(body)) + body;
        if (total > PY_SSIZE_T_MAX - self->size) {
            PyErr_SetString(PyExc_OverflowError, "record batch is too large");
            goto done;
        }
        if (self->size + total > self->limit && count) {
            break;
        }
        if (writer_reserve(self, total) < 0) {
            goto done;
        }
        uint8_t *p = self->buf + self->len;
        p += write_varint(p, zigzag(body));
        *p++ = 0; /* attributes */
        p += write_varint(p, delta);
        p += write_varint(p, offset_delta);
        if (key_len < 0) {
            *p++ = 1; /* the varint -1 */
        }
        else {
            p += write_varint(p, zigzag(key_len));
            memcpy(p, key_ptr, (size_t)key_len);
            p += key_len;
        }
        if (value_len < 0) {
            *p++ = 1;
        }
        else {
            p += write_varint(p, zigzag(value_len));
            memcpy(p, value_ptr, (size_t)value_len);
            p += value_len;
        }
        *p++ = 0; /* no headers */
        self->len = p - self->buf;
        self->size += total;
        self->base_ts = base_ts;
        if (ts > self->max_ts) {
            self->max_ts = ts;
        }
        self->count = count + 1;
        delta_items[row] = count;
        Py_INCREF(result);
        PyList_SetItem(results, row, result);
        appended++;
    }
    out = PyLong_FromSsize_t(appended);
done:
    source_release(&row_src);
    source_release(&value_src);
    source_release(&key_src);
    source_release(&ts_src);
    PyBuffer_Release(&deltas_view);
    return out;
}

/* _start(batch_size): (re)initialise an empty, open writer; called by the builder's
 * __init__. */
static PyObject *
kclient_writer_start(RecordsWriter *self, PyObject *arg)
{
    Py_ssize_t limit = PyLong_AsSsize_t(arg);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyMem_Free(self->buf);
    self->buf = NULL;
    self->len = self->cap = 0;
    self->size = HEADER_SIZE;
    self->limit = limit;
    self->count = 0;
    self->base_ts = 0;
    self->max_ts = -1;
    self->closed = 0;
    self->bad_index = -1;
    self->bad_field = NULL;
    Py_CLEAR(self->bad_type);
    Py_RETURN_NONE;
}

/* _close() -> the records section as bytes; closes the writer. Raises TypeError naming the
 * first record whose key or value was not bytes (the writer is closed all the same). */
static PyObject *
writer_close(RecordsWriter *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *records = NULL;
    if (self->closed) {
        return writer_closed_error();
    }
    self->closed = 1;
    if (self->bad_index >= 0) {
        PyErr_Format(PyExc_TypeError, "record %zd: %s must be bytes or None, got %S",
                     self->bad_index, self->bad_field, self->bad_type);
    }
    else {
        records = PyBytes_FromStringAndSize((const char *)self->buf, self->len);
    }
    PyMem_Free(self->buf);
    self->buf = NULL;
    self->len = self->cap = 0;
    return records;
}

/* _close_framed(header, crc32c) -> the whole batch as bytes; closes the writer.
 * `header` is the batch's 61-byte header with a zero CRC; the records follow it in the one
 * bytes object made here (no second copy to join them), and the CRC-32C of everything
 * from the attributes on (crc32c(memoryview) -> int) is written into it. Raises as
 * _close() does for a record whose key or value was not bytes. */
static PyObject *
writer_close_framed(RecordsWriter *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "_close_framed() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *header = args[0], *crc_fn = args[1];
    if (!PyBytes_CheckExact(header) || PyBytes_GET_SIZE(header) != HEADER_SIZE) {
        PyErr_SetString(PyExc_TypeError, "_close_framed(): header must be 61 bytes");
        return NULL;
    }
    if (self->closed) {
        return writer_closed_error();
    }
    self->closed = 1;
    PyObject *batch = NULL;
    if (self->bad_index >= 0) {
        PyErr_Format(PyExc_TypeError, "record %zd: %s must be bytes or None, got %S",
                     self->bad_index, self->bad_field, self->bad_type);
    }
    else {
        batch = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + self->len);
    }
    if (batch != NULL) {
        char *p = PyBytes_AS_STRING(batch);
        memcpy(p, PyBytes_AS_STRING(header), HEADER_SIZE);
        if (self->len) {
            memcpy(p + HEADER_SIZE, self->buf, (size_t)self->len);
        }
    }
    PyMem_Free(self->buf);
    self->buf = NULL;
    self->len = self->cap = 0;
    if (batch == NULL) {
        return NULL;
    }
    char *p = PyBytes_AS_STRING(batch);
    const Py_ssize_t crc_at = 17, covered_from = 21; /* layout.CRC_OFFSET, ATTRIBUTES_OFFSET */
    unsigned long value;
    if (kclient_is_package_crc32c(crc_fn)) { /* what it computes, without the call */
        value = kclient_crc32c((const unsigned char *)p + covered_from,
                               PyBytes_GET_SIZE(batch) - covered_from);
    }
    else {
        PyObject *view = PyMemoryView_FromMemory(p + covered_from,
                                                 PyBytes_GET_SIZE(batch) - covered_from,
                                                 PyBUF_READ);
        if (view == NULL) {
            Py_DECREF(batch);
            return NULL;
        }
        PyObject *crc = PyObject_CallOneArg(crc_fn, view);
        Py_DECREF(view);
        if (crc == NULL) {
            Py_DECREF(batch);
            return NULL;
        }
        value = PyLong_AsUnsignedLong(crc);
        Py_DECREF(crc);
        if (value == (unsigned long)-1 && PyErr_Occurred()) {
            Py_DECREF(batch);
            return NULL;
        }
    }
    p[crc_at] = (char)(value >> 24);
    p[crc_at + 1] = (char)(value >> 16);
    p[crc_at + 2] = (char)(value >> 8);
    p[crc_at + 3] = (char)value;
    return batch;
}

/* is_full() -> True once closed, or once the batch has reached batch_size. */
static PyObject *
writer_is_full(RecordsWriter *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->closed || (self->count > 0 && self->size >= self->limit));
}

/* record_count: records appended so far. */
static PyObject *
writer_get_count(RecordsWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->count);
}

/* _open_size: header + records so far, uncompressed. */
static PyObject *
writer_get_size(RecordsWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->size);
}

/* batch_size: the limit append() keeps the batch within. */
static PyObject *
writer_get_limit(RecordsWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->limit);
}

/* base_timestamp: the first record's timestamp (0 while empty). */
static PyObject *
writer_get_base_ts(RecordsWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->base_ts);
}

/* max_timestamp: the greatest timestamp so far (-1 while empty). */
static PyObject *
writer_get_max_ts(RecordsWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->max_ts);
}

/* closed: True once _close() has run. */
static PyObject *
writer_get_closed(RecordsWriter *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->closed);
}

/* tp_new: an open, empty writer with batch_size 0; arguments are for the subclass __init__. */
static PyObject *
writer_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    RecordsWriter *self = (RecordsWriter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->size = HEADER_SIZE;
    self->max_ts = -1;
    self->bad_index = -1;
    return (PyObject *)self;
}

/* tp_dealloc: free the buffer and the remembered type name. */
static void
writer_dealloc(RecordsWriter *self)
{
    PyMem_Free(self->buf);
    Py_CLEAR(self->bad_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef writer_methods[] = {
    {"append", (PyCFunction)(void (*)(void))writer_append, METH_FASTCALL | METH_KEYWORDS,
     "append(timestamp_ms, key, value, headers=()) -> offset delta, or -1 when full"},
    {"append_rows", (PyCFunction)(void (*)(void))writer_append_rows, METH_FASTCALL,
     "append_rows(timestamps, keys, values, rows, start, stop, results, deltas, result) -> "
     "rows appended"},
    {"is_full", (PyCFunction)writer_is_full, METH_NOARGS,
     "True when built, or when the batch has reached batch_size."},
    {"_start", (PyCFunction)kclient_writer_start, METH_O, "Reset to an empty batch of batch_size."},
    {"_close", (PyCFunction)writer_close, METH_NOARGS, "Close; return the records section."},
    {"_close_framed", (PyCFunction)(void (*)(void))writer_close_framed, METH_FASTCALL,
     "Close; return header + records as one bytes, the CRC written in."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"record_count", (getter)writer_get_count, NULL, "Records appended so far.", NULL},
    {"_open_size", (getter)writer_get_size, NULL, "Header + records so far.", NULL},
    {"batch_size", (getter)writer_get_limit, NULL, "The batch.size limit.", NULL},
    {"base_timestamp", (getter)writer_get_base_ts, NULL, "First record's timestamp.", NULL},
    {"max_timestamp", (getter)writer_get_max_ts, NULL, "Greatest timestamp so far.", NULL},
    {"closed", (getter)writer_get_closed, NULL, "True once closed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kclient_RecordsWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.record._speedups.RecordsWriter",
    .tp_basicsize = sizeof(RecordsWriter),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The per-record state and append() of a RecordBatchBuilder, in C.",
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
    .tp_new = writer_new,
};

/* ---- decode_records -------------------------------------------------------------------- */

/* A records section being decoded. */
typedef struct {
    const uint8_t *data;
    Py_ssize_t end;
    Py_ssize_t pos;
} Reader;

/* What every record of a batch is decoded with. */
typedef struct {
    int64_t base_offset;
    int64_t base_ts;
    PyObject *log_append_time; /* an int, or Py_None for CreateTime */
    PyTypeObject *cls;         /* Record */
} Batch;

/* Raise the pure decoder's IndexError: the records end early (records() words the message). */
static int
ran_off(void)
{
    PyErr_SetString(PyExc_IndexError, "records end early");
    return -1;
}

/* Read a varint the way varint.decode_varint does (no IndexError: CorruptRecordError when it
 * runs past the end or is longer than 10 bytes; bits past 64 are dropped, as in Java). */
static int
read_varint(Reader *r, int64_t *out)
{
    uint64_t result = 0;
    Py_ssize_t pos = r->pos;
    for (int shift = 0; shift < 70; shift += 7) {
        if (pos >= r->end) {
            PyErr_Format(CorruptRecordError,
                         "varint at byte %zd runs past the end of the records", pos);
            return -1;
        }
        uint8_t b = r->data[pos++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            r->pos = pos;
            *out = unzigzag(result);
            return 0;
        }
    }
    PyErr_Format(CorruptRecordError, "varint ending at byte %zd is longer than 10 bytes", pos);
    return -1;
}

/* Read a varint the way _py_decode_records inlines it: its first two bytes are indexed
 * (IndexError past the end), longer ones go through read_varint. */
static inline int
read_inline_varint(Reader *r, int64_t *out)
{
    Py_ssize_t pos = r->pos;
    if (pos >= r->end) {
        return ran_off();
    }
    uint8_t b = r->data[pos];
    if (b < 0x80) {
        r->pos = pos + 1;
        *out = unzigzag(b);
        return 0;
    }
    if (pos + 1 >= r->end) {
        return ran_off();
    }
    uint8_t c = r->data[pos + 1];
    if (c < 0x80) {
        r->pos = pos + 2;
        *out = unzigzag((uint64_t)(b & 0x7F) | ((uint64_t)c << 7));
        return 0;
    }
    return read_varint(r, out);
}

/* Read a key or value of length `size` (-1: None) of record `index`; `what` names it in
 * errors. With `out`, store a new reference (bytes, or None); without, only check. */
static int
read_field(Reader *r, int64_t size, Py_ssize_t index, const char *what, PyObject **out)
{
    if (size >= 0) {
        if (size > r->end - r->pos) {
            return ran_off(); /* the pure slice is cut short, and its next read fails */
        }
        if (out != NULL) {
            *out = PyBytes_FromStringAndSize((const char *)r->data + r->pos, (Py_ssize_t)size);
            if (*out == NULL) {
                return -1;
            }
        }
        r->pos += (Py_ssize_t)size;
        return 0;
    }
    if (size == -1) {
        if (out != NULL) {
            *out = Py_NewRef(Py_None);
        }
        return 0;
    }
    PyErr_Format(CorruptRecordError, "record %zd has %s length %lld", index, what,
                 (long long)size);
    return -1;
}

/* Read the headers of record `index`, which ends at `record_end` (batch.py's
 * _decode_headers). With `out`, store a new list of (str, bytes | None); without, only
 * check (header keys are still decoded, to check they are UTF-8). */
static int
read_headers(Reader *r, Py_ssize_t record_end, Py_ssize_t index, PyObject **out)
{
    int64_t count, size;
    PyObject *headers = NULL, *name = NULL, *value = NULL, *pair;

    if (read_varint(r, &count) < 0) {
        return -1;
    }
    Py_ssize_t room = record_end - r->pos; /* may be negative: fields overran the record */
    if (count < 0 || room < 0 || count > room / 2) {
        PyErr_Format(CorruptRecordError, "record %zd has header count %lld", index,
                     (long long)count);
        return -1;
    }
    if (out != NULL) {
        headers = PyList_New((Py_ssize_t)count);
        if (headers == NULL) {
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        if (read_varint(r, &size) < 0) {
            goto error;
        }
        if (size < 0 || size > record_end - r->pos) {
            PyErr_Format(CorruptRecordError, "record %zd has header key length %lld", index,
                         (long long)size);
            goto error;
        }
        name = PyUnicode_DecodeUTF8((const char *)r->data + r->pos, (Py_ssize_t)size, "strict");
        if (name == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                PyErr_Format(CorruptRecordError, "record %zd has a header key that is not UTF-8",
                             index);
            }
            goto error;
        }
        r->pos += (Py_ssize_t)size;
        if (read_varint(r, &size) < 0) {
            goto error;
        }
        if (size < -1 || (size >= 0 && size > record_end - r->pos)) {
            PyErr_Format(CorruptRecordError, "record %zd has header value length %lld", index,
                         (long long)size);
            goto error;
        }
        if (out == NULL) {
            Py_CLEAR(name);
            r->pos += size < 0 ? 0 : (Py_ssize_t)size;
            continue;
        }
        if (size < 0) {
            value = Py_NewRef(Py_None);
        }
        else {
            value = PyBytes_FromStringAndSize((const char *)r->data + r->pos, (Py_ssize_t)size);
            if (value == NULL) {
                goto error;
            }
            r->pos += (Py_ssize_t)size;
        }
        pair = PyTuple_Pack(2, name, value);
        Py_CLEAR(name);
        Py_CLEAR(value);
        if (pair == NULL) {
            goto error;
        }
        PyList_SET_ITEM(headers, i, pair);
    }
    if (out != NULL) {
        *out = headers;
    }
    return 0;
error:
    Py_XDECREF(name);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    return -1;
}

/* A Record (a tuple subclass) of five new references, which it takes over; NULLs allowed
 * (then it fails, with the error that made the NULL, and releases the others). */
static PyObject *
new_record(PyTypeObject *cls, PyObject *offset, PyObject *ts, PyObject *key, PyObject *value,
           PyObject *headers)
{
    PyObject *record = NULL;
    if (offset != NULL && ts != NULL && key != NULL && value != NULL && headers != NULL) {
        record = cls->tp_alloc(cls, 5);
    }
    if (record == NULL) {
        Py_XDECREF(offset);
        Py_XDECREF(ts);
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        return NULL;
    }
    PyTuple_SET_ITEM(record, 0, offset);
    PyTuple_SET_ITEM(record, 1, ts);
    PyTuple_SET_ITEM(record, 2, key);
    PyTuple_SET_ITEM(record, 3, value);
    PyTuple_SET_ITEM(record, 4, headers);
    return record;
}

/* Decode record `index` at r->pos, as the loop body of _py_decode_records. With `out`, store
 * the new Record; without, only check it (no objects are made but header keys). Returns 0,
 * or -1 with CorruptRecordError / IndexError (or MemoryError) set. Offsets and timestamps
 * wrap around in 64 bits, as Java's longs. */
static int
decode_record(Reader *r, Py_ssize_t index, const Batch *batch, PyObject **out)
{
    int64_t length, ts_delta, offset_delta, size;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *ts;
    PyObject **key_out = out ? &key : NULL;
    PyObject **value_out = out ? &value : NULL;
    PyObject **headers_out = out ? &headers : NULL;

    if (read_inline_varint(r, &length) < 0) {
        return -1;
    }
    Py_ssize_t left = r->end - r->pos;
    if (length < MIN_RECORD_BODY || length > left) {
        PyErr_Format(CorruptRecordError,
                     "record %zd at byte %zd has length %lld (%zd bytes left)", index, r->pos,
                     (long long)length, left);
        return -1;
    }
    Py_ssize_t record_end = r->pos + (Py_ssize_t)length;
    r->pos += 1; /* attributes */
    if (read_inline_varint(r, &ts_delta) < 0 || read_inline_varint(r, &offset_delta) < 0 ||
        read_inline_varint(r, &size) < 0 || read_field(r, size, index, "key", key_out) < 0 ||
        read_inline_varint(r, &size) < 0 ||
        read_field(r, size, index, "value", value_out) < 0) {
        goto error;
    }
    if (r->pos >= r->end) {
        ran_off();
        goto error;
    }
    if (r->data[r->pos] == 0) {
        r->pos += 1;
        if (out != NULL && (headers = PyList_New(0)) == NULL) {
            goto error;
        }
    }
    else if (read_headers(r, record_end, index, headers_out) < 0) {
        goto error;
    }
    if (r->pos != record_end) {
        PyErr_Format(CorruptRecordError, "record %zd has length %lld but its fields take %lld",
                     index, (long long)length, (long long)(length + (r->pos - record_end)));
        goto error;
    }
    if (out == NULL) {
        return 0;
    }
    if (batch->log_append_time == Py_None) {
        ts = PyLong_FromLongLong((int64_t)((uint64_t)batch->base_ts + (uint64_t)ts_delta));
    }
    else {
        ts = Py_NewRef(batch->log_append_time);
    }
    *out = new_record(
        batch->cls,
        PyLong_FromLongLong((int64_t)((uint64_t)batch->base_offset + (uint64_t)offset_delta)),
        ts, key, value, headers);
    return *out == NULL ? -1 : 0;
error:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    return -1;
}

/* The records of one checked batch, decoded one at a time as they are iterated: a batch's
 * records die young, one by one, instead of all surviving until the last is made. */
typedef struct {
    PyObject_HEAD
    PyObject *data;    /* the records section (bytes), NULL once exhausted */
    Py_ssize_t pos;    /* where the next record starts */
    Py_ssize_t index;  /* its index */
    Py_ssize_t count;  /* records in the batch */
    Batch batch;       /* holds references to log_append_time and cls */
} RecordsIterator;

/* tp_iternext: the next Record, or NULL (with no exception set) after the last one. */
static PyObject *
records_next(RecordsIterator *self)
{
    PyObject *record;
    Reader r;
    if (self->data == NULL) {
        return NULL;
    }
    if (self->index >= self->count) {
        Py_CLEAR(self->data);
        return NULL;
    }
    r.data = (const uint8_t *)PyBytes_AS_STRING(self->data);
    r.end = PyBytes_GET_SIZE(self->data);
    r.pos = self->pos;
    /* Checked by decode_records() and immutable since: only MemoryError can fail here. */
    if (decode_record(&r, self->index, &self->batch, &record) < 0) {
        Py_CLEAR(self->data);
        return NULL;
    }
    self->pos = r.pos;
    self->index++;
    return record;
}

/* __length_hint__(): the records left, so that list() allocates once. */
static PyObject *
records_length_hint(RecordsIterator *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(self->data == NULL ? 0 : self->count - self->index);
}

/* tp_dealloc: release the records section and the batch's objects. */
static void
records_dealloc(RecordsIterator *self)
{
    Py_XDECREF(self->data);
    Py_XDECREF(self->batch.log_append_time);
    Py_XDECREF((PyObject *)self->batch.cls);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef records_methods[] = {
    {"__length_hint__", (PyCFunction)records_length_hint, METH_NOARGS, "Records left."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RecordsIteratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.record._speedups.RecordsIterator",
    .tp_basicsize = sizeof(RecordsIterator),
    .tp_dealloc = (destructor)records_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The records of one batch, decoded as they are iterated.",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)records_next,
    .tp_methods = records_methods,
};

/* decode_records(data, count, base_offset, base_timestamp, log_append_time, record_class)
 * -> iterator of record_class: the records of one batch's (decompressed) records section.
 * The whole section is checked first, so that every error _py_decode_records raises is
 * raised here, by this call; the records themselves are made as they are iterated. */
static PyObject *
decode_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t count;
    Batch batch;
    Reader r;
    PyObject *data;
    RecordsIterator *it;

    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "decode_records() takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    batch.base_offset = PyLong_AsLongLong(args[2]);
    if (batch.base_offset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    batch.base_ts = PyLong_AsLongLong(args[3]);
    if (batch.base_ts == -1 && PyErr_Occurred()) {
        return NULL;
    }
    batch.log_append_time = args[4];
    if (batch.log_append_time != Py_None && !PyLong_Check(batch.log_append_time)) {
        PyErr_SetString(PyExc_TypeError, "log_append_time must be an int or None");
        return NULL;
    }
    if (!PyType_Check(args[5]) || !PyType_IsSubtype((PyTypeObject *)args[5], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_class must be a tuple subclass");
        return NULL;
    }
    batch.cls = (PyTypeObject *)args[5];
    if (PyBytes_CheckExact(args[0])) {
        data = Py_NewRef(args[0]);
    }
    else { /* a memoryview of the batch: one copy, immutable while the records are read */
        data = PyBytes_FromObject(args[0]);
        if (data == NULL) {
            return NULL;
        }
    }
    r.data = (const uint8_t *)PyBytes_AS_STRING(data);
    r.end = PyBytes_GET_SIZE(data);
    r.pos = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (decode_record(&r, index, &batch, NULL) < 0) {
            Py_DECREF(data);
            return NULL;
        }
    }
    if (r.pos != r.end) {
        PyErr_Format(CorruptRecordError,
                     "%zd bytes are left after the %zd records the header announces",
                     r.end - r.pos, count);
        Py_DECREF(data);
        return NULL;
    }
    it = PyObject_New(RecordsIterator, &RecordsIteratorType);
    if (it == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    it->data = data;
    it->pos = 0;
    it->index = 0;
    it->count = count;
    it->batch = batch;
    Py_INCREF(batch.log_append_time);
    Py_INCREF((PyObject *)batch.cls);
    return (PyObject *)it;
}

/* ---- the module ------------------------------------------------------------------------ */

/* set_header_encoder(fn): fn(headers) -> bytes encodes what append does not itself (headers
 * other than a list or tuple of (str, bytes | None) tuples). kclient.record.builder sets it. */
static PyObject *
set_header_encoder(PyObject *Py_UNUSED(module), PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_header_encoder: fn must be callable");
        return NULL;
    }
    Py_XSETREF(header_encoder, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "decode_records(data, count, base_offset, base_timestamp, log_append_time, "
     "record_class) -> iterator of records, checked first"},
    {"set_header_encoder", set_header_encoder, METH_O,
     "set_header_encoder(fn): fn(headers) -> bytes, for headers append does not encode"},
    {"crc32c", (PyCFunction)(void (*)(void))kclient_crc32c_py, METH_FASTCALL,
     "crc32c(data: bytes, table=False) -> int: CRC-32C as the crc32c package computes it "
     "(_crc32c.c; table: without the CPU's instruction)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.record._speedups",
    .m_doc = "C accelerator for kclient.record: record encoding and decoding.",
    .m_size = -1,
    .m_methods = module_methods,
};

/* The record layer's C API (_capi.h), exported as the capsule _C_API. */
static const KclientRecordCAPI record_capi = {
    .version = KCLIENT_RECORD_CAPI_VERSION,
    .writer_type = &kclient_RecordsWriterType,
    .column_type = &kclient_BinaryColumnType,
    .writer_append = kclient_writer_append,
};

/* Module init: ready the types, fetch kclient's error classes, intern the names used, and
 * export the C API. */
PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *module, *errors;

    if (PyType_Ready(&kclient_RecordsWriterType) < 0 || PyType_Ready(&RecordsIteratorType) < 0 ||
        PyType_Ready(&kclient_BinaryColumnType) < 0) {
        return NULL;
    }
    if (CorruptRecordError == NULL) {
        errors = PyImport_ImportModule("kclient.errors");
        if (errors == NULL) {
            return NULL;
        }
        CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
        IllegalStateError = PyObject_GetAttrString(errors, "IllegalStateError");
        Py_DECREF(errors);
        str_name = PyUnicode_InternFromString("__name__");
        if (CorruptRecordError == NULL || IllegalStateError == NULL || str_name == NULL) {
            Py_CLEAR(CorruptRecordError);
            Py_CLEAR(IllegalStateError);
            Py_CLEAR(str_name);
            return NULL;
        }
    }
    module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    PyObject *capi = PyCapsule_New((void *)&record_capi, KCLIENT_RECORD_CAPI_NAME, NULL);
    int failed = capi == NULL ||
                 PyModule_AddObjectRef(module, "RecordsWriter",
                                       (PyObject *)&kclient_RecordsWriterType) < 0 ||
                 PyModule_AddObjectRef(module, "BinaryColumn",
                                       (PyObject *)&kclient_BinaryColumnType) < 0 ||
                 PyModule_AddObjectRef(module, "_C_API", capi) < 0;
    Py_XDECREF(capi);
    if (failed) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
