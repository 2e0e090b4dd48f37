/* The UDP hot loop of a load worker in C: soak.load._fastudp.Engine.
 *
 * The Python loop in udp.py costs ~12 us of CPU per query, most of it the
 * interpreter and one send and one recv syscall per query. Here queries leave
 * through sendmmsg (up to CHUNK per flow per call, the 12-byte header with the
 * patched id and the pre-encoded question as two iovecs: nothing is copied)
 * and replies come back through recvmmsg on every socket epoll says is ready.
 * The id ring, the matching of the echoed question, the counters and the
 * latency buckets live here; Python keeps the pacing state (it hands in the
 * schedule's base each call), the control pipe and the per-second reports
 * (take() hands back the counts and resets them).
 *
 * The bookkeeping is Book's in worker.py, slot for slot: a slot's time is > 0
 * while outstanding, negated once timed out (so a late reply is recognised),
 * and 0 once answered. Counts go to the window of the grid second each query
 * was due in (soak.load.ledger.OpenWindows, the same layout of slots: second s
 * in slot s & wmask, closed by force when its slot is wanted again), and
 * take(cursor_second) hands back the windows closed by then.
 *
 * The wire format is wire.py's, the one reference: QUERY_AFTER_ID is
 * wire.HEADER[2:], and set_id, message_id, reply_rcode and echoes below are
 * wire.set_id, wire.message_id, wire.rcode and wire.echoes. A change there is
 * a change here; tests/unit/test_load_fastudp.py checks that both agree on
 * the same packets.
 */

/* One translation unit in three files (each under the module-size cap): the
 * definitions, the loop, and here the Python face (Engine's methods, the type and the
 * module). */
#include "_fastudp_defs.h"
#include "_fastudp_loop.h"

/* run(until_ns, send_end_ns, rate_qps, base_ns, base_k, phase, sending)
 *   -> (sent_total, outstanding, sending)
 * Runs the loop until until_ns, or until sending is over and nothing is
 * outstanding. `sending` comes back False once every query due before
 * send_end_ns has left. */
static PyObject *Engine_run(Engine *e, PyObject *args) {
    long long until, send_end, base_ns, base_k;
    double rate;
    int sending;
    double phase;
    if (!PyArg_ParseTuple(args, "LLdLLdp", &until, &send_end, &rate, &base_ns, &base_k, &phase,
                          &sending))
        return NULL;
    e->phase = phase;
    e->rate = rate;
    e->base_ns = base_ns;
    e->base_k = base_k;
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        long long now = mono_ns();
        if (sending && now >= send_end && e->sent_total >= due_by(send_end - 1, rate, base_ns, base_k, phase))
            sending = 0;
        if (!sending && e->outstanding <= 0) break;
        if (now >= until) break;
        long long timeout_ns = 10000000LL, n = 0;
        if (sending) {
            if (rate > 0) {
                long long due = due_by(now < send_end ? now : send_end - 1, rate, base_ns, base_k, phase) -
                                e->sent_total;
                if (due > SEND_BATCH) {
                    n = SEND_BATCH;
                    timeout_ns = 0;
                } else if (due > 0) {
                    n = due;
                    timeout_ns = 0;
                } else if (rate >= 1000) {
                    timeout_ns = 500000; /* epoll rounds up to its 1 ms */
                } else {
                    long long next = deadline_of(e, e->sent_total);
                    timeout_ns = next - now;
                    if (timeout_ns < 0) timeout_ns = 0;
                    if (timeout_ns > 10000000LL) timeout_ns = 10000000LL;
                }
            } else {
                n = e->max_outstanding - e->outstanding;
                if (n > SEND_BATCH) n = SEND_BATCH;
                timeout_ns = n > 0 ? 0 : 10000000LL;
            }
            if (n > 0 && send_queries(e, n, now) < 0) return NULL;
        }
        if (until - now < timeout_ns) timeout_ns = until - now;
        int timeout_ms = timeout_ns <= 0 ? 0 : (int)((timeout_ns + 999999) / 1000000);
        int nev;
        Py_BEGIN_ALLOW_THREADS
        nev = epoll_wait(e->epfd, evs, MAX_EVENTS, timeout_ms);
        Py_END_ALLOW_THREADS
        if (nev < 0 && errno != EINTR) return PyErr_SetFromErrno(PyExc_OSError);
        long long before = e->completed_total;
        long long woke = mono_ns();
        for (int i = 0; i < nev; i++) {
            if (read_replies(e, evs[i].data.fd) < 0) return NULL;
        }
        if (e->completed_total != before) answered(e, woke);
        now = mono_ns();
        if (now >= e->next_sweep) {
            sweep(e, now, 0);
            e->next_sweep = now + SWEEP_NS;
        }
        if (PyErr_CheckSignals() < 0) return NULL;
    }
    return Py_BuildValue("LLO", e->sent_total, e->outstanding, sending ? Py_True : Py_False);
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

static void Engine_dealloc(Engine *e) {
    if (e->epfd >= 0) close(e->epfd);
    for (int i = 0; i < RING; i++) Py_XDECREF(e->ring_q[i]);
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
    PyMem_Free(e->fds);
    PyMem_Free(e->cnt);
    PyMem_Free(e->lat);
    PyMem_Free(e->wsec);
    PyMem_Free(e->wrefused);
    Py_XDECREF(e->forced);
    PyMem_Free(e->rbuf);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyObject *optional(PyObject *x) {
    if (x == Py_None) return NULL;
    Py_INCREF(x);
    return x;
}

/* Engine(fds, questions, randoms, checks, schedule, sched_i, pos, timeout_ns,
 *        max_outstanding, recv_bytes, first_flow, window_slots, origin_ns)
 * questions[c] is a list of question bytes (None for a random class), randoms[c]
 * a callable giving fresh question bytes (or None), checks[c] a callable
 * (reply, question_len) -> wrong (or None: no expectation). */
static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kw)) {
    PyObject *fds, *questions, *randoms, *checks, *schedule, *pos;
    Py_ssize_t sched_i, recv_bytes, first_flow;
    long long timeout_ns, max_outstanding, origin_ns;
    int nw;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!nO!LLnniL", &PyList_Type, &fds, &PyList_Type,
                          &questions, &PyList_Type, &randoms, &PyList_Type, &checks, &PyList_Type,
                          &schedule, &sched_i, &PyList_Type, &pos, &timeout_ns, &max_outstanding,
                          &recv_bytes, &first_flow, &nw, &origin_ns))
        return NULL;
    if (nw < 2 || (nw & (nw - 1))) {
        PyErr_SetString(PyExc_ValueError, "Engine: window slots must be a power of two");
        return NULL;
    }
    Py_ssize_t nflows = PyList_GET_SIZE(fds), nc = PyList_GET_SIZE(questions);
    Py_ssize_t slen = PyList_GET_SIZE(schedule);
    if (nflows < 1 || nc < 1 || slen < 1 || PyList_GET_SIZE(randoms) != nc ||
        PyList_GET_SIZE(checks) != nc || PyList_GET_SIZE(pos) != nc || recv_bytes < HEADER_LEN) {
        PyErr_SetString(PyExc_ValueError, "Engine: inconsistent arguments");
        return NULL;
    }
    Engine *e = (Engine *)type->tp_alloc(type, 0); /* zeroed: the ring starts free */
    if (e == NULL) return NULL;
    e->epfd = -1;
    e->nc = (int)nc;
    e->nflows = (int)nflows;
    e->flow = (int)(first_flow % nflows);
    e->slen = slen;
    e->sched_i = sched_i % slen;
    e->timeout_ns = timeout_ns;
    e->max_outstanding = max_outstanding;
    e->recv_bytes = (size_t)recv_bytes;
    e->next_sweep = mono_ns() + SWEEP_NS;
    e->last_answer_ns = mono_ns();
    e->questions = PyMem_Calloc((size_t)nc, sizeof(PyObject *));
    e->randoms = PyMem_Calloc((size_t)nc, sizeof(PyObject *));
    e->checks = PyMem_Calloc((size_t)nc, sizeof(PyObject *));
    e->pos = PyMem_Calloc((size_t)nc, sizeof(Py_ssize_t));
    e->schedule = PyMem_Calloc((size_t)slen, sizeof(int));
    e->fds = PyMem_Calloc((size_t)nflows, sizeof(int));
    e->nw = nw;
    e->wmask = nw - 1;
    e->origin_ns = origin_ns;
    e->cnt = PyMem_Calloc((size_t)nw * nc * NCOUNT, sizeof(long long));
    e->lat = PyMem_Calloc((size_t)nw * nc * NBUCKETS, sizeof(long long));
    e->wsec = PyMem_Calloc((size_t)nw, sizeof(long long));
    e->wrefused = PyMem_Calloc((size_t)nw, sizeof(long long));
    e->forced = PyList_New(0);
    e->rbuf = PyMem_Malloc((size_t)RECV_BATCH * e->recv_bytes);
    if (!e->questions || !e->randoms || !e->checks || !e->pos || !e->schedule || !e->fds ||
        !e->cnt || !e->lat || !e->wsec || !e->wrefused || !e->forced || !e->rbuf) {
        Py_DECREF(e);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < nw; i++) e->wsec[i] = -1;
    e->cur_second = -1;
    for (Py_ssize_t c = 0; c < nc; c++) {
        PyObject *q = PyList_GET_ITEM(questions, c), *r = PyList_GET_ITEM(randoms, c);
        e->randoms[c] = optional(r);
        e->checks[c] = optional(PyList_GET_ITEM(checks, c));
        if (r == Py_None) {
            if (!PyList_Check(q) || PyList_GET_SIZE(q) == 0) {
                PyErr_SetString(PyExc_ValueError, "Engine: a class needs questions or a random source");
                Py_DECREF(e);
                return NULL;
            }
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(q); i++) {
                if (!PyBytes_Check(PyList_GET_ITEM(q, i))) {
                    PyErr_SetString(PyExc_TypeError, "Engine: questions must be bytes");
                    Py_DECREF(e);
                    return NULL;
                }
            }
            e->questions[c] = optional(q);
            e->pos[c] = PyLong_AsSsize_t(PyList_GET_ITEM(pos, c)) % PyList_GET_SIZE(q);
        }
    }
    for (Py_ssize_t i = 0; i < slen; i++) {
        long v = PyLong_AsLong(PyList_GET_ITEM(schedule, i));
        if (v < 0 || v >= nc) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Engine: bad schedule");
            Py_DECREF(e);
            return NULL;
        }
        e->schedule[i] = (int)v;
    }
    for (int j = 0; j < RECV_BATCH; j++) {
        e->riov[j].iov_base = e->rbuf + (size_t)j * e->recv_bytes;
        e->riov[j].iov_len = e->recv_bytes;
        e->rmsgs[j].msg_hdr.msg_iov = &e->riov[j];
        e->rmsgs[j].msg_hdr.msg_iovlen = 1;
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->epfd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(e);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nflows; i++) {
        int fd = (int)PyLong_AsLong(PyList_GET_ITEM(fds, i));
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (PyErr_Occurred() || epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            if (!PyErr_Occurred()) PyErr_SetFromErrno(PyExc_OSError);
            Py_DECREF(e);
            return NULL;
        }
        e->fds[i] = fd;
    }
    return (PyObject *)e;
}

static PyMethodDef Engine_methods[] = {
    {"run", (PyCFunction)Engine_run, METH_VARARGS,
     "run(until_ns, send_end_ns, rate_qps, base_ns, base_k, phase, sending) -> (sent_total, "
     "outstanding, sending)"},
    {"sweep", (PyCFunction)Engine_sweep, METH_VARARGS,
     "sweep(everything=False) -> outstanding: count queries past their timeout as lost"},
    {"take", (PyCFunction)Engine_take, METH_O,
     "take(cursor_second) -> (windows, closed_below, unexpected, socket_errors, max_gap_ns, "
     "max_gap_end_ns, sock_sent, sock_received, send_failed): the windows closed by now; resets the interval's counts"},
    {"skip", (PyCFunction)Engine_skip, METH_VARARGS,
     "skip(second, n): n queries due in `second` never leave (counted skipped)"},
    {"begin", (PyCFunction)Engine_begin, METH_O, "begin(start_ns): silences count from here"},
    {"silence_until", (PyCFunction)Engine_silence_until, METH_O,
     "silence_until(end_ns): a silence still going on at the end counts up to end_ns"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "soak.load._fastudp.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The UDP hot loop of a load worker (sendmmsg/recvmmsg).",
    .tp_new = Engine_new,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
};

/* bucket_value(us) -> the value a latency of `us` microseconds is reported as. */
static PyObject *bucket_value(PyObject *Py_UNUSED(m), PyObject *arg) {
    unsigned long long us = PyLong_AsUnsignedLongLong(arg);
    if (us == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    return PyLong_FromUnsignedLongLong(value_of(bucket_of(us)));
}

static PyMethodDef module_methods[] = {
    {"bucket_value", bucket_value, METH_O, "bucket_value(us) -> the latency (us) it is counted as"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "soak.load._fastudp", "Batched UDP load loop.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastudp(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "NBUCKETS", NBUCKETS);
    return m;
}
