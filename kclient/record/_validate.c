/*
 * kclient.record._validate: the record walk of the broker's LogValidator, in C.
 *
 *   check_records(data, count, base_timestamp, target_timestamp)
 *       -> (problem, max_timestamp, found_index, found_timestamp)
 *
 * The same checks, results and messages as kclient/record/check.py's py_check_records,
 * which is the reference (its docstring lists the checks). One pass over the bytes that
 * makes no objects; the interpreter lock is let go for large sections, so the broker's
 * other threads run meanwhile. `data` is any contiguous buffer (a memoryview of a request,
 * or decompressed bytes); it is held (exported) for the whole call.
 *
 * Kept apart from _speedups.c (the builder and the decoder) on purpose: it is the broker's,
 * and reads, never writes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MIN_RECORD_SIZE 7 /* layout.MIN_RECORD_SIZE */
#define MIN_BODY 6        /* a record without its length varint */
#define NO_TIMESTAMP (-1)
#define NOGIL_BYTES (64 * 1024) /* sections at least this big are walked without the GIL */
#define MESSAGE_SIZE 200

/* A records section being walked. */
typedef struct {
    const uint8_t *data;
    Py_ssize_t pos;
} Walk;

/* The first problem found: the record index (-1: no single record) and what is wrong. */
typedef struct {
    Py_ssize_t index;
    char message[MESSAGE_SIZE];
} Problem;

static int
fail(Problem *p, Py_ssize_t index, const char *format, ...)
{
    va_list args;
    p->index = index;
    va_start(args, format);
    vsnprintf(p->message, MESSAGE_SIZE, format, args);
    va_end(args);
    return -1;
}

/* What a varint or field is, for error messages only (made when one is reported): a
 * name, or with header >= 0 "header <header> <name>". */
typedef struct {
    const char *name;
    int64_t header;
} What;

static const char *
what_text(What what, const char *suffix, char *buf, size_t size)
{
    if (what.header >= 0) {
        snprintf(buf, size, "header %lld %s%s", (long long)what.header, what.name, suffix);
    }
    else {
        snprintf(buf, size, "%s%s", what.name, suffix);
    }
    return buf;
}

/* An unsigned base-128 varint of at most `max_bytes` bytes that ends before `end`. */
static int
read_uvarint(Walk *w, Py_ssize_t end, int max_bytes, uint64_t *out, Problem *p,
             Py_ssize_t index, What what, const char *suffix)
{
    char text[64];
    uint64_t result = 0;
    Py_ssize_t pos = w->pos;
    for (int i = 0; pos < end; i++) {
        uint8_t b = w->data[pos++];
        result |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            w->pos = pos;
            *out = result;
            return 0;
        }
        if (i + 1 >= max_bytes) {
            return fail(p, index, "record %zd: %s varint is longer than %d bytes", index,
                        what_text(what, suffix, text, sizeof text), max_bytes);
        }
    }
    return fail(p, index, "record %zd: %s runs past the end of the record", index,
                what_text(what, suffix, text, sizeof text));
}

/* A zig-zag varint of at most 5 bytes that fits in 32 bits (Java's readVarint). */
static int
read_varint(Walk *w, Py_ssize_t end, int64_t *out, Problem *p, Py_ssize_t index, What what,
            const char *suffix)
{
    char text[64];
    uint64_t raw = 0;
    if (read_uvarint(w, end, 5, &raw, p, index, what, suffix) < 0) {
        return -1;
    }
    if (raw > 0xFFFFFFFFu) {
        return fail(p, index, "record %zd: %s varint does not fit in 32 bits", index,
                    what_text(what, suffix, text, sizeof text));
    }
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* A zig-zag varlong of at most 10 bytes (bits past 64 dropped, as Java's readVarlong). */
static int
read_varlong(Walk *w, Py_ssize_t end, int64_t *out, Problem *p, Py_ssize_t index, What what)
{
    uint64_t raw = 0;
    if (read_uvarint(w, end, 10, &raw, p, index, what, "") < 0) {
        return -1;
    }
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* Skip a key, value or header value of record `index`: -1 is null. */
static int
skip_field(Walk *w, Py_ssize_t end, Problem *p, Py_ssize_t index, What what)
{
    char text[64];
    int64_t size;
    if (read_varint(w, end, &size, p, index, what, " length") < 0) {
        return -1;
    }
    if (size < -1 || size > end - w->pos) {
        return fail(p, index,
                    "record %zd: %s length %lld does not fit the record (%zd bytes left)", index,
                    what_text(what, "", text, sizeof text), (long long)size, end - w->pos);
    }
    if (size > 0) {
        w->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* Whether data[0:n] is UTF-8 as Python's strict decoder takes it: no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static int
is_utf8(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int extra;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            extra = 1;
            cp = c & 0x1F;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            extra = 2;
            cp = c & 0x0F;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            extra = 3;
            cp = c & 0x07;
        }
        else {
            return 0;
        }
        if (extra > n - 1 - i) {
            return 0; /* cut short */
        }
        for (int k = 1; k <= extra; k++) {
            uint8_t cc = s[i + k];
            if ((cc & 0xC0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
            return 0;
        }
        i += extra + 1;
    }
    return 1;
}

/* Check record `index` at w->pos (the section ends at `end`); its timestamp delta to
 * `ts_delta`. */
static int
check_one(Walk *w, Py_ssize_t end, Py_ssize_t index, int64_t *ts_delta, Problem *p)
{
    int64_t length, offset_delta, headers, size;
    if (read_varint(w, end, &length, p, index, (What){"length", -1}, "") < 0) {
        return -1;
    }
    if (length < MIN_BODY || length > end - w->pos) {
        return fail(p, index,
                    "record %zd: length %lld is impossible (%zd bytes left, at least %d needed)",
                    index, (long long)length, end - w->pos, MIN_BODY);
    }
    Py_ssize_t record_end = w->pos + (Py_ssize_t)length;
    w->pos += 1; /* attributes: unused in v2 */
    if (read_varlong(w, record_end, ts_delta, p, index, (What){"timestamp delta", -1}) < 0 ||
        read_varint(w, record_end, &offset_delta, p, index, (What){"offset delta", -1}, "") < 0) {
        return -1;
    }
    if (offset_delta != (int64_t)index) {
        return fail(p, index,
                    "record %zd: offset delta %lld, expected %zd (deltas must count 0, 1, 2 "
                    "... without gaps)",
                    index, (long long)offset_delta, index);
    }
    if (skip_field(w, record_end, p, index, (What){"key", -1}) < 0 ||
        skip_field(w, record_end, p, index, (What){"value", -1}) < 0 ||
        read_varint(w, record_end, &headers, p, index, (What){"header count", -1}, "") < 0) {
        return -1;
    }
    if (headers < 0 || headers > (record_end - w->pos) / 2) {
        return fail(p, index,
                    "record %zd: header count %lld does not fit the record (%zd bytes left)",
                    index, (long long)headers, record_end - w->pos);
    }
    for (int64_t h = 0; h < headers; h++) {
        if (read_varint(w, record_end, &size, p, index, (What){"header key length", -1}, "") <
            0) {
            return -1;
        }
        if (size < 0 || size > record_end - w->pos) {
            return fail(p, index,
                        "record %zd: header %lld has key length %lld (null or past the record)",
                        index, (long long)h, (long long)size);
        }
        if (!is_utf8(w->data + w->pos, (Py_ssize_t)size)) {
            return fail(p, index, "record %zd: header %lld key is not UTF-8", index,
                        (long long)h);
        }
        w->pos += (Py_ssize_t)size;
        if (skip_field(w, record_end, p, index, (What){"value", h}) < 0) {
            return -1;
        }
    }
    if (w->pos != record_end) {
        return fail(p, index, "record %zd: length %lld but its fields take %lld bytes", index,
                    (long long)length, (long long)(length + (w->pos - record_end)));
    }
    return 0;
}

/* The whole walk (no Python objects touched: may run without the GIL). */
typedef struct {
    const uint8_t *data;
    Py_ssize_t end;
    Py_ssize_t count;
    int64_t base_ts;
    int has_target;
    int64_t target_ts;
    /* results */
    int64_t max_ts;
    Py_ssize_t found_index;
    int64_t found_ts;
    Problem problem;
} Job;

static int
walk(Job *job)
{
    Walk w = {job->data, 0};
    int64_t ts_delta = 0;
    job->max_ts = NO_TIMESTAMP;
    job->found_index = -1;
    job->found_ts = -1;
    if (job->count < 0 || job->count > job->end / MIN_RECORD_SIZE) {
        return fail(&job->problem, -1, "record count %zd is impossible for %zd bytes of records",
                    job->count, job->end);
    }
    for (Py_ssize_t index = 0; index < job->count; index++) {
        if (w.pos == job->end) {
            return fail(&job->problem, -1,
                        "the records end after %zd of the %zd the header announces", index,
                        job->count);
        }
        if (check_one(&w, job->end, index, &ts_delta, &job->problem) < 0) {
            return -1;
        }
        int64_t ts = (int64_t)((uint64_t)job->base_ts + (uint64_t)ts_delta);
        if (ts > job->max_ts) {
            job->max_ts = ts;
        }
        if (job->has_target && job->found_index < 0 && ts >= job->target_ts) {
            job->found_index = index;
            job->found_ts = ts;
        }
    }
    if (w.pos != job->end) {
        return fail(&job->problem, -1,
                    "%zd bytes are left after the %zd records the header announces",
                    job->end - w.pos, job->count);
    }
    return 0;
}

static PyObject *
check_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Job job;
    int failed;

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "check_records() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    job.count = PyLong_AsSsize_t(args[1]);
    if (job.count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    job.base_ts = PyLong_AsLongLong(args[2]);
    if (job.base_ts == -1 && PyErr_Occurred()) {
        return NULL;
    }
    job.has_target = args[3] != Py_None;
    job.target_ts = 0;
    if (job.has_target) {
        job.target_ts = PyLong_AsLongLong(args[3]);
        if (job.target_ts == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    job.data = (const uint8_t *)view.buf;
    job.end = view.len;
    if (view.len >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        failed = walk(&job);
        Py_END_ALLOW_THREADS
    }
    else {
        failed = walk(&job);
    }
    PyBuffer_Release(&view);
    if (failed) {
        return Py_BuildValue("((ns)Lnn)", job.problem.index, job.problem.message,
                             (long long)NO_TIMESTAMP, (Py_ssize_t)-1, (Py_ssize_t)-1);
    }
    return Py_BuildValue("(OLnL)", Py_None, (long long)job.max_ts, job.found_index,
                         (long long)job.found_ts);
}

static PyMethodDef module_methods[] = {
    {"check_records", (PyCFunction)(void (*)(void))check_records, METH_FASTCALL,
     "check_records(data, count, base_timestamp, target_timestamp) -> "
     "(problem, max_timestamp, found_index, found_timestamp)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef validate_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.record._validate",
    .m_doc = "C record walk of the embedded broker's LogValidator (see kclient.record.check).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__validate(void)
{
    return PyModule_Create(&validate_module);
}
