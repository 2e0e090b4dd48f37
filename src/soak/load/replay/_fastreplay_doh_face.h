/* Part of soak.load.replay._fastreplay_doh (see the top of _fastreplay_doh.c): the
 * Python face, the type and the module (_fastreplay_stream's methods and figures).
 * Included once, last. */

#define REPLAY_E(r) (&(r)->d.e)
#define REPLAY_LATE(r) ((r)->d.late)

/* writes() -> the SSL_write calls that took bytes so far: how many requests each write
 * carries is what the step's batching (flush_step) is for. */
static PyObject *Replay_writes(Replay *r, PyObject *Py_UNUSED(arg)) {
    return PyLong_FromLongLong(r->d.writes);
}

#define REPLAY_MORE_METHODS \
    {"writes", (PyCFunction)Replay_writes, METH_NOARGS, "writes() -> SSL writes so far"},
#include "_fastreplay_stream_common.h"

/* conns() -> (opened, errors, tls_resumed, reused, idled_out, open now, {handshake us:
 * n}): the connections' figures so far (ClientConns.counts), the handshake times since
 * the last call (handed over, emptied here). */
static PyObject *Replay_conns(Replay *r, PyObject *Py_UNUSED(arg)) {
    PyObject *hs = PyDict_New();
    if (hs == NULL) return NULL;
    PyObject *taken = r->d.handshake_us;
    r->d.handshake_us = hs;
    return Py_BuildValue("(LLLLLLN)", r->d.opened, r->d.errors, r->d.resumed, r->reused,
                         r->idled_out, r->open_fds, taken);
}

static void shut(Replay *r) {
    for (int i = 0; i < r->npool; i++) release(r, i);
}

static PyObject *Replay_shut(Replay *r, PyObject *Py_UNUSED(arg)) {
    shut(r);
    Py_RETURN_NONE;
}

static void Replay_dealloc(Replay *r) {
    if (r->owner != NULL) shut(r);
    for (int i = 0; i < r->npool; i++)
        if (r->pool[i]) conn_free(r->pool[i]);
    PyMem_Free(r->pool), PyMem_Free(r->owner);
    PyMem_Free(r->retiring), PyMem_Free(r->stepped), PyMem_Free(r->free_list);
    PyMem_Free(r->qstream), PyMem_Free(r->cur), PyMem_Free(r->sclient);
    PyMem_Free(r->cfirst), PyMem_Free(r->cstreams);
    PyMem_Free(r->cloop), PyMem_Free(r->csent), PyMem_Free(r->ccomp);
    DohEngine *d = &r->d;
    if (d->ctx) SSL_CTX_free(d->ctx);
    if (d->cbs) nghttp2_session_callbacks_del(d->cbs);
    PyMem_Free(d->path), PyMem_Free(d->authority), PyMem_Free(d->server_name);
    Py_XDECREF(d->handshake_us);
    for (int w = 0; w < NW; w++) Py_CLEAR(r->woff[w]);
    engine_clear(&d->e);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* The streams' layout: per captured query its stream (int32s), per stream its client;
 * each client's streams listed (cfirst, cstreams). 0, or -1 with an exception set. */
static int layout(Replay *r, Py_buffer *qstream, Py_buffer *sclient) {
    Py_ssize_t nq = qstream->len / 4, ns = sclient->len / 4;
    const int *qs = qstream->buf, *sc = sclient->buf;
    r->nstreams = (int)ns;
    r->qstream = PyMem_Malloc(sizeof(int) * (nq ? nq : 1));
    r->cur = PyMem_Malloc(sizeof(int) * (ns ? ns : 1));
    r->sclient = PyMem_Malloc(sizeof(int) * (ns ? ns : 1));
    r->cfirst = PyMem_Calloc((size_t)r->nclients + 1, sizeof(int));
    r->cstreams = PyMem_Malloc(sizeof(int) * (ns ? ns : 1));
    if (!r->qstream || !r->cur || !r->sclient || !r->cfirst || !r->cstreams) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < nq; j++) {
        if (qs[j] < 0 || qs[j] >= ns) goto bad;
        r->qstream[j] = qs[j];
    }
    for (Py_ssize_t s = 0; s < ns; s++) {
        if (sc[s] < 0 || sc[s] >= r->nclients) goto bad;
        r->cur[s] = -1;
        r->sclient[s] = sc[s];
        r->cfirst[sc[s] + 1]++;
    }
    for (int c = 0; c < r->nclients; c++) r->cfirst[c + 1] += r->cfirst[c];
    int *fill = PyMem_Calloc((size_t)r->nclients, sizeof(int));
    if (fill == NULL) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t s = 0; s < ns; s++) r->cstreams[r->cfirst[sc[s]] + fill[sc[s]]++] = (int)s;
    PyMem_Free(fill);
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "Engine: a stream or client out of range");
    return -1;
}

static char *copy_str(const char *s) {
    if (s == NULL) return NULL;
    char *out = PyMem_Malloc(strlen(s) + 1);
    if (out) strcpy(out, s);
    return out;
}

/* The DoH half: the address, the requests' method, path and :authority, TLS as the
 * Python replay's (conn.tls_context with ALPN h2, no tickets: sessions not resumed).
 * 0, or -1 with an exception set. */
static int doh_setup(DohEngine *d, Py_buffer *addr, int get, const char *path,
                     const char *authority, const char *server_name, const char *ca_file) {
    memcpy(&d->addr, addr->buf, (size_t)addr->len);
    d->addrlen = (socklen_t)addr->len;
    d->get = get, d->resume = 0;
    d->path = copy_str(path), d->authority = copy_str(authority);
    d->server_name = copy_str(server_name);
    d->handshake_us = PyDict_New();
    d->cbs = make_callbacks();
    if (!d->path || !d->authority || (server_name && !d->server_name) || !d->handshake_us ||
        !d->cbs) {
        PyErr_NoMemory();
        return -1;
    }
    static const unsigned char h2[] = "\x02h2";
    d->ctx = fastconn_ctx(ca_file, h2, 3, 0);
    return d->ctx == NULL ? -1 : 0;
}

/* Engine(address, (server_name or None, ca_file or None), get, path, authority, clients,
 *        classes, timeout_ns, idle_ns, rename_clients, qstream, stream_client, engine_args)
 * address: a packed sockaddr (_engine.sockaddr); qstream, stream_client: int32s
 * (soak.load.replay._stream); engine_args: _fastengine's engine_setup arguments from its
 * questions on. */
static PyObject *Replay_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kw)) {
    Py_buffer addr, qstream, sclient;
    PyObject *eargs, *questions, *randoms, *checks, *schedule, *pos;
    int nclients, nc, rename, nw, get;
    long long timeout_ns, idle_ns, max_outstanding, origin_ns;
    Py_ssize_t sched_i;
    const char *server_name = NULL, *ca_file = NULL, *path, *authority;
    if (!PyArg_ParseTuple(args, "y*(zz)pssiiLLpy*y*O!", &addr, &server_name, &ca_file, &get,
                          &path, &authority, &nclients, &nc, &timeout_ns, &idle_ns, &rename,
                          &qstream, &sclient, &PyTuple_Type, &eargs))
        return NULL;
    Replay *r = NULL;
    if (!PyArg_ParseTuple(eargs, "O!O!O!O!nO!LiL", &PyList_Type, &questions, &PyList_Type,
                          &randoms, &PyList_Type, &checks, &PyList_Type, &schedule, &sched_i,
                          &PyList_Type, &pos, &max_outstanding, &nw, &origin_ns))
        goto done;
    /* GET's :path is built in a buffer of 1,024 bytes (_fastdoh_h2.h: h2_submit) */
    if (addr.len > (Py_ssize_t)sizeof(struct sockaddr_storage) || nclients < 1 || nc < 1 ||
        strlen(path) > 512) {
        PyErr_SetString(PyExc_ValueError, "Engine: bad address, clients, classes or path");
        goto done;
    }
    r = (Replay *)type->tp_alloc(type, 0);
    if (r == NULL) goto done;
    r->d.e.epfd = -1;
    r->nclients = nclients, r->rename = rename, r->idle_ns = idle_ns;
    r->cloop = PyMem_Malloc(sizeof(long long) * nclients);
    r->csent = PyMem_Calloc((size_t)nclients, sizeof(long long));
    r->ccomp = PyMem_Calloc((size_t)nclients, sizeof(long long));
    if (!r->cloop || !r->csent || !r->ccomp) { PyErr_NoMemory(); goto bad; }
    for (int c = 0; c < nclients; c++) r->cloop[c] = -1;
    if (layout(r, &qstream, &sclient) < 0 ||
        engine_setup(&r->d.e, questions, randoms, checks, schedule, sched_i, pos, timeout_ns,
                     max_outstanding, nw, origin_ns) < 0)
        goto bad;
    if (r->d.e.nc != nc) {
        PyErr_SetString(PyExc_ValueError, "Engine: classes and engine_args disagree");
        goto bad;
    }
    if (doh_setup(&r->d, &addr, get, path, authority, server_name, ca_file) < 0) goto bad;
    r->d.e.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->d.e.epfd < 0) { PyErr_SetFromErrno(PyExc_OSError); goto bad; }
    goto done;
bad:
    Py_CLEAR(r);
done:
    PyBuffer_Release(&addr);
    PyBuffer_Release(&qstream);
    PyBuffer_Release(&sclient);
    return (PyObject *)r;
}

static PyTypeObject ReplayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "soak.load.replay._fastreplay_doh.Engine",
    .tp_basicsize = sizeof(Replay),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The replay's DoH loop (a connection per client's stream, nghttp2, OpenSSL).",
    .tp_new = Replay_new,
    .tp_dealloc = (destructor)Replay_dealloc,
    .tp_methods = Replay_methods,
};

static struct PyModuleDef replay_module = {
    PyModuleDef_HEAD_INIT, "soak.load.replay._fastreplay_doh",
    "The replay's compiled DoH loop.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastreplay_doh(void) { return module_with_engine(&replay_module, &ReplayType); }
