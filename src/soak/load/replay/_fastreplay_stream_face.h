/* Part of soak.load.replay._fastreplay_stream (see the top of _fastreplay_stream.c): the
 * Python face, the type and the module. Included once, last. */

#define REPLAY_E(r) (&(r)->e)
#define REPLAY_LATE(r) ((r)->late)

/* writes() -> the SSL_write or send calls that took bytes so far: how many queries each
 * write carries is what the step's batching (flush_step) is for. */
static PyObject *Replay_writes(Replay *r, PyObject *Py_UNUSED(arg)) {
    return PyLong_FromLongLong(r->writes);
}

/* held() -> (pool entries, connections open, bytes): the bytes the pool's entries hold
 * in their buffers (write, its ends, read, in flight) and flights, open or free: what
 * release gives back (a closed connection holds none). */
static PyObject *Replay_held(Replay *r, PyObject *Py_UNUSED(arg)) {
    long long bytes = 0;
    for (int i = 0; i < r->npool; i++) {
        const Conn *c = &r->pool[i];
        bytes += (long long)(c->wcap + c->ecap * sizeof(size_t) + c->rcap +
                             c->icap * sizeof(long long));
        bytes += (long long)(r->flight[i].cap * 2 * sizeof(long long));
    }
    return Py_BuildValue("(iLL)", r->npool, r->open_fds, bytes);
}

#define REPLAY_MORE_METHODS \
    {"writes", (PyCFunction)Replay_writes, METH_NOARGS, "writes() -> writes so far"}, \
    {"held", (PyCFunction)Replay_held, METH_NOARGS, "held() -> (entries, open, bytes)"},
#include "_fastreplay_stream_common.h"

/* conns() -> (opened, errors, tls_resumed, reused, idled_out, open now, {handshake us:
 * n}): the connections' figures so far (ClientConns.counts), the handshake times since
 * the last call (handed over, emptied here). */
static PyObject *Replay_conns(Replay *r, PyObject *Py_UNUSED(arg)) {
    PyObject *hs = PyDict_New();
    if (hs == NULL) return NULL;
    PyObject *taken = r->k.handshake_us;
    r->k.handshake_us = hs;
    return Py_BuildValue("(LLLLLLN)", r->k.opened, r->k.errors, r->k.resumed, r->reused,
                         r->idled_out, r->open_fds, taken);
}

static void shut(Replay *r) {
    for (int i = 0; i < r->npool; i++)
        if (r->owner[i] >= 0) release(r, i);
}

static PyObject *Replay_shut(Replay *r, PyObject *Py_UNUSED(arg)) {
    shut(r);
    Py_RETURN_NONE;
}

static void Replay_dealloc(Replay *r) {
    if (r->owner != NULL) shut(r);
    for (int i = 0; i < r->npool; i++) {
        conn_free(&r->pool[i]);
        PyMem_Free(r->flight[i].v);
    }
    PyMem_Free(r->pool), PyMem_Free(r->flight), PyMem_Free(r->owner);
    PyMem_Free(r->retiring), PyMem_Free(r->stepped), PyMem_Free(r->free_list);
    PyMem_Free(r->qstream), PyMem_Free(r->cur), PyMem_Free(r->cfirst), PyMem_Free(r->cstreams);
    PyMem_Free(r->cloop), PyMem_Free(r->csent), PyMem_Free(r->ccomp);
    if (r->ctx) SSL_CTX_free(r->ctx);
    PyMem_Free(r->server_name);
    Py_XDECREF(r->k.handshake_us);
    for (int w = 0; w < NW; w++) Py_CLEAR(r->woff[w]);
    engine_clear(&r->e);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* TLS as the Python replay's (conn.tls_context), through _fastconn.h's one context:
 * verify against ca_file (and the name) or not at all, no ALPN, no tickets asked for
 * (sessions are not resumed). 0, or -1 with an OSError set. */
static int make_ctx(Replay *r, const char *ca_file) {
    r->ctx = fastconn_ctx(ca_file, NULL, 0, 0);
    return r->ctx == NULL ? -1 : 0;
}

/* Engine(address, tls, clients, classes, timeout_ns, idle_ns, rename_clients, qstream,
 *        stream_client, engine_args)
 * address: a packed sockaddr (_engine.sockaddr); tls: None for TCP, else (server_name or
 * None, ca_file or None); qstream, stream_client: int32s (soak.load.replay._stream);
 * engine_args: _fastengine's engine_setup arguments from its questions on. */
static PyObject *Replay_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kw)) {
    Py_buffer addr, qstream, sclient;
    PyObject *tls, *eargs;
    int nclients, nc, rename, whole = 0;
    long long timeout_ns, idle_ns;
    const char *server_name = NULL, *ca_file = NULL;
    EngineArgs ea;
    if (!PyArg_ParseTuple(args, "y*OiiLLpy*y*O!", &addr, &tls, &nclients, &nc, &timeout_ns,
                          &idle_ns, &rename, &qstream, &sclient, &PyTuple_Type, &eargs))
        return NULL;
    Replay *r = NULL;
    if (engine_args(eargs, &ea) < 0) goto done;
    if (tls != Py_None && !PyArg_ParseTuple(tls, "zz", &server_name, &ca_file)) goto done;
    if (addr.len > (Py_ssize_t)sizeof(struct sockaddr_storage) || nclients < 1 || nc < 1) {
        PyErr_SetString(PyExc_ValueError, "Engine: bad address, clients or classes");
        goto done;
    }
    r = (Replay *)type->tp_alloc(type, 0);
    if (r == NULL) goto done;
    r->e.epfd = -1;
    memcpy(&r->addr, addr.buf, (size_t)addr.len);
    r->alen = (socklen_t)addr.len;
    r->k.handshake_us = PyDict_New();
    if (r->k.handshake_us == NULL ||
        replay_setup(r, nclients, nc, rename, idle_ns, timeout_ns, &qstream, &sclient, &ea) < 0)
        goto done;
    if (server_name != NULL) {
        r->server_name = PyMem_Malloc(strlen(server_name) + 1);
        if (r->server_name == NULL) { PyErr_NoMemory(); goto done; }
        strcpy(r->server_name, server_name);
    }
    whole = tls == Py_None || make_ctx(r, ca_file) == 0;
done:
    return replay_made(r, whole, &addr, &qstream, &sclient);
}

static PyTypeObject ReplayType =
    ENGINE_TYPE("soak.load.replay._fastreplay_stream.Engine", Replay,
                "The replay's TCP and DoT loop (a connection per client's stream, OpenSSL).",
                Replay_new, Replay_dealloc, Replay_methods);

static struct PyModuleDef module = ENGINE_MODULE("soak.load.replay._fastreplay_stream",
                                                 "The replay's compiled TCP and DoT loop.", NULL);

PyMODINIT_FUNC PyInit__fastreplay_stream(void) { return module_with_engine(&module, &ReplayType); }
