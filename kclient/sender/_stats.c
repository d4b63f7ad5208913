/*
 * kclient.sender._stats: the producer metrics' SampledStat and the Sender's per-request and
 * per-batch recording (SenderStats, the base of SenderMetrics) in C.
 *
 * Optional: kclient/sender/metrics.py keeps the pure-Python PySampledStat and PySenderStats,
 * the reference, and runs them when this module is not built or KCLIENT_PURE_PYTHON is set.
 * Both give the same rates, averages and maxima (tested against each other), for values
 * that a double holds exactly (below 2**53). The Sender thread records, any thread reads:
 * with the GIL held throughout, a reader sees a sample before or after a record, never
 * half-way (`_samples` is a new list each time).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

#define MAX_SAMPLES 16

/* ---- SampledStat ------------------------------------------------------------------------- */

typedef struct {
    int64_t start_ms;
    double sum, count, max;
} Sample;

/* Sum, count and max over the last `samples` windows of `window_ms`: sample[0..used-1],
 * oldest first. */
typedef struct {
    PyObject_HEAD
    int64_t window_ms;
    int samples, used;
    Sample sample[MAX_SAMPLES];
} SampledStat;

static PyTypeObject SampledStatType;

static void
stat_add(SampledStat *self, double value, int64_t now_ms)
{
    if (self->used == 0 ||
        (now_ms > self->sample[self->used - 1].start_ms &&
         (uint64_t)now_ms - (uint64_t)self->sample[self->used - 1].start_ms >=
             (uint64_t)self->window_ms)) {
        if (self->used == self->samples) { /* the oldest window goes */
            memmove(&self->sample[0], &self->sample[1], sizeof(Sample) * (size_t)(self->used - 1));
            self->used--;
        }
        Sample fresh = {now_ms, 0.0, 0.0, value};
        self->sample[self->used++] = fresh;
    }
    Sample *current = &self->sample[self->used - 1];
    current->sum += value;
    current->count += 1;
    if (value > current->max) {
        current->max = value;
    }
}

/* An int or float as a double: 0, or -1 with an error set. */
static int
as_double(PyObject *obj, double *out)
{
    if (PyFloat_CheckExact(obj)) {
        *out = PyFloat_AS_DOUBLE(obj);
        return 0;
    }
    if (!PyLong_Check(obj) && !PyFloat_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "a metric's value must be an int or a float, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(obj);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* now_ms as an int64: 0, or -1 with an error set. */
static int
as_ms(PyObject *obj, int64_t *out)
{
    long long value = PyLong_AsLongLong(obj);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int64_t)value;
    return 0;
}

static PyObject *
stat_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"window_ms", "samples", NULL};
    long long window_ms;
    int samples;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Li:SampledStat", keywords, &window_ms,
                                     &samples)) {
        return NULL;
    }
    if (window_ms <= 0 || samples < 1 || samples > MAX_SAMPLES) {
        PyErr_Format(PyExc_ValueError,
                     "SampledStat needs window_ms > 0 and 1 to %d samples, got %lld and %d",
                     MAX_SAMPLES, window_ms, samples);
        return NULL;
    }
    SampledStat *self = (SampledStat *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->window_ms = (int64_t)window_ms;
        self->samples = samples;
        self->used = 0;
    }
    return (PyObject *)self;
}

/* record(value, now_ms): value into the current window (a new one once window_ms passed
 * since it began; the oldest dropped beyond `samples`). */
static PyObject *
stat_record(SampledStat *self, PyObject *const *args, Py_ssize_t nargs)
{
    double value;
    int64_t now_ms;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "record(value, now_ms) takes 2 arguments");
        return NULL;
    }
    if (as_double(args[0], &value) < 0 || as_ms(args[1], &now_ms) < 0) {
        return NULL;
    }
    stat_add(self, value, now_ms);
    Py_RETURN_NONE;
}

/* _samples: [[window start ms, sum, count, max], ...], oldest first, a new list each time. */
static PyObject *
stat_samples(SampledStat *self, void *closure)
{
    PyObject *list = PyList_New(self->used);
    if (list == NULL) {
        return NULL;
    }
    for (int i = 0; i < self->used; i++) {
        const Sample *s = &self->sample[i];
        PyObject *item = Py_BuildValue("[Lddd]", (long long)s->start_ms, s->sum, s->count, s->max);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyMethodDef stat_methods[] = {
    {"record", (PyCFunction)(void (*)(void))stat_record, METH_FASTCALL,
     "record(value, now_ms): value into the current window."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stat_getset[] = {
    {"_samples", (getter)stat_samples, NULL,
     "[[window start ms, sum, count, max], ...], oldest first (a copy).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef stat_members[] = {
    {"window_ms", T_LONGLONG, offsetof(SampledStat, window_ms), READONLY, "Each window's length."},
    {"samples", T_INT, offsetof(SampledStat, samples), READONLY, "How many windows are kept."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SampledStatType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.sender._stats.SampledStat",
    .tp_doc = "SampledStat(window_ms, samples): sum, count and max over the last windows.",
    .tp_basicsize = sizeof(SampledStat),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = stat_new,
    .tp_methods = stat_methods,
    .tp_getset = stat_getset,
    .tp_members = stat_members,
};

/* ---- SenderStats ------------------------------------------------------------------------- */

/* The Sender's stats and totals, and its recording per request and per batch. The stats are
 * set by SenderMetrics.__init__ (SampledStat instances); recording before they are set
 * raises AttributeError. */
enum {
    RECORDS_SENT,
    RECORD_ERRORS,
    RECORD_RETRIES,
    BATCH_SIZE,
    RECORDS_PER_REQUEST,
    COMPRESSION_RATE,
    REQUEST_LATENCY,
    OUTGOING_BYTES,
    STAT_COUNT
};

static const char *stat_names[STAT_COUNT] = {
    "records_sent",   "record_errors",    "record_retries",  "batch_size",
    "records_per_request", "compression_rate", "request_latency", "outgoing_bytes",
};

typedef struct {
    PyObject_HEAD
    SampledStat *stats[STAT_COUNT];
    long long records_sent_total, record_errors_total;
} SenderStats;

static int
sender_stats_traverse(SenderStats *self, visitproc visit, void *arg)
{
    for (int i = 0; i < STAT_COUNT; i++) {
        Py_VISIT(self->stats[i]);
    }
    return 0; /* a Python subclass's type is visited by its own traverse */
}

static int
sender_stats_clear(SenderStats *self)
{
    for (int i = 0; i < STAT_COUNT; i++) {
        Py_CLEAR(self->stats[i]);
    }
    return 0;
}

static void
sender_stats_dealloc(SenderStats *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    sender_stats_clear(self);
    type->tp_free((PyObject *)self); /* a Python subclass's dealloc releases its type */
}

static PyObject *
sender_stats_get(SenderStats *self, void *closure)
{
    Py_ssize_t i = (Py_ssize_t)closure;
    if (self->stats[i] == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s is not set", stat_names[i]);
        return NULL;
    }
    Py_INCREF(self->stats[i]);
    return (PyObject *)self->stats[i];
}

static int
sender_stats_set(SenderStats *self, PyObject *value, void *closure)
{
    Py_ssize_t i = (Py_ssize_t)closure;
    if (value == NULL || !PyObject_TypeCheck(value, &SampledStatType)) {
        PyErr_Format(PyExc_TypeError, "%s must be a kclient.sender._stats.SampledStat",
                     stat_names[i]);
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->stats[i], (SampledStat *)value);
    return 0;
}

/* The stat of index i, or NULL with AttributeError. */
static SampledStat *
stat_of(SenderStats *self, int i)
{
    if (self->stats[i] == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s is not set", stat_names[i]);
    }
    return self->stats[i];
}

/* args[0..count-2] as doubles, args[count-1] as now_ms; -1 with an error set. */
static int
parse(const char *signature, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t count,
      double *values, int64_t *now_ms)
{
    if (nargs != count) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", signature, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count - 1; i++) {
        if (as_double(args[i], &values[i]) < 0) {
            return -1;
        }
    }
    return as_ms(args[count - 1], now_ms);
}

/* record_request(batches, records, size_bytes, now_ms) */
static PyObject *
record_request(SenderStats *self, PyObject *const *args, Py_ssize_t nargs)
{
    double v[3];
    int64_t now_ms;
    if (parse("record_request(batches, records, size_bytes, now_ms)", args, nargs, 4, v,
              &now_ms) < 0 ||
        stat_of(self, RECORDS_PER_REQUEST) == NULL || stat_of(self, OUTGOING_BYTES) == NULL) {
        return NULL;
    }
    stat_add(self->stats[RECORDS_PER_REQUEST], v[1], now_ms);
    stat_add(self->stats[OUTGOING_BYTES], v[2], now_ms);
    Py_RETURN_NONE;
}

/* record_batch(size_bytes, uncompressed_bytes, now_ms) */
static PyObject *
record_batch(SenderStats *self, PyObject *const *args, Py_ssize_t nargs)
{
    double v[2];
    int64_t now_ms;
    if (parse("record_batch(size_bytes, uncompressed_bytes, now_ms)", args, nargs, 3, v,
              &now_ms) < 0 ||
        stat_of(self, BATCH_SIZE) == NULL || stat_of(self, COMPRESSION_RATE) == NULL) {
        return NULL;
    }
    stat_add(self->stats[BATCH_SIZE], v[0], now_ms);
    if (v[1] > 0) {
        stat_add(self->stats[COMPRESSION_RATE], v[0] / v[1], now_ms);
    }
    Py_RETURN_NONE;
}

/* One stat's record(value, now_ms), and with a total, total += value (an int). */
static PyObject *
record_one(SenderStats *self, PyObject *const *args, Py_ssize_t nargs, int i,
           long long *total, const char *signature)
{
    double value;
    int64_t now_ms;
    if (parse(signature, args, nargs, 2, &value, &now_ms) < 0 || stat_of(self, i) == NULL) {
        return NULL;
    }
    long long add = 0;
    if (total != NULL) {
        add = PyLong_AsLongLong(args[0]);
        if (add == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    stat_add(self->stats[i], value, now_ms);
    if (total != NULL) {
        *total += add;
    }
    Py_RETURN_NONE;
}

static PyObject *
record_sent(SenderStats *self, PyObject *const *args, Py_ssize_t nargs)
{
    return record_one(self, args, nargs, RECORDS_SENT, &self->records_sent_total,
                      "record_sent(records, now_ms)");
}

static PyObject *
record_errors_for(SenderStats *self, PyObject *const *args, Py_ssize_t nargs)
{
    return record_one(self, args, nargs, RECORD_ERRORS, &self->record_errors_total,
                      "record_errors_for(records, now_ms)");
}

static PyObject *
record_retries_for(SenderStats *self, PyObject *const *args, Py_ssize_t nargs)
{
    return record_one(self, args, nargs, RECORD_RETRIES, NULL,
                      "record_retries_for(records, now_ms)");
}

static PyObject *
record_latency(SenderStats *self, PyObject *const *args, Py_ssize_t nargs)
{
    return record_one(self, args, nargs, REQUEST_LATENCY, NULL,
                      "record_latency(latency_ms, now_ms)");
}

#define FASTCALL(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL

static PyMethodDef sender_stats_methods[] = {
    {"record_request", FASTCALL(record_request),
     "record_request(batches, records, size_bytes, now_ms)"},
    {"record_batch", FASTCALL(record_batch), "record_batch(size_bytes, uncompressed_bytes, now_ms)"},
    {"record_sent", FASTCALL(record_sent), "record_sent(records, now_ms)"},
    {"record_errors_for", FASTCALL(record_errors_for), "record_errors_for(records, now_ms)"},
    {"record_retries_for", FASTCALL(record_retries_for), "record_retries_for(records, now_ms)"},
    {"record_latency", FASTCALL(record_latency), "record_latency(latency_ms, now_ms)"},
    {NULL, NULL, 0, NULL},
};

#define STAT_GETSET(i)                                                                         \
    {                                                                                          \
        NULL, (getter)sender_stats_get, (setter)sender_stats_set, NULL, (void *)(Py_ssize_t)(i) \
    }

static PyGetSetDef sender_stats_getset[STAT_COUNT + 1] = {
    STAT_GETSET(RECORDS_SENT),        STAT_GETSET(RECORD_ERRORS),    STAT_GETSET(RECORD_RETRIES),
    STAT_GETSET(BATCH_SIZE),          STAT_GETSET(RECORDS_PER_REQUEST),
    STAT_GETSET(COMPRESSION_RATE),    STAT_GETSET(REQUEST_LATENCY),  STAT_GETSET(OUTGOING_BYTES),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef sender_stats_members[] = {
    {"records_sent_total", T_LONGLONG, offsetof(SenderStats, records_sent_total), 0,
     "Records written since the start."},
    {"record_errors_total", T_LONGLONG, offsetof(SenderStats, record_errors_total), 0,
     "Records failed since the start."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SenderStatsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.sender._stats.SenderStats",
    .tp_doc = "The Sender's stats and totals (the base of SenderMetrics).",
    .tp_basicsize = sizeof(SenderStats),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)sender_stats_dealloc,
    .tp_traverse = (traverseproc)sender_stats_traverse,
    .tp_clear = (inquiry)sender_stats_clear,
    .tp_methods = sender_stats_methods,
    .tp_getset = sender_stats_getset,
    .tp_members = sender_stats_members,
};

/* ---- the module -------------------------------------------------------------------------- */

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.sender._stats",
    .m_doc = "The producer metrics' SampledStat and the Sender's recording (see metrics.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__stats(void)
{
    for (int i = 0; i < STAT_COUNT; i++) {
        sender_stats_getset[i].name = stat_names[i];
    }
    if (PyType_Ready(&SampledStatType) < 0 || PyType_Ready(&SenderStatsType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "SampledStat", (PyObject *)&SampledStatType) < 0 ||
        PyModule_AddObjectRef(module, "SenderStats", (PyObject *)&SenderStatsType) < 0 ||
        PyModule_AddIntConstant(module, "MAX_SAMPLES", MAX_SAMPLES) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
