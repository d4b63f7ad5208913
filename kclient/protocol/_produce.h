/* kclient.protocol._produce's shared names (_produce.c: the request and the module;
 * _produce_answer.c: the answer). */
#ifndef KCLIENT_PRODUCE_H
#define KCLIENT_PRODUCE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define FIRST_FLEXIBLE 9
#define FIRST_VERSION 3
#define BY_ID 13 /* v13 names topics by id (KIP-516) */

/* produce_fast.py's decode_produce (bind()), for arguments of other types; NULL until then */
extern PyObject *py_decode;
/* produce_fast.py's topic_id(bytes) -> uuid.UUID and _IDS, the ids it made by their bytes
 * (bind()); NULL until then */
extern PyObject *py_topic_id, *topic_ids;
/* the answer's keys, interned by the module's init */
extern PyObject *str_name, *str_topic_id, *str_index, *str_responses, *str_partition_responses,
    *str_throttle_time_ms, *str_error_code, *str_base_offset, *str_log_append_time_ms,
    *str_log_start_offset, *str_record_errors, *str_error_message;

/* decode_produce(api_version, frame) -> (correlation_id, body) | None */
PyObject *kclient_decode_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames);

#endif
