/* Part of soak.load.replay's compiled stream loops (_fastreplay_stream.c and
 * _fastreplay_doh.c): the face both show, written once (play, drain, take, stats, and
 * what their constructors do alike: engine_args, layout, replay_setup, replay_made). The
 * face that includes it defines first, beside its Replay (with handled, woff, nclients,
 * csent, ccomp, ring_k, fds_peak), send_one, poll_once and housekeeping:
 *   REPLAY_E(r)     its Engine (the ring and windows)
 *   REPLAY_LATE(r)  the lvalue of its answers matched after their timeout */

static PyObject *play_failed(Replay *r) {
    if (PyList_GET_SIZE(REPLAY_E(r)->forced) == 0) return (PyObject *)1;
    PyErr_SetString(PyExc_RuntimeError, "a replay window stayed open longer than its ring holds");
    return NULL;
}

#define PLAY_SELF Replay
#define PLAY_NAME Replay_play
#define PLAY_SEND(r, i, v, q, origin, now) send_one(r, i, v, q, origin, now)
#define PLAY_POLL(r, ns) poll_once(r, ns)
#define PLAY_HOUSEKEEPING(r) housekeeping(r)
#define PLAY_HANDLED(r) ((r)->handled)
#define PLAY_FAILED(r) play_failed(r)
#include "_fastreplay_play.h"
#include "../_fastface.h" /* the type and module_with_engine */

/* drain(until_ns) -> in flight: replies read and timeouts swept until nothing is in
 * flight or until_ns (monotonic). */
static PyObject *Replay_drain(Replay *r, PyObject *arg) {
    long long until = PyLong_AsLongLong(arg);
    if (until == -1 && PyErr_Occurred()) return NULL;
    for (;;) {
        long long now = mono_ns();
        if (REPLAY_E(r)->outstanding <= 0 || now >= until) break;
        long long wait = until - now;
        if (poll_once(r, wait > SWEEP_NS ? SWEEP_NS : wait) < 0) return NULL;
        housekeeping(r);
        if (PyErr_CheckSignals() < 0) return NULL;
    }
    return PyLong_FromLongLong(REPLAY_E(r)->outstanding);
}

static int by_second(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* take(below, force) -> [((second, refused, [(sent, completed, lost, late, wrong,
 * skipped, abandoned, rcodes, lat_us) per class]), {offset us: n})] (the load engine's window_of,
 * and the window's send offsets): the windows before `below` with nothing in flight, in
 * order, up to the first that is not (every open one with force: what is in flight
 * stays uncounted). */
static PyObject *Replay_take(Replay *r, PyObject *args) {
    Engine *e = REPLAY_E(r);
    long long below, open[NW];
    int force, n = 0;
    if (!PyArg_ParseTuple(args, "Lp", &below, &force)) return NULL;
    for (int w = 0; w < e->nw; w++)
        if (e->wsec[w] >= 0) open[n++] = e->wsec[w];
    qsort(open, (size_t)n, sizeof(long long), by_second);
    PyObject *out = PyList_New(0);
    for (int j = 0; j < n && out; j++) {
        long long slot = open[j] & e->wmask;
        if (!force && (open[j] >= below || inflight(e, slot))) break;
        PyObject *w = window_of(e, (int)slot);
        PyObject *off = r->woff[slot] ? r->woff[slot] : PyDict_New();
        r->woff[slot] = NULL;
        PyObject *pair = NULL;
        if (w && off)
            pair = Py_BuildValue("(NN)", w, off); /* both taken, even on failure */
        else
            Py_XDECREF(w), Py_XDECREF(off);
        if (pair == NULL || PyList_Append(out, pair) < 0) Py_CLEAR(out);
        Py_XDECREF(pair);
        e->closed_below = open[j] + 1;
        if (e->cur_second == open[j]) e->cur_second = -1;
    }
    return out;
}

/* stats() -> _fastreplay's Engine.stats: (sent per client, lost per client, unexpected,
 * late, in flight, queries of the last play() counted, connections open at once at most,
 * 0 (no UDP sockets), queries the sockets took whole, queries they did not, replies read).
 * A client's lost: its sent, less its answered and its still in flight. */
static PyObject *Replay_stats(Replay *r, PyObject *Py_UNUSED(arg)) {
    long long *waits = PyMem_Calloc((size_t)r->nclients, sizeof(long long));
    PyObject *sent = PyList_New(r->nclients), *lost = PyList_New(r->nclients);
    if (!waits || !sent || !lost) goto fail;
    for (int s = 0; s < RING; s++)
        if (REPLAY_E(r)->ring_t[s] > 0) waits[r->ring_k[s]]++;
    for (int c = 0; c < r->nclients; c++) {
        PyObject *a = PyLong_FromLongLong(r->csent[c]);
        PyObject *b = PyLong_FromLongLong(r->csent[c] - r->ccomp[c] - waits[c]);
        if (!a || !b) { Py_XDECREF(a), Py_XDECREF(b); goto fail; }
        PyList_SET_ITEM(sent, c, a);
        PyList_SET_ITEM(lost, c, b);
    }
    PyMem_Free(waits);
    return Py_BuildValue("(NNLLLnLiLLL)", sent, lost, REPLAY_E(r)->unexpected, REPLAY_LATE(r), REPLAY_E(r)->outstanding,
                         r->handled, r->fds_peak, 0, REPLAY_E(r)->sock_sent, REPLAY_E(r)->send_failed,
                         REPLAY_E(r)->sock_received);
fail:
    PyMem_Free(waits);
    Py_XDECREF(sent), Py_XDECREF(lost);
    return NULL;
}

/* Each engine's face defines these after this header. */
static PyObject *Replay_conns(Replay *r, PyObject *arg);
static PyObject *Replay_shut(Replay *r, PyObject *arg);

/* The methods both stream replay engines show: _fastreplay's Engine's, and conns(). */
static PyMethodDef Replay_methods[] = {
    {"play", (PyCFunction)Replay_play, METH_VARARGS,
     "play(columns, questions, origin_ns, base_ns, loop, first, end_ns, return_ns)"},
    {"drain", (PyCFunction)Replay_drain, METH_O, "drain(until_ns) -> queries in flight"},
    {"take", (PyCFunction)Replay_take, METH_VARARGS, "take(below, force) -> closed windows"},
    {"stats", (PyCFunction)Replay_stats, METH_NOARGS, "stats() -> per-client sent, lost, ..."},
    {"conns", (PyCFunction)Replay_conns, METH_NOARGS, "conns() -> the connections' figures"},
    {"shut", (PyCFunction)Replay_shut, METH_NOARGS, "shut(): every connection closed"},
#ifdef REPLAY_MORE_METHODS
    REPLAY_MORE_METHODS /* an engine's own, defined before this is included */
#endif
    {NULL, NULL, 0, NULL},
};

/* The streams' layout: per captured query its stream (int32s), per stream its client;
 * each client's streams listed (cfirst, cstreams). 0, or -1 with an exception set. */
static int layout(Replay *r, Py_buffer *qstream, Py_buffer *sclient) {
    Py_ssize_t nq = qstream->len / 4, ns = sclient->len / 4;
    const int *qs = qstream->buf, *sc = sclient->buf;
    r->nstreams = (int)ns;
    r->qstream = PyMem_Malloc(sizeof(int) * (nq ? nq : 1));
    r->cur = PyMem_Malloc(sizeof(int) * (ns ? ns : 1));
    r->cfirst = PyMem_Calloc((size_t)r->nclients + 1, sizeof(int));
    r->cstreams = PyMem_Malloc(sizeof(int) * (ns ? ns : 1));
    if (!r->qstream || !r->cur || !r->cfirst || !r->cstreams) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t j = 0; j < nq; j++) {
        if (qs[j] < 0 || qs[j] >= ns) goto bad;
        r->qstream[j] = qs[j];
    }
    for (Py_ssize_t s = 0; s < ns; s++) {
        if (sc[s] < 0 || sc[s] >= r->nclients) goto bad;
        r->cur[s] = -1;
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

/* engine_args, as both constructors take it: _fastengine's engine_setup arguments from
 * its questions on. */
typedef struct {
    PyObject *questions, *randoms, *checks, *schedule, *pos;
    Py_ssize_t sched_i;
    long long max_outstanding, origin_ns;
    int nw;
} EngineArgs;

static int engine_args(PyObject *eargs, EngineArgs *a) {
    return PyArg_ParseTuple(eargs, "O!O!O!O!nO!LiL", &PyList_Type, &a->questions, &PyList_Type,
                            &a->randoms, &PyList_Type, &a->checks, &PyList_Type, &a->schedule,
                            &a->sched_i, &PyList_Type, &a->pos, &a->max_outstanding, &a->nw,
                            &a->origin_ns)
               ? 0
               : -1;
}

/* What both constructors do alike with a new Replay: the per-client counts, the streams'
 * layout and the Engine (whose classes must be the `nc` asked for). 0, or -1 with an
 * exception set (the caller drops `r`; its dealloc copes with a half-made one). */
static int replay_setup(Replay *r, int nclients, int nc, int rename, long long idle_ns,
                        long long timeout_ns, Py_buffer *qstream, Py_buffer *sclient,
                        const EngineArgs *a) {
    r->nclients = nclients, r->rename = rename, r->idle_ns = idle_ns;
    r->cloop = PyMem_Malloc(sizeof(long long) * nclients);
    r->csent = PyMem_Calloc((size_t)nclients, sizeof(long long));
    r->ccomp = PyMem_Calloc((size_t)nclients, sizeof(long long));
    if (!r->cloop || !r->csent || !r->ccomp) {
        PyErr_NoMemory();
        return -1;
    }
    for (int c = 0; c < nclients; c++) r->cloop[c] = -1;
    if (layout(r, qstream, sclient) < 0 ||
        engine_setup(REPLAY_E(r), a->questions, a->randoms, a->checks, a->schedule, a->sched_i,
                     a->pos, timeout_ns, a->max_outstanding, a->nw, a->origin_ns) < 0)
        return -1;
    if (REPLAY_E(r)->nc != nc) {
        PyErr_SetString(PyExc_ValueError, "Engine: classes and engine_args disagree");
        return -1;
    }
    return 0;
}

/* The end of both constructors: `r`'s epoll set if it is whole, the buffers released.
 * `r` (NULL if never made), or NULL with `r` dropped and an exception set. */
static PyObject *replay_made(Replay *r, int whole, Py_buffer *addr, Py_buffer *qstream,
                             Py_buffer *sclient) {
    if (r != NULL && whole) {
        REPLAY_E(r)->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (REPLAY_E(r)->epfd < 0) PyErr_SetFromErrno(PyExc_OSError), whole = 0;
    }
    if (!whole) Py_CLEAR(r);
    PyBuffer_Release(addr);
    PyBuffer_Release(qstream);
    PyBuffer_Release(sclient);
    return (PyObject *)r;
}
