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
#include "_fastengine.h"
#include "_fastface.h"

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


static void Engine_dealloc(Engine *e) {
    engine_clear(e);
    PyMem_Free(e->fds);
    PyMem_Free(e->rbuf);
    Py_TYPE(e)->tp_free((PyObject *)e);
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
    Py_ssize_t nflows = PyList_GET_SIZE(fds);
    if (nflows < 1 || recv_bytes < HEADER_LEN) {
        PyErr_SetString(PyExc_ValueError, "Engine: inconsistent arguments");
        return NULL;
    }
    Engine *e = (Engine *)type->tp_alloc(type, 0); /* zeroed: the ring starts free */
    if (e == NULL) return NULL;
    e->epfd = -1;
    if (engine_setup(e, questions, randoms, checks, schedule, sched_i, pos, timeout_ns,
                     max_outstanding, nw, origin_ns) < 0) {
        Py_DECREF(e);
        return NULL;
    }
    e->nflows = (int)nflows;
    e->flow = (int)(first_flow % nflows);
    e->recv_bytes = (size_t)recv_bytes;
    e->fds = PyMem_Calloc((size_t)nflows, sizeof(int));
    e->rbuf = PyMem_Malloc((size_t)RECV_BATCH * e->recv_bytes);
    if (!e->fds || !e->rbuf) {
        Py_DECREF(e);
        return PyErr_NoMemory();
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
    ENGINE_METHODS(Engine_run),
    ENGINE_BEGIN,
    {"take", (PyCFunction)Engine_take, METH_O,
     "take(cursor_second) -> (windows, closed_below, unexpected, socket_errors, max_gap_ns, "
     "max_gap_end_ns, sock_sent, sock_received, send_failed): the windows closed by now; resets the interval's counts"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EngineType =
    ENGINE_TYPE("soak.load._fastudp.Engine", Engine,
                "The UDP hot loop of a load worker (sendmmsg/recvmmsg).", Engine_new,
                Engine_dealloc, Engine_methods);

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

static struct PyModuleDef module =
    ENGINE_MODULE("soak.load._fastudp", "Batched UDP load loop.", module_methods);

PyMODINIT_FUNC PyInit__fastudp(void) {
    PyObject *m = module_with_engine(&module, &EngineType);
    if (m != NULL && PyModule_AddIntConstant(m, "NBUCKETS", NBUCKETS) < 0) Py_CLEAR(m);
    return m;
}
