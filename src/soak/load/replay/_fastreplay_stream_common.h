/* Part of soak.load.replay's compiled stream loops (_fastreplay_stream.c and
 * _fastreplay_doh.c): the face both show, written once (play, drain, take, stats). The
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
