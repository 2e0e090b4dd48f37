/* Part of every compiled engine of soak.load and soak.load.replay: the Python type and
 * the module around an Engine, written once. Each engine names only what differs: its
 * struct, its type's name and doc, its constructor, destructor and method table, and its
 * module's name, doc and functions. Guarded: _fastdoh.c includes _fastudp.c whole, so
 * the DoH engines reach this header twice. */
#ifndef SOAK_FASTFACE_H
#define SOAK_FASTFACE_H

#include <Python.h> /* already included first by every engine: here for the reader */

/* A static type for an engine: `self` its struct, Python-visible as `name`. */
#define ENGINE_TYPE(name, self, doc, new_fn, dealloc_fn, methods)                             \
    {                                                                                         \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = (name), .tp_basicsize = sizeof(self),        \
        .tp_flags = Py_TPFLAGS_DEFAULT, .tp_doc = (doc), .tp_new = (new_fn),                  \
        .tp_dealloc = (destructor)(dealloc_fn), .tp_methods = (methods),                      \
    }

/* A single-phase module `name` with the module-level `functions` (NULL: none). */
#define ENGINE_MODULE(name, doc, functions)                                                   \
    { PyModuleDef_HEAD_INIT, (name), (doc), -1, (functions), NULL, NULL, NULL, NULL }

/* The module `def` with `type` as its Engine: what each engine's PyInit returns. */
static PyObject *module_with_engine(struct PyModuleDef *def, PyTypeObject *type) {
    if (PyType_Ready(type) < 0) return NULL;
    PyObject *m = PyModule_Create(def);
    if (m == NULL) return NULL;
    Py_INCREF(type);
    if (PyModule_AddObject(m, "Engine", (PyObject *)type) < 0) {
        Py_DECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

#endif
