/*
 * kclient.aio._future, the module: its functions, types and the names it interns.
 *
 * Threads: the event loop's, GIL held.
 */
#include "_future.h"

static PyMethodDef module_methods[] = {
    {"add_row", (PyCFunction)(void (*)(void))aio_add_row, METH_FASTCALL, NULL},
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
#undef INTERN
    kaio_kwnames_context = PyTuple_Pack(1, kaio_str_context);
    return kaio_kwnames_context == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__future(void)
{
    if (PyType_Ready(&kaio_FutureType) < 0 || PyType_Ready(&kaio_ReadyType) < 0) {
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
        Py_DECREF(future);
        if (kaio_CancelledError == NULL || kaio_InvalidStateError == NULL ||
            kaio_RecordMetadataType == NULL || intern_all() < 0) {
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
        PyModule_AddObjectRef(module, "Ready", (PyObject *)&kaio_ReadyType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
