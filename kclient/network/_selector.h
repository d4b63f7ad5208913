/*
 * What _selector.c (KSelector's poll, send, is_channel_ready), _selector_util.c (the pieces
 * they share) and _loop_select.c (LoopSelector's select) share.
 */
#ifndef KCLIENT_NETWORK_SELECTOR_H
#define KCLIENT_NETWORK_SELECTOR_H

#include "_channel.h"
#include "../_pycall.h"

#define EVENT_READ 1
#define EVENT_WRITE 2
#define MAX_SELECT_TIMEOUT_MS 3600000LL

/* Interned attribute and method names, and constants (selector_intern). */
extern PyObject *s_closed, *s_immediately_connected, *s_early_failures, *s_sending, *s_completed_sends, *s_completed_receives, *s_connected, *s_disconnected, *s_early_sends, *s_release_before_select, *s_clear, *s_selector, *s_select, *s_clock, *s_monotonic_ms, *s_idle, *s_last_active_ms, *s_next_check_ms, *s_max_idle_ms, *s_maybe_close_idle, *s_channels, *s_data, *s_drain_wakeup, *s_node_id, *s_handle_events, *s_read, *s_write, *s_muted, *s_io_failed, *s_write_failed, *s_set_interest, *s_tls_wait, *s_events, *s_destination, *s_update, *s_timeout_ms, *s_timeout, *s_node_id_kw, *s_ready, *s_keys, *s_requested_timeout_ms, *s_returned_events, *s_append, *s_get, *s_on_ready;
extern PyObject *thousand, *zero, *one;

int selector_intern(void);
PyObject *bind_selector(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
int loop_select_add_to_module(PyObject *module);

/* Attributes of a PyKSelector, its IdleExpiryManager and a CKafkaChannel read and written
 * at their __slots__ (or C member) offsets, bound by bind_selector; by name for any other
 * object. */
enum {
    F_CLOSED, F_IMMEDIATELY_CONNECTED, F_EARLY_FAILURES, F_SENDING, F_COMPLETED_SENDS,
    F_COMPLETED_RECEIVES, F_CONNECTED, F_DISCONNECTED, F_EARLY_SENDS, F_RELEASE_BEFORE_SELECT,
    F_SELECTOR, F_CLOCK, F_IDLE, F_CHANNELS,
    F_IDLE_MAX_MS, F_IDLE_LAST_ACTIVE_MS, F_IDLE_NEXT_CHECK_MS,
    F_CH_NODE_ID, F_CH_CONNECTED, F_CH_MUTED, F_CH_TLS_WAIT, F_CH_EVENTS, F_CH_SEND,
    F_COUNT
};
extern PyObject *field_names[F_COUNT];
extern Py_ssize_t field_offsets[F_COUNT];
extern PyTypeObject *kselector_type, *idle_type, *channel_type;

static inline PyTypeObject *
field_owner(int field)
{
    return field >= F_CH_NODE_ID ? channel_type
                                 : (field >= F_IDLE_MAX_MS ? idle_type : kselector_type);
}

/* obj.<field>: a new reference, or NULL with an error set. */
static inline PyObject *
field_get(PyObject *obj, int field)
{
    PyTypeObject *owner = field_owner(field);
    if (owner != NULL && PyObject_TypeCheck(obj, owner)) {
        PyObject *value = *(PyObject **)((char *)obj + field_offsets[field]);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(obj, field_names[field]);
}

/* bool(obj.<field>): 1, 0, -1. */
static inline int
field_truth(PyObject *obj, int field)
{
    return take_truth(field_get(obj, field));
}

/* obj.<field> = value: 0 or -1. */
static inline int
field_set(PyObject *obj, int field, PyObject *value)
{
    PyTypeObject *owner = field_owner(field);
    if (owner != NULL && PyObject_TypeCheck(obj, owner)) {
        PyObject **slot = (PyObject **)((char *)obj + field_offsets[field]);
        PyObject *old = *slot;
        *slot = Py_NewRef(value);
        Py_XDECREF(old);
        return 0;
    }
    return PyObject_SetAttr(obj, field_names[field], value);
}

/* _selector_util.c: see there. */
PyObject *dict_get(PyObject *mapping, PyObject *key, PyObject **owned);
int is_current(PyObject *self, PyObject *node_id, PyObject *channel);
PyObject *now_ms(PyObject *self);
int idle_update(PyObject *self, PyObject *node_id, PyObject *now);
int maybe_close_idle(PyObject *self, PyObject *now);
int set_interest(PyObject *self, PyObject *channel);
int hand_over_error(PyObject *self, PyObject *method, PyObject *channel, PyObject *extra);
int handle_events(PyObject *self, PyObject *channel, PyObject *node_id, PyObject *mask_obj);

/* A method descriptor type over a Python function (_fallback_method.h), calls to `call`. */
#define FALLBACK_TYPE(var, cname, call, format)                                                 \
    static PyObject *var##_new(PyTypeObject *type, PyObject *args, PyObject *kwds)             \
    {                                                                                          \
        return fallback_new(type, args, kwds, (vectorcallfunc)call, format);                   \
    }                                                                                          \
    static PyGetSetDef var##_getset[] = {FALLBACK_GETSET};                                     \
    static PyTypeObject var = {                                                                \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kclient.network._channel." cname,            \
        .tp_basicsize = sizeof(FallbackMethod),                                                \
        FALLBACK_SLOTS,                                                                        \
        .tp_getset = var##_getset,                                                             \
        .tp_new = var##_new,                                                                   \
    };

#endif
