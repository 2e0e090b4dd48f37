/* Part of soak.load's compiled loops (_fastudp.c, _faststream.c): what every Engine
 * does the same whatever its transport. The Engine's setup and teardown, the sweep, the
 * start and end of silences, skipped queries and take() (the closed windows and the
 * interval's counts). Included once per translation unit, after _fastudp_defs.h and
 * _fastudp_loop.h. */

static PyObject *optional(PyObject *x) {
    if (x == Py_None) return NULL;
    Py_INCREF(x);
    return x;
}

/* The Engine's transport-free parts from its arguments (see Engine_new in _fastudp.c):
 * 0, or -1 with an exception set (the caller drops the Engine; engine_clear copes with
 * a half-made one). */
static int engine_setup(Engine *e, PyObject *questions, PyObject *randoms, PyObject *checks,
                        PyObject *schedule, Py_ssize_t sched_i, PyObject *pos,
                        long long timeout_ns, long long max_outstanding, int nw,
                        long long origin_ns) {
    if (nw < 2 || (nw & (nw - 1))) {
        PyErr_SetString(PyExc_ValueError, "Engine: window slots must be a power of two");
        return -1;
    }
    Py_ssize_t nc = PyList_GET_SIZE(questions), slen = PyList_GET_SIZE(schedule);
    if (nc < 1 || slen < 1 || PyList_GET_SIZE(randoms) != nc || PyList_GET_SIZE(checks) != nc ||
        PyList_GET_SIZE(pos) != nc) {
        PyErr_SetString(PyExc_ValueError, "Engine: inconsistent arguments");
        return -1;
    }
    e->nc = (int)nc;
    e->slen = slen;
    e->sched_i = sched_i % slen;
    e->timeout_ns = timeout_ns;
    e->max_outstanding = max_outstanding;
    e->next_sweep = mono_ns() + SWEEP_NS;
    e->last_answer_ns = mono_ns();
    e->questions = PyMem_Calloc((size_t)nc, sizeof(PyObject *));
    e->randoms = PyMem_Calloc((size_t)nc, sizeof(PyObject *));
    e->checks = PyMem_Calloc((size_t)nc, sizeof(PyObject *));
    e->pos = PyMem_Calloc((size_t)nc, sizeof(Py_ssize_t));
    e->schedule = PyMem_Calloc((size_t)slen, sizeof(int));
    e->nw = nw;
    e->wmask = nw - 1;
    e->origin_ns = origin_ns;
    e->cnt = PyMem_Calloc((size_t)nw * nc * NCOUNT, sizeof(long long));
    e->lat = PyMem_Calloc((size_t)nw * nc * NBUCKETS, sizeof(long long));
    e->wsec = PyMem_Calloc((size_t)nw, sizeof(long long));
    e->wrefused = PyMem_Calloc((size_t)nw, sizeof(long long));
    e->forced = PyList_New(0);
    if (!e->questions || !e->randoms || !e->checks || !e->pos || !e->schedule || !e->cnt ||
        !e->lat || !e->wsec || !e->wrefused || !e->forced) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < nw; i++) e->wsec[i] = -1;
    e->cur_second = -1;
    for (Py_ssize_t c = 0; c < nc; c++) {
        PyObject *q = PyList_GET_ITEM(questions, c), *r = PyList_GET_ITEM(randoms, c);
        e->randoms[c] = optional(r);
        e->checks[c] = optional(PyList_GET_ITEM(checks, c));
        if (r != Py_None) continue;
        if (!PyList_Check(q) || PyList_GET_SIZE(q) == 0) {
            PyErr_SetString(PyExc_ValueError, "Engine: a class needs questions or a random source");
            return -1;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(q); i++) {
            if (!PyBytes_Check(PyList_GET_ITEM(q, i))) {
                PyErr_SetString(PyExc_TypeError, "Engine: questions must be bytes");
                return -1;
            }
        }
        e->questions[c] = optional(q);
        e->pos[c] = PyLong_AsSsize_t(PyList_GET_ITEM(pos, c)) % PyList_GET_SIZE(q);
    }
    for (Py_ssize_t i = 0; i < slen; i++) {
        long v = PyLong_AsLong(PyList_GET_ITEM(schedule, i));
        if (v < 0 || v >= nc) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Engine: bad schedule");
            return -1;
        }
        e->schedule[i] = (int)v;
    }
    return 0;
}

/* What engine_setup made (and the epoll fd), freed; the transport frees its own. */
static void engine_clear(Engine *e) {
    if (e->epfd >= 0) close(e->epfd);
    e->epfd = -1;
    for (int i = 0; i < RING; i++) Py_CLEAR(e->ring_q[i]);
    for (int c = 0; c < e->nc; c++) {
        if (e->questions) Py_XDECREF(e->questions[c]);
        if (e->randoms) Py_XDECREF(e->randoms[c]);
        if (e->checks) Py_XDECREF(e->checks[c]);
    }
    PyMem_Free(e->questions);
    PyMem_Free(e->randoms);
    PyMem_Free(e->checks);
    PyMem_Free(e->pos);
    PyMem_Free(e->schedule);
    PyMem_Free(e->cnt);
    PyMem_Free(e->lat);
    PyMem_Free(e->wsec);
    PyMem_Free(e->wrefused);
    Py_CLEAR(e->forced);
    e->questions = e->randoms = e->checks = NULL;
    e->pos = NULL;
    e->schedule = NULL;
    e->cnt = e->lat = e->wsec = e->wrefused = NULL;
}

static PyObject *Engine_sweep(Engine *e, PyObject *args) {
    int everything = 0;
    if (!PyArg_ParseTuple(args, "|p", &everything)) return NULL;
    sweep(e, mono_ns(), everything);
    return PyLong_FromLongLong(e->outstanding);
}

/* begin(start_ns): the load starts now; a silence is counted from here. */
static PyObject *Engine_begin(Engine *e, PyObject *arg) {
    long long start = PyLong_AsLongLong(arg);
    if (start == -1 && PyErr_Occurred()) return NULL;
    e->last_answer_ns = start;
    Py_RETURN_NONE;
}

/* silence_until(end_ns): at the end of the load, a silence still going on counts up
 * to end_ns (Book.silence_until). */
static PyObject *Engine_silence_until(Engine *e, PyObject *arg) {
    long long end = PyLong_AsLongLong(arg);
    if (end == -1 && PyErr_Occurred()) return NULL;
    if (end > e->last_answer_ns) answered(e, end);
    Py_RETURN_NONE;
}

/* skip(second, n): n queries due in `second` never leave; the mix schedule moves past
 * them (their classes are the schedule's). */
static PyObject *Engine_skip(Engine *e, PyObject *args) {
    long long second, n;
    if (!PyArg_ParseTuple(args, "LL", &second, &n)) return NULL;
    long long base = open_second(e, second);
    if (base < 0) return NULL;
    for (long long i = 0; i < n; i++) {
        e->cnt[(base + e->schedule[e->sched_i]) * NCOUNT + SKIPPED]++;
        if (++e->sched_i == e->slen) e->sched_i = 0;
    }
    Py_RETURN_NONE;
}

/* take(cursor_second) -> (windows, closed_below, unexpected, socket_errors, max_gap_ns,
 *                         max_gap_end_ns, sock_sent, sock_received, send_failed)
 * windows: those forced out since the last call, then every second below cursor_second
 * (the due second of the next query to leave) with nothing in flight, in order; the
 * interval's counts start again from 0. */
static PyObject *Engine_take(Engine *e, PyObject *arg) {
    long long cursor = PyLong_AsLongLong(arg);
    if (cursor == -1 && PyErr_Occurred()) return NULL;
    long long cur = base_of(e, e->cur_second);
    if (cur >= 0) e->wrefused[cur / e->nc] += e->refused;
    PyObject *windows = e->forced;
    e->forced = PyList_New(0);
    if (e->forced == NULL) { e->forced = windows; return NULL; }
    long long second = e->closed_below;
    long long newest = second;
    for (int i = 0; i < e->nw; i++)
        if (e->wsec[i] + 1 > newest) newest = e->wsec[i] + 1;
    if (cursor > newest) cursor = newest;
    for (; second < cursor; second++) {
        long long slot = second & e->wmask;
        if (e->wsec[slot] != second) continue; /* nothing was due in it */
        if (inflight(e, slot)) break;
        PyObject *w = window_of(e, (int)slot);
        if (w == NULL || PyList_Append(windows, w) < 0) {
            Py_XDECREF(w);
            Py_DECREF(windows);
            return NULL;
        }
        Py_DECREF(w);
    }
    if (second > e->closed_below) e->closed_below = second;
    PyObject *out = Py_BuildValue("NLLLLLLLL", windows, e->closed_below, e->unexpected,
                                  e->refused, e->max_gap_ns, e->max_gap_end_ns, e->sock_sent,
                                  e->sock_received, e->send_failed);
    if (out != NULL) {
        e->unexpected = e->refused = 0;
        e->sock_sent = e->sock_received = e->send_failed = 0;
        e->max_gap_ns = e->max_gap_end_ns = 0;
    }
    return out;
}

/* The method-table entries every load Engine (_fastudp's, _faststream's, _fastdoh's)
 * shows alike: `run_fn` its run(), whose arguments and answer are the same in each, and
 * the transport-free sweep, skip and silence_until above. Each engine adds its take()
 * and begin() (ENGINE_BEGIN where it has nothing to open) and what else it has. */
#define ENGINE_METHODS(run_fn)                                                                \
    {"run", (PyCFunction)(run_fn), METH_VARARGS,                                              \
     "run(until_ns, send_end_ns, rate_qps, base_ns, base_k, phase, sending) -> (sent_total, " \
     "outstanding, sending)"},                                                                \
        {"sweep", (PyCFunction)Engine_sweep, METH_VARARGS,                                    \
         "sweep(everything=False) -> outstanding: count queries past their timeout as lost"}, \
        {"skip", (PyCFunction)Engine_skip, METH_VARARGS,                                      \
         "skip(second, n): n queries due in `second` never leave (counted skipped)"},         \
        {"silence_until", (PyCFunction)Engine_silence_until, METH_O,                          \
         "silence_until(end_ns): a silence still going on at the end counts up to end_ns"}
#define ENGINE_BEGIN                                                                          \
    {"begin", (PyCFunction)Engine_begin, METH_O, "begin(start_ns): silences count from here"}
