/* Shared declarations of kclient.sender._step (_step.c: send_data and the module;
 * _step_request.c: the one-batch ProduceRequest and configure). */
#ifndef KCLIENT_STEP_H
#define KCLIENT_STEP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_pycall.h"
#include "../_slots.h"

/* What configure() was given beyond the request's parts: the exact types whose objects the
 * step reads the fast way (anything else, e.g. a subclass or a test double, is read and
 * called by name), and the ProducerBatch __slots__ offsets it reads. */
typedef struct {
    PyTypeObject *sender, *accumulator, *batch;
    Py_ssize_t b_tp, b_created_ms, b_records, b_builder, b_uncompressed_bytes;
    int ready;
} StepConfig;

extern StepConfig kstep_cfg;

/* A ProducerBatch member: read at its slot offset for exactly ProducerBatch, else by name.
 * A new reference, or NULL with the exception. */
static inline PyObject *
kstep_batch_attr(PyObject *batch, Py_ssize_t offset, PyObject *name)
{
    if (kstep_cfg.ready && Py_TYPE(batch) == kstep_cfg.batch) {
        PyObject *value = SLOT(batch, offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(batch, name);
}

/* _step_request.c */
int kstep_request_init(void);
PyObject *kstep_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* One request per node of batches ({node id: [batch, ...]}), as the Sender sends them;
 * client is sender._client. */
int kstep_send_requests(PyObject *sender, PyObject *client, PyObject *batches, PyObject *now);

/* _step_run.c: RunOnceMethod and PollNetworkMethod added to the module; 0 or -1. */
int kstep_run_init(PyObject *module);

#endif
