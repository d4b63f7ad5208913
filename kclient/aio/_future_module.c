/*
 * kclient.aio._future's AioSend (AIOKafkaProducer.send's common case without a Python
 * frame) and the module: its functions, types and the names it interns.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"
#include "../_fallback_method.h"
#include "../_pycall.h"
#include "../_slots.h"

/* ---- AioSend: AIOKafkaProducer.send without a Python frame -------------------------------- */

/* send = AioSend(general): a method descriptor. On the class it is `general` (the Python
 * send: signature, docstring). Called on a producer whose `_fast` is (producer, tracker,
 * run_now) —
 * started, its Sender on the loop, not stopped — it hands the record to the producer's
 * `_fast_send.send_open` (KafkaProducer.send's common case, _send.c) and returns
 * tracker(record); anything else (no `_fast`, no `_fast_send`,
 * send_open declining, an argument it does not know) calls `general` with the same
 * arguments. */
static PyObject *str_fast, *str_fast_send, *str_send_open;
static PyObject *send_kw_names[6]; /* topic value key partition timestamp_ms headers */

static PyObject *
aio_send_call(FallbackMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    /* producer, topic, value, key, partition, timestamp_ms, headers */
    PyObject *argv[7] = {NULL, NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (!fallback_bind(args, PyVectorcall_NARGS(nargsf), kwnames, send_kw_names, 6, 7, argv)) {
        goto general;
    }
    PyObject *fast = attr_get(argv[0], str_fast);
    if (fast == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(fast) || PyTuple_GET_SIZE(fast) != 3 ||
        Py_TYPE(PyTuple_GET_ITEM(fast, 1)) != &kaio_TrackerType) {
        Py_DECREF(fast);
        goto general;
    }
    PyObject *appender = attr_get(PyTuple_GET_ITEM(fast, 0), str_fast_send);
    if (appender == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    if (appender == Py_None) {
        Py_DECREF(appender);
        Py_DECREF(fast);
        goto general;
    }
    /* send_open(topic, value, key, partition, timestamp_ms, headers, callback) */
    PyObject *open_args[8] = {appender, argv[1], argv[2], argv[3], argv[4], argv[5], argv[6],
                              Py_None};
    PyObject *record = PyObject_VectorcallMethod(str_send_open, open_args, 8, NULL);
    Py_DECREF(appender);
    if (record == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    if (record == Py_None) {
        Py_DECREF(record);
        Py_DECREF(fast);
        goto general;
    }
    PyObject *ready = kaio_tracker_track(PyTuple_GET_ITEM(fast, 1), record, 1);
    Py_DECREF(record);
    Py_DECREF(fast);
    return ready;
general:
    return fallback_general(self, args, nargsf, kwnames);
}

static PyObject *
aio_send_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return fallback_new(type, args, kwds, (vectorcallfunc)aio_send_call, "O:AioSend");
}

static PyGetSetDef aio_send_getset[] = {FALLBACK_GETSET};

PyTypeObject kaio_AioSendType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.aio._future.AioSend",
    .tp_basicsize = sizeof(FallbackMethod),
    FALLBACK_SLOTS,
    .tp_getset = aio_send_getset,
    .tp_new = aio_send_new,
};

static PyMethodDef module_methods[] = {
    {"track", (PyCFunction)(void (*)(void))aio_track, METH_FASTCALL, NULL},
    {"settle_ok", (PyCFunction)(void (*)(void))aio_settle_ok, METH_FASTCALL, NULL},
    {"settle_error", (PyCFunction)(void (*)(void))aio_settle_error, METH_FASTCALL, NULL},
    {"settle_one", (PyCFunction)(void (*)(void))aio_settle_one, METH_FASTCALL, NULL},
    {"run_callbacks", (PyCFunction)(void (*)(void))aio_run_callbacks, METH_FASTCALL, NULL},
    {"dispatch", (PyCFunction)(void (*)(void))aio_dispatch, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef future_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.aio._future",
    .m_doc = "kclient.aio's record future and per-batch settle (see completions.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

static int
intern_all(void)
{
#define INTERN(var, text)                                                                      \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(kaio_str_call_soon, "call_soon");
    INTERN(kaio_str_call_exception_handler, "call_exception_handler");
    INTERN(kaio_str_context, "context");
    static const char *record_names[R_COUNT] = {"_produce_result", "_offset_delta",
                                                "_timestamp_ms", "_key_size", "_value_size"};
    for (int i = 0; i < R_COUNT; i++) {
        INTERN(kaio_record_names[i], record_names[i]);
    }
    static const char *result_names[P_COUNT] = {"done", "superseded", "record_errors", "error",
                                                "tp", "base_offset", "log_append_time_ms"};
    for (int i = 0; i < P_COUNT; i++) {
        INTERN(kaio_result_names[i], result_names[i]);
    }
    INTERN(str_fast, "_fast");
    INTERN(str_fast_send, "_fast_send");
    INTERN(str_send_open, "send_open");
    static const char *names[6] = {"topic", "value", "key", "partition", "timestamp_ms",
                                   "headers"};
    for (int i = 0; i < 6; i++) {
        INTERN(send_kw_names[i], names[i]);
    }
#undef INTERN
    kaio_kwnames_context = PyTuple_Pack(1, kaio_str_context);
    return kaio_kwnames_context == NULL ? -1 : 0;
}

/* The __slots__ offsets of the fields read from records and results; -1 (getattr) for one
 * that is not a plain slot of the class (renamed, a property). */
static int
find_slots(void)
{
    if (!PyType_Check(kaio_RecordType) || !PyType_Check(kaio_ResultType)) {
        PyErr_SetString(PyExc_TypeError, "FutureRecordMetadata and ProduceResult must be types");
        return -1;
    }
    for (int i = 0; i < R_COUNT; i++) {
        kaio_record_slots[i] = slot_offset(kaio_RecordType, PyUnicode_AsUTF8(kaio_record_names[i]));
    }
    for (int i = 0; i < P_COUNT; i++) {
        kaio_result_slots[i] = slot_offset(kaio_ResultType, PyUnicode_AsUTF8(kaio_result_names[i]));
    }
    PyErr_Clear(); /* a field that is no slot: read with getattr */
    return 0;
}

PyMODINIT_FUNC
PyInit__future(void)
{
    if (PyType_Ready(&kaio_FutureType) < 0 || PyType_Ready(&kaio_ReadyType) < 0 ||
        PyType_Ready(&kaio_AioSendType) < 0) {
        return NULL;
    }
    if (kaio_CancelledError == NULL) {
        PyObject *asyncio = PyImport_ImportModule("asyncio");
        if (asyncio == NULL) {
            return NULL;
        }
        kaio_CancelledError = PyObject_GetAttrString(asyncio, "CancelledError");
        kaio_InvalidStateError = PyObject_GetAttrString(asyncio, "InvalidStateError");
        Py_DECREF(asyncio);
        PyObject *future = PyImport_ImportModule("kclient.sender.future");
        if (future == NULL) {
            return NULL;
        }
        kaio_RecordMetadataType = (PyTypeObject *)PyObject_GetAttrString(future, "RecordMetadata");
        kaio_RecordType = (PyTypeObject *)PyObject_GetAttrString(future, "FutureRecordMetadata");
        kaio_ResultType = (PyTypeObject *)PyObject_GetAttrString(future, "ProduceResult");
        Py_DECREF(future);
        if (kaio_CancelledError == NULL || kaio_InvalidStateError == NULL || kaio_RecordMetadataType == NULL ||
            kaio_RecordType == NULL || kaio_ResultType == NULL || intern_all() < 0 ||
            kaio_watch_init() < 0 || kaio_driver_init() < 0 || kaio_send_wait_init() < 0 ||
            find_slots() < 0) {
            return NULL;
        }
        if (!PyType_Check(kaio_RecordMetadataType) ||
            !PyType_IsSubtype(kaio_RecordMetadataType, &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "RecordMetadata must be a tuple type");
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&future_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "RecordFuture", (PyObject *)&kaio_FutureType) < 0 ||
        PyModule_AddObjectRef(module, "Ready", (PyObject *)&kaio_ReadyType) < 0 ||
        PyModule_AddObjectRef(module, "AioSend", (PyObject *)&kaio_AioSendType) < 0 ||
        PyModule_AddObjectRef(module, "BatchWatch", (PyObject *)&kaio_WatchType) < 0 ||
        PyModule_AddObjectRef(module, "Tracker", (PyObject *)&kaio_TrackerType) < 0 ||
        PyModule_AddObjectRef(module, "LoopDriver", (PyObject *)&kaio_DriverType) < 0 ||
        PyModule_AddObjectRef(module, "AioSendAndWait", (PyObject *)&kaio_SendAndWaitType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
