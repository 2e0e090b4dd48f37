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

/* h2() -> (streams reset, of them refused, of those sent again, GOAWAY frames) so far:
 * what the server's HTTP/2 layer said (_fastdoh_defs.h). */
static PyObject *Replay_h2(Replay *r, PyObject *Py_UNUSED(arg)) {
    return Py_BuildValue("(LLLL)", r->d.streams_reset, r->d.streams_refused, r->d.streams_retried,
                         r->d.goaways);
}

/* held() -> (pool entries, connections open, bytes): the bytes the pool's entries hold
 * in their write buffers and their requests (each open stream and its answer's body),
 * open or free: what a close gives back (conn_close; a closed connection holds none),
 * as _fastreplay_stream's held(). */
static PyObject *Replay_held(Replay *r, PyObject *Py_UNUSED(arg)) {
    long long bytes = 0;
    for (int i = 0; i < r->npool; i++) {
        const Conn *c = r->pool[i];
        if (c == NULL) continue;
        bytes += (long long)c->wcap;
        for (const Stream *s = c->streams; s; s = s->next)
            bytes += (long long)(sizeof *s + s->body_cap);
    }
    return Py_BuildValue("(iLL)", r->npool, r->open_fds, bytes);
}

#define REPLAY_MORE_METHODS \
    {"writes", (PyCFunction)Replay_writes, METH_NOARGS, "writes() -> SSL writes so far"}, \
    {"h2", (PyCFunction)Replay_h2, METH_NOARGS, "h2() -> (streams reset, refused, retried, goaways)"}, \
    {"held", (PyCFunction)Replay_held, METH_NOARGS, "held() -> (entries, open, bytes)"},
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

/* Per stream its client (a stream's answers are its client's): stream_client as laid
 * out (layout checked each is in range). 0, or -1 with MemoryError set. */
static int keep_clients(Replay *r, Py_buffer *sclient) {
    r->sclient = PyMem_Malloc(sizeof(int) * (r->nstreams ? r->nstreams : 1));
    if (r->sclient == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(r->sclient, sclient->buf, sizeof(int) * (size_t)r->nstreams);
    return 0;
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
    PyObject *eargs;
    int nclients, nc, rename, get, whole = 0;
    long long timeout_ns, idle_ns;
    const char *server_name = NULL, *ca_file = NULL, *path, *authority;
    EngineArgs ea;
    if (!PyArg_ParseTuple(args, "y*(zz)pssiiLLpy*y*O!", &addr, &server_name, &ca_file, &get,
                          &path, &authority, &nclients, &nc, &timeout_ns, &idle_ns, &rename,
                          &qstream, &sclient, &PyTuple_Type, &eargs))
        return NULL;
    Replay *r = NULL;
    if (engine_args(eargs, &ea) < 0) goto done;
    /* GET's :path is built in a buffer of 1,024 bytes (_fastdoh_h2.h: h2_submit) */
    if (addr.len > (Py_ssize_t)sizeof(struct sockaddr_storage) || nclients < 1 || nc < 1 ||
        strlen(path) > 512) {
        PyErr_SetString(PyExc_ValueError, "Engine: bad address, clients, classes or path");
        goto done;
    }
    r = (Replay *)type->tp_alloc(type, 0);
    if (r == NULL) goto done;
    r->d.e.epfd = -1;
    r->d.elsewhere = send_elsewhere;
    whole = replay_setup(r, nclients, nc, rename, idle_ns, timeout_ns, &qstream, &sclient, &ea) == 0 &&
            keep_clients(r, &sclient) == 0 &&
            doh_setup(&r->d, &addr, get, path, authority, server_name, ca_file) == 0;
done:
    return replay_made(r, whole, &addr, &qstream, &sclient);
}

static PyTypeObject ReplayType = ENGINE_TYPE(
    "soak.load.replay._fastreplay_doh.Engine", Replay,
    "The replay's DoH loop (a connection per client's stream, nghttp2, OpenSSL).", Replay_new,
    Replay_dealloc, Replay_methods);

static struct PyModuleDef replay_module = ENGINE_MODULE(
    "soak.load.replay._fastreplay_doh", "The replay's compiled DoH loop.", NULL);

PyMODINIT_FUNC PyInit__fastreplay_doh(void) { return module_with_engine(&replay_module, &ReplayType); }
