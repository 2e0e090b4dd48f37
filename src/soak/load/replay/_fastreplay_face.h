/* Part of soak.load.replay._fastreplay (see the top of _fastreplay.c): the Python face,
 * Engine's methods, the type and the module. Included once, by _fastreplay.c. */

#include "../_fastface.h" /* the type and the module's set-up */

/* Engine(address, nclients, nclasses, timeout_ns, idle_ns, rename_clients); address a
 * packed sockaddr (soak.load.replay._engine builds it). */
static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_buffer addr;
    int nclients, nc, rename;
    long long timeout_ns, idle_ns;
    (void)kw;
    if (!PyArg_ParseTuple(args, "y*iiLLp", &addr, &nclients, &nc, &timeout_ns, &idle_ns, &rename))
        return NULL;
    Engine *e = (Engine *)type->tp_alloc(type, 0);
    if (!e) {
        PyBuffer_Release(&addr);
        return NULL;
    }
    e->epfd = -1;
    if (addr.len > (Py_ssize_t)sizeof(e->addr) || nclients < 1 || nc < 1) {
        PyBuffer_Release(&addr);
        Py_DECREF(e);
        PyErr_SetString(PyExc_ValueError, "bad address, clients or classes");
        return NULL;
    }
    memcpy(&e->addr, addr.buf, (size_t)addr.len);
    e->addrlen = (socklen_t)addr.len;
    PyBuffer_Release(&addr);
    e->nclients = nclients;
    e->nc = nc;
    e->rename = rename;
    e->timeout_ns = timeout_ns;
    e->idle_ns = idle_ns;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->fd = PyMem_Malloc(sizeof(int) * nclients);
    e->ofd = PyMem_Malloc(sizeof(int) * nclients);
    e->ountil = PyMem_Calloc(nclients, sizeof(long long));
    e->cloop = PyMem_Malloc(sizeof(long long) * nclients);
    e->csent = PyMem_Calloc(nclients, sizeof(long long));
    e->clost = PyMem_Calloc(nclients, sizeof(long long));
    e->clast = PyMem_Calloc(nclients, sizeof(long long));
    e->cinfl = PyMem_Calloc(nclients, sizeof(long long));
    e->ocap = 4096;
    e->order = PyMem_Malloc(sizeof(long long) * 2 * e->ocap);
    e->cnt = PyMem_Calloc((size_t)NW * nc * NCOUNT, sizeof(long long));
    e->lat = PyMem_Calloc((size_t)NW * nc * NB, sizeof(unsigned int));
    e->off = PyMem_Calloc((size_t)NW * NOFF, sizeof(unsigned int));
    if (e->fd && e->ofd && e->cloop) /* before any return: shut() reads them */
        for (int k = 0; k < nclients; k++) e->fd[k] = -1, e->ofd[k] = -1, e->cloop[k] = -1;
    if (e->epfd < 0 || !e->fd || !e->ofd || !e->ountil || !e->cloop || !e->csent || !e->clost || !e->clast || !e->cinfl || !e->order || !e->cnt ||
        !e->lat || !e->off) {
        Py_DECREF(e);
        return PyErr_NoMemory();
    }
    for (int w = 0; w < NW; w++) e->wsec[w] = -1;
    for (int i = 0; i < RECV_BATCH; i++) {
        e->riov[i].iov_base = e->rbuf[i];
        e->riov[i].iov_len = RECV_BYTES;
        e->rmsgs[i].msg_hdr.msg_iov = &e->riov[i];
        e->rmsgs[i].msg_hdr.msg_iovlen = 1;
    }
    return (PyObject *)e;
}

static void shut(Engine *e) {
    if (e->fd && e->ofd && e->cloop)
        for (int k = 0; k < e->nclients; k++) close_client(e, k);
}

static void Engine_dealloc(Engine *e) {
    shut(e);
    if (e->epfd >= 0) close(e->epfd);
    for (int i = 0; i < RING; i++) Py_CLEAR(e->ring_q[i]);
    PyMem_Free(e->fd);
    PyMem_Free(e->ofd);
    PyMem_Free(e->ountil);
    PyMem_Free(e->cloop);
    PyMem_Free(e->csent);
    PyMem_Free(e->clost);
    PyMem_Free(e->clast);
    PyMem_Free(e->cinfl);
    PyMem_Free(e->order);
    PyMem_Free(e->cnt);
    PyMem_Free(e->lat);
    PyMem_Free(e->off);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyObject *play_failed(Engine *e) {
    return e->overflow ? overflowed() : (PyObject *)1;
}

#define PLAY_SELF Engine
#define PLAY_NAME Engine_play
#define PLAY_SEND(e, i, v, q, origin, now) send_one(e, v, q, origin, now)
#define PLAY_POLL(e, ns) (poll_once(e, ns), 0)
#define PLAY_HOUSEKEEPING(e) housekeeping(e)
#define PLAY_HANDLED(e) ((e)->handled)
#define PLAY_FAILED(e) play_failed(e)
#include "_fastreplay_play.h"

/* drain(until_ns) -> in flight: replies read and timeouts swept until nothing is in
 * flight or until_ns (monotonic). */
static PyObject *Engine_drain(Engine *e, PyObject *arg) {
    long long until = PyLong_AsLongLong(arg);
    if (until == -1 && PyErr_Occurred()) return NULL;
    for (;;) {
        long long now = mono_ns();
        if (e->inflight <= 0 || now >= until) break;
        long long wait = until - now;
        poll_once(e, wait > SWEEP_NS ? SWEEP_NS : wait);
        housekeeping(e);
        if (PyErr_CheckSignals() < 0) return NULL;
    }
    return PyLong_FromLongLong(e->inflight);
}

/* The send offsets of window w's queries: {µs (three digits): how many}. */
static PyObject *offsets_of(Engine *e, int w) {
    PyObject *out = PyDict_New();
    unsigned int *off = e->off + (size_t)w * NOFF;
    for (int b = 0; b < NOFF && out; b++)
        if (off[b]) {
            PyObject *key = PyLong_FromLongLong(off_value(b)), *val = PyLong_FromLong(off[b]);
            if (!key || !val || PyDict_SetItem(out, key, val) < 0) Py_CLEAR(out);
            Py_XDECREF(key), Py_XDECREF(val);
        }
    return out;
}

static PyObject *window_tuple(Engine *e, int w) {
    PyObject *classes = PyList_New(e->nc);
    if (!classes) return NULL;
    for (int c = 0; c < e->nc; c++) {
        long long *n = e->cnt + ((size_t)w * e->nc + c) * NCOUNT;
        unsigned int *lat = e->lat + ((size_t)w * e->nc + c) * NB;
        PyObject *rc = PyDict_New(), *lt = PyDict_New(), *item = NULL;
        int bad = !rc || !lt;
        for (int r = 0; r < 16 && !bad; r++)
            if (n[RC0 + r]) {
                PyObject *key = PyLong_FromLong(r), *val = PyLong_FromLongLong(n[RC0 + r]);
                bad = !key || !val || PyDict_SetItem(rc, key, val) < 0;
                Py_XDECREF(key), Py_XDECREF(val);
            }
        for (int k = 0; k < NB && !bad && n[COMPLETED]; k++)
            if (lat[k]) {
                PyObject *key = PyLong_FromLongLong(bucket_low(k)), *val = PyLong_FromLong(lat[k]);
                bad = !key || !val || PyDict_SetItem(lt, key, val) < 0;
                Py_XDECREF(key), Py_XDECREF(val);
            }
        if (!bad)
            item = Py_BuildValue("(LLLLLOO)", n[DUE], n[SENT], n[SKIPPED], n[COMPLETED], n[LOST],
                                 rc, lt);
        Py_XDECREF(rc), Py_XDECREF(lt);
        if (!item) {
            Py_DECREF(classes);
            return NULL;
        }
        PyList_SET_ITEM(classes, c, item);
    }
    PyObject *offsets = offsets_of(e, w);
    if (!offsets) {
        Py_DECREF(classes);
        return NULL;
    }
    PyObject *out = Py_BuildValue("(LNN)", e->wsec[w], classes, offsets);
    e->wsec[w] = -1;
    return out;
}

static int by_second(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* take(below, force) -> [(second, [(due, sent, skipped, completed, lost, rcodes, lat_us)
 * per class], {send offset µs: how many})]: the windows before `below` with nothing in flight, in order, up to the
 * first that is not (every open one with force: what is in flight stays uncounted). */
static PyObject *Engine_take(Engine *e, PyObject *args) {
    long long below;
    int force;
    if (!PyArg_ParseTuple(args, "Lp", &below, &force)) return NULL;
    long long open[NW];
    int n = 0;
    for (int w = 0; w < NW; w++)
        if (e->wsec[w] >= 0) open[n++] = e->wsec[w];
    qsort(open, (size_t)n, sizeof(long long), by_second);
    PyObject *out = PyList_New(0);
    for (int i = 0; i < n && out; i++) {
        int w = (int)(open[i] & (NW - 1));
        if (!force && (open[i] >= below || e->winfl[w] > 0)) break;
        PyObject *t = window_tuple(e, w);
        if (!t || PyList_Append(out, t) < 0) Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

/* stats() -> (sent per client, lost per client, unexpected, late, in flight, queries of
 * the last play() counted, client sockets open at once at most, sockets that could not
 * be opened, datagrams the sockets took, queries they refused, datagrams read) */
static PyObject *Engine_stats(Engine *e, PyObject *Py_UNUSED(arg)) {
    PyObject *sent = PyList_New(e->nclients), *lost = PyList_New(e->nclients);
    if (!sent || !lost) goto fail;
    for (int k = 0; k < e->nclients; k++) {
        PyObject *s = PyLong_FromLongLong(e->csent[k]), *l = PyLong_FromLongLong(e->clost[k]);
        if (!s || !l) goto fail;
        PyList_SET_ITEM(sent, k, s);
        PyList_SET_ITEM(lost, k, l);
    }
    return Py_BuildValue("(NNLLLnLLLLL)", sent, lost, e->unexpected, e->late, e->inflight,
                         e->handled, e->fds_peak, e->socket_errors, e->socket_sent,
                         e->send_failed, e->socket_received);
fail:
    Py_XDECREF(sent), Py_XDECREF(lost);
    return NULL;
}

static PyObject *Engine_shut(Engine *e, PyObject *Py_UNUSED(arg)) {
    shut(e);
    Py_RETURN_NONE;
}

static PyMethodDef Engine_methods[] = {
    {"play", (PyCFunction)Engine_play, METH_VARARGS,
     "play(columns, questions, origin_ns, base_ns, loop, first, end_ns, return_ns) -> (next, ended)"},
    {"drain", (PyCFunction)Engine_drain, METH_O, "drain(until_ns) -> queries in flight"},
    {"take", (PyCFunction)Engine_take, METH_VARARGS, "take(below, force) -> closed windows"},
    {"stats", (PyCFunction)Engine_stats, METH_NOARGS, "stats() -> per-client sent, lost, ..."},
    {"shut", (PyCFunction)Engine_shut, METH_NOARGS, "shut(): every client's socket closed"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EngineType =
    ENGINE_TYPE("soak.load.replay._fastreplay.Engine", Engine,
                "The replay's UDP send and reply loop.", Engine_new, Engine_dealloc,
                Engine_methods);

static struct PyModuleDef module =
    ENGINE_MODULE("soak.load.replay._fastreplay", "The replay's compiled UDP loop.", NULL);

PyMODINIT_FUNC PyInit__fastreplay(void) { return module_with_engine(&module, &EngineType); }
