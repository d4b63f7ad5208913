/* Shared declarations of kclient.sender._step (_step.c: send_data and the module;
 * _step_request.c: the one-batch ProduceRequest and configure). */
#ifndef KCLIENT_STEP_H
#define KCLIENT_STEP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _step_request.c */
int kstep_request_init(void);
PyObject *kstep_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* One request per node of batches ({node id: [batch, ...]}), as the Sender sends them. */
int kstep_send_requests(PyObject *sender, PyObject *batches, PyObject *now);

#endif
