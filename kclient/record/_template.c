/*
 * SlotTemplate (kclient.record._speedups): new instances of a __slots__ class copied from a
 * template instance its own __init__ made, without running __init__ again. The accumulator
 * opens a batch per request at linger 0 (a builder, a ProducerBatch and its ProduceResult):
 * their __init__s are most of the Python it runs to open one.
 *
 * SlotTemplate(template, variable, fresh_lists=(), fresh_locks=()): every __slots__ member of
 * type(template) (its bases' too) is either named in `variable` (given to each call, in that
 * order), in `fresh_lists` (a new empty list each time) or `fresh_locks` (a new lock of the
 * template's kind: this module's Lock, else as threading.Lock()), or holds a value shared by every copy, which must be immutable (None, a
 * bool, int, float, str, bytes or tuple): anything else is a TypeError naming the member, so
 * a member added to the class later cannot end up shared by accident. A class whose instances
 * have a __dict__ is refused. Calling the template makes a copy: template(*values).
 *
 * Threads: the GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_template.h"
#include "_lock.h"
#include "_writer.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *type;
    Py_ssize_t n_shared, n_variable, n_lists, n_locks;
    Py_ssize_t *offsets;   /* shared, then variable, then lists, then locks */
    PyObject **shared;     /* the template's values of the shared members */
    PyObject *lock_new;    /* _thread.allocate_lock */
} SlotTemplate;

static int
template_traverse(SlotTemplate *self, visitproc visit, void *arg)
{
    Py_VISIT(self->type);
    Py_VISIT(self->lock_new);
    for (Py_ssize_t i = 0; i < self->n_shared; i++) {
        Py_VISIT(self->shared[i]);
    }
    return 0;
}

static int
template_clear(SlotTemplate *self)
{
    for (Py_ssize_t i = 0; i < self->n_shared; i++) {
        Py_CLEAR(self->shared[i]);
    }
    Py_CLEAR(self->type);
    Py_CLEAR(self->lock_new);
    return 0;
}

static void
template_dealloc(SlotTemplate *self)
{
    PyObject_GC_UnTrack(self);
    template_clear(self);
    PyMem_Free(self->shared);
    PyMem_Free(self->offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Where `name` is in `names` (a tuple of str), or -1. */
static Py_ssize_t
name_index(PyObject *names, const char *name)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        const char *candidate = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i));
        if (candidate != NULL && strcmp(candidate, name) == 0) {
            return i;
        }
    }
    return -1;
}

static int
is_immutable(PyObject *value)
{
    return value == Py_None || PyLong_Check(value) || PyFloat_Check(value) ||
           PyUnicode_Check(value) || PyBytes_Check(value) || PyTuple_Check(value);
}

/* Two passes over the members of the template's type and its bases: count each kind, then
 * note their offsets and the shared values. */
static int
template_init(SlotTemplate *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"template", "variable", "fresh_lists", "fresh_locks", NULL};
    PyObject *template, *variable, *lists = NULL, *locks = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!|O!O!:SlotTemplate", kwlist, &template,
                                     &PyTuple_Type, &variable, &PyTuple_Type, &lists,
                                     &PyTuple_Type, &locks)) {
        return -1;
    }
    if (self->type != NULL) {
        PyErr_SetString(PyExc_TypeError, "SlotTemplate is already initialised");
        return -1;
    }
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return -1;
    }
    lists = lists == NULL ? empty : lists;
    locks = locks == NULL ? empty : locks;
    int status = -1;
    PyTypeObject *type = Py_TYPE(template);
    if (type->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "SlotTemplate: %s instances have a __dict__",
                     type->tp_name);
        goto done;
    }
    PyObject *mro = type->tp_mro;
    Py_ssize_t total = 0;
    for (Py_ssize_t pass = 0; pass < 2; pass++) {
        Py_ssize_t n_shared = 0, n_variable = 0, n_lists = 0, n_locks = 0;
        Py_ssize_t named = PyTuple_GET_SIZE(variable) + PyTuple_GET_SIZE(lists) +
                           PyTuple_GET_SIZE(locks);
        for (Py_ssize_t m = 0; m < PyTuple_GET_SIZE(mro); m++) {
            PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, m);
            for (PyMemberDef *def = base->tp_members; def != NULL && def->name != NULL; def++) {
                if (def->type != T_OBJECT_EX || (def->flags & READONLY)) {
                    continue; /* not a __slots__ member (e.g. __weakref__'s offset) */
                }
                Py_ssize_t at;
                Py_ssize_t *slot_at;
                if ((at = name_index(variable, def->name)) >= 0) {
                    n_variable++;
                    slot_at = pass ? &self->offsets[self->n_shared + at] : NULL;
                }
                else if ((at = name_index(lists, def->name)) >= 0) {
                    n_lists++;
                    slot_at = pass ? &self->offsets[self->n_shared + self->n_variable + at]
                                   : NULL;
                }
                else if ((at = name_index(locks, def->name)) >= 0) {
                    n_locks++;
                    slot_at = pass ? &self->offsets[self->n_shared + self->n_variable +
                                                    self->n_lists + at]
                                   : NULL;
                }
                else {
                    PyObject *value = *(PyObject **)((char *)template + def->offset);
                    if (value == NULL || !is_immutable(value)) {
                        PyErr_Format(PyExc_TypeError,
                                     "SlotTemplate: %s.%s holds %s, which copies cannot "
                                     "share: name it as variable, a fresh list or a fresh lock",
                                     type->tp_name, def->name,
                                     value == NULL ? "nothing" : Py_TYPE(value)->tp_name);
                        goto done;
                    }
                    if (pass) {
                        self->offsets[n_shared] = def->offset;
                        self->shared[n_shared] = Py_NewRef(value);
                    }
                    n_shared++;
                    continue;
                }
                if (slot_at != NULL) {
                    *slot_at = def->offset;
                }
            }
        }
        if (PyErr_Occurred()) {
            goto done;
        }
        if (n_variable + n_lists + n_locks != named) {
            PyErr_Format(PyExc_TypeError,
                         "SlotTemplate: a name given is not a __slots__ member of %s (or is "
                         "given twice)",
                         type->tp_name);
            goto done;
        }
        if (!pass) {
            total = n_shared + named;
            self->offsets = PyMem_Calloc((size_t)(total ? total : 1), sizeof(Py_ssize_t));
            self->shared = PyMem_Calloc((size_t)(n_shared ? n_shared : 1), sizeof(PyObject *));
            if (self->offsets == NULL || self->shared == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            self->n_shared = n_shared;
            self->n_variable = n_variable;
            self->n_lists = n_lists;
            self->n_locks = n_locks;
        }
    }
    if (self->n_locks) {
        /* the fresh locks are of the template's kind: this module's Lock, or threading.Lock */
        PyObject *first = *(PyObject **)((char *)template +
                                         self->offsets[self->n_shared + self->n_variable +
                                                       self->n_lists]);
        if (first != NULL && Py_TYPE(first) == &kclient_LockType) {
            self->lock_new = Py_NewRef((PyObject *)&kclient_LockType);
        }
    }
    if (self->n_locks && self->lock_new == NULL) {
        PyObject *thread = PyImport_ImportModule("_thread");
        if (thread == NULL) {
            goto done;
        }
        self->lock_new = PyObject_GetAttrString(thread, "allocate_lock");
        Py_DECREF(thread);
        if (self->lock_new == NULL) {
            goto done;
        }
    }
    self->type = (PyTypeObject *)Py_NewRef(type);
    status = 0;
done:
    Py_DECREF(empty);
    return status;
}

/* template(*values) -> a new instance (see the module comment). */
static PyObject *
template_call(SlotTemplate *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->type == NULL) {
        PyErr_SetString(PyExc_TypeError, "SlotTemplate was not initialised");
        return NULL;
    }
    if (kwnames != NULL || nargs != self->n_variable) {
        PyErr_Format(PyExc_TypeError, "a %s copy takes %zd positional arguments (%zd given)",
                     self->type->tp_name, self->n_variable, nargs);
        return NULL;
    }
    PyObject *obj = self->type->tp_alloc(self->type, 0);
    if (obj == NULL) {
        return NULL;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < self->n_shared; i++, k++) {
        *(PyObject **)((char *)obj + self->offsets[k]) = Py_NewRef(self->shared[i]);
    }
    for (Py_ssize_t i = 0; i < self->n_variable; i++, k++) {
        *(PyObject **)((char *)obj + self->offsets[k]) = Py_NewRef(args[i]);
    }
    for (Py_ssize_t i = 0; i < self->n_lists + self->n_locks; i++, k++) {
        PyObject *fresh = i < self->n_lists                                 ? PyList_New(0)
                          : self->lock_new == (PyObject *)&kclient_LockType ? kclient_lock_create()
                                                                             : PyObject_CallNoArgs(self->lock_new);
        if (fresh == NULL) {
            Py_DECREF(obj); /* the slots set so far are released with it */
            return NULL;
        }
        *(PyObject **)((char *)obj + self->offsets[k]) = fresh;
    }
    return obj;
}

static PyObject *
template_vectorcall_entry(PyObject *self, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames)
{
    return template_call((SlotTemplate *)self, args, nargsf, kwnames);
}

static PyObject *
template_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    SlotTemplate *self = (SlotTemplate *)PyType_GenericNew(type, args, kwds);
    if (self != NULL) {
        self->vectorcall = template_vectorcall_entry;
    }
    return (PyObject *)self;
}

PyTypeObject kclient_SlotTemplateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kclient.record._speedups.SlotTemplate",
    .tp_basicsize = sizeof(SlotTemplate),
    .tp_dealloc = (destructor)template_dealloc,
    .tp_vectorcall_offset = offsetof(SlotTemplate, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "SlotTemplate(template, variable, fresh_lists=(), fresh_locks=()): copies of a "
              "__slots__ instance without __init__; template(*variable_values).",
    .tp_traverse = (traverseproc)template_traverse,
    .tp_clear = (inquiry)template_clear,
    .tp_init = (initproc)template_init,
    .tp_new = template_new,
};

/* ---- a new batch from three templates (kclient/sender/batch_maker.py) -------------------- */

/* copy_batch(builders, results, batches, tp, size, created_ms, batch_id): batch_maker's
 * copy without its Python frame. builders() is a new record builder, started for size
 * bytes (builder._start(size)); results(tp) its ProduceResult; batches(tp, builder,
 * builder.append, result, created_ms, size, batch_id, (batch_id,)) the ProducerBatch. */
PyObject *
kclient_copy_batch(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    static PyObject *str_start, *str_append;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "copy_batch(builders, results, batches, tp, size, created_ms, batch_id)");
        return NULL;
    }
    if (str_start == NULL) {
        str_start = PyUnicode_InternFromString("_start");
        str_append = PyUnicode_InternFromString("append");
        if (str_start == NULL || str_append == NULL) {
            return NULL;
        }
    }
    PyObject *tp = args[3], *size = args[4], *created_ms = args[5], *batch_id = args[6];
    PyObject *builder = PyObject_CallNoArgs(args[0]);
    if (builder == NULL) {
        return NULL;
    }
    PyObject *batch = NULL, *append = NULL, *result = NULL, *order = NULL;
    /* builder._start(size) and builder.append: the C writer's own, without looking them up,
     * while the builder's type has them from RecordsWriter (checked again when it changes) */
    static PyTypeObject *plain_type;
    static unsigned int plain_version;
    static PyObject *append_descr; /* RecordsWriter's "append" method descriptor */
    PyTypeObject *type = Py_TYPE(builder);
    if (type != plain_type || type->tp_version_tag != plain_version || plain_version == 0) {
        plain_type = NULL;
        PyObject *writer_dict = kclient_RecordsWriterType.tp_dict;
        PyObject *start = _PyType_Lookup(type, str_start);
        PyObject *append_found = _PyType_Lookup(type, str_append);
        if (PyType_IsSubtype(type, &kclient_RecordsWriterType) && start != NULL &&
            start == PyDict_GetItemWithError(writer_dict, str_start) && append_found != NULL &&
            append_found == PyDict_GetItemWithError(writer_dict, str_append) &&
            Py_TYPE(append_found)->tp_descr_get != NULL &&
            PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
            plain_type = type;
            plain_version = type->tp_version_tag;
            Py_XSETREF(append_descr, Py_NewRef(append_found));
        }
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    if (plain_type != NULL) {
        PyObject *started = kclient_writer_start((RecordsWriter *)builder, size);
        if (started == NULL) {
            goto done;
        }
        Py_DECREF(started);
        append = Py_TYPE(append_descr)->tp_descr_get(append_descr, builder, (PyObject *)type);
    }
    else {
        PyObject *started = PyObject_CallMethodOneArg(builder, str_start, size);
        if (started == NULL) {
            goto done;
        }
        Py_DECREF(started);
        append = PyObject_GetAttr(builder, str_append);
    }
    result = append == NULL ? NULL : PyObject_CallOneArg(args[1], tp);
    order = result == NULL ? NULL : PyTuple_Pack(1, batch_id);
    if (order != NULL) {
        PyObject *values[8] = {tp, builder, append, result, created_ms, size, batch_id, order};
        batch = PyObject_Vectorcall(args[2], values, 8, NULL);
    }
done:
    Py_XDECREF(order);
    Py_XDECREF(result);
    Py_XDECREF(append);
    Py_DECREF(builder);
    return batch;
}
