/*
 * kclient.sender._speedups: the optional C accelerator of the sender's append path.
 *
 *   Lock                 a mutex with threading.Lock's API the Appender takes in C (_lock.c).
 *   Appender, SendCall   RecordAccumulator.append's and KafkaProducer.send's common case in
 *                        one call each (_append.c, _send.c).
 *   TopicQueuesFields, StickyFields, BatchFields, RecordFutureFields
 *                        the sender's data the Appender uses, C structs that its Python
 *                        classes subclass (_fields.c).
 *
 * The record layer's C (RecordsWriter, a batch's builder) comes from one capsule,
 * kclient.record._speedups._C_API (kclient/record/_capi.h), imported here; a version
 * mismatch fails this import with ImportError, and kclient runs its pure-Python code.
 *
 * Threads: the GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_append.h"
#include "_lock.h"

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kclient.sender._speedups",
    .m_doc = "C accelerator for kclient.sender: the accumulator's append and its data.",
    .m_size = -1,
};

/* Module init: the record layer's C API, the types readied and added, the names interned. */
PyMODINIT_FUNC
PyInit__speedups(void)
{
    static PyTypeObject *const types[] = {
        &kclient_LockType,
        &kclient_AppenderType,
        &kclient_SendCallType,
        &kclient_RecordFutureFieldsType,
        &kclient_TopicQueuesFieldsType,
        &kclient_StickyFieldsType,
        &kclient_BatchFieldsType,
    };
    const Py_ssize_t count = (Py_ssize_t)(sizeof(types) / sizeof(types[0]));
    const KclientRecordCAPI *record = kclient_record_capi();
    if (record == NULL || kclient_append_init(record) < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (PyType_Ready(types[i]) < 0) {
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *name = strrchr(types[i]->tp_name, '.') + 1; /* kclient.sender._speedups.X */
        if (PyModule_AddObjectRef(module, name, (PyObject *)types[i]) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
