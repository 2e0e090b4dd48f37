/* Part of soak.load._faststream (see the top of _faststream.c): the Python face, the
 * Engine's run() and its methods, the type and the module. Included once, last. */

#include "_fastface.h" /* the type and the module's set-up */

/* run(until_ns, send_end_ns, rate_qps, base_ns, base_k, phase, sending)
 *   -> (sent_total, outstanding, sending), as _fastudp's Engine.run. */
static PyObject *Stream_run(Stream *s, PyObject *args) {
    Engine *e = &s->e;
    long long until, send_end, base_ns, base_k;
    double rate, phase;
    int sending;
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
        if (sending && now >= send_end &&
            e->sent_total >= due_by(send_end - 1, rate, base_ns, base_k, phase))
            sending = 0;
        if ((!sending && e->outstanding <= 0) || now >= until) break;
        long long timeout_ns = 10000000LL, n = 0;
        if (sending) {
            if (rate > 0) {
                n = due_by(now < send_end ? now : send_end - 1, rate, base_ns, base_k, phase) -
                    e->sent_total;
                if (n > SEND_BATCH) n = SEND_BATCH;
                timeout_ns = n > 0 ? 0 : 500000; /* tcp.py's 0.5 ms; epoll rounds up */
            } else {
                n = e->max_outstanding - e->outstanding;
                if (n > SEND_BATCH) n = SEND_BATCH;
                timeout_ns = n > 0 ? 0 : 10000000LL;
            }
            if (n > 0 && queue_queries(s, n, now) < 0) return NULL;
            flush_all(s);
            if (hang_ups(s, now) < 0) return NULL;
        }
        if (until - now < timeout_ns) timeout_ns = until - now;
        int timeout_ms = timeout_ns <= 0 ? 0 : (int)((timeout_ns + 999999) / 1000000);
        int nev;
        Py_BEGIN_ALLOW_THREADS
        nev = epoll_wait(e->epfd, evs, MAX_EVENTS, timeout_ms);
        Py_END_ALLOW_THREADS
        if (nev < 0 && errno != EINTR) return PyErr_SetFromErrno(PyExc_OSError);
        long long before = e->completed_total, woke = mono_ns();
        for (int i = 0; i < nev; i++)
            if (on_event(s, (int)evs[i].data.u32, evs[i].events) < 0) return NULL;
        if (e->completed_total != before) answered(e, woke);
        now = mono_ns();
        if (housekeeping(s, now) < 0) return NULL;
        if (now >= e->next_sweep) {
            sweep(e, now, 0);
            e->next_sweep = now + SWEEP_NS;
        }
        if (PyErr_CheckSignals() < 0) return NULL;
    }
    return Py_BuildValue("LLO", e->sent_total, e->outstanding, sending ? Py_True : Py_False);
}

/* take(cursor_second) -> the 9 counts of _fastudp's take, then a 10th: the connections'
 * (opened, errors, resumed, {handshake us: n}, hung_up) (udp_fast.interval_of reads it);
 * the interval's counts start again from 0. */
static PyObject *Stream_take(Stream *s, PyObject *arg) {
    PyObject *hs = PyDict_New();
    if (hs == NULL) return NULL;
    PyObject *counts = Engine_take(&s->e, arg);
    if (counts == NULL) { Py_DECREF(hs); return NULL; }
    PyObject *taken = s->k.handshake_us; /* handed over (or released) by "N" */
    s->k.handshake_us = hs;
    PyObject *conns =
        Py_BuildValue("LLLNL", s->k.opened, s->k.errors, s->k.resumed, taken, s->k.hung_up);
    s->k.opened = s->k.errors = s->k.resumed = s->k.hung_up = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(counts);
    PyObject *out = conns ? PyTuple_New(n + 1) : NULL;
    if (out == NULL) { Py_DECREF(counts); Py_XDECREF(conns); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(counts, i);
        Py_INCREF(v);
        PyTuple_SET_ITEM(out, i, v);
    }
    PyTuple_SET_ITEM(out, n, conns);
    Py_DECREF(counts);
    return out;
}

/* finish(): what no socket took by the end never will (counted failed at the socket,
 * as tcp.py's StreamFlow.unwritten); every connection closes. */
static PyObject *Stream_finish(Stream *s, PyObject *Py_UNUSED(arg)) {
    for (int i = 0; i < s->nconns + s->nplaces; i++) drop(s, i);
    Py_RETURN_NONE;
}

static void Stream_dealloc(Stream *s) {
    for (int i = 0; s->conns != NULL && i < s->nconns + s->nplaces; i++) conn_free(&s->conns[i]);
    PyMem_Free(s->conns);
    churn_free(s);
    if (s->ctx) SSL_CTX_free(s->ctx);
    PyMem_Free(s->server_name);
    Py_XDECREF(s->k.handshake_us);
    engine_clear(&s->e);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* The TLS context of conn.tls_context (_fastconn.h). 0, or -1 with an exception set. */
static int make_ctx(Stream *s, const char *ca_file, PyObject *alpn) {
    s->ctx = fastconn_ctx(ca_file, (const unsigned char *)PyBytes_AS_STRING(alpn),
                          (size_t)PyBytes_GET_SIZE(alpn), s->resume);
    return s->ctx == NULL ? -1 : 0;
}

/* Engine(host, port, flows, tls, engine_args, churn=None)
 * host: an IP literal, or None while the server's name does not resolve; tls: None for TCP, else (server_name or None, ca_file or None, resumption, alpn wire
 * bytes); engine_args: the UDP Engine's arguments (udp_fast.engine_args), of which the
 * fds, recv_bytes and first flow are not used here; churn: None, or per class the slots
 * it sends on and per slot its connection policy (_faststream_churn.h: churn_setup). */
static PyObject *Stream_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kw)) {
    const char *host;
    int port, flows, nw, resume = 1;
    PyObject *tls, *eargs, *fds, *questions, *randoms, *checks, *schedule, *pos, *alpn = NULL;
    PyObject *churn = Py_None;
    Py_ssize_t sched_i, recv_bytes, first_flow;
    long long timeout_ns, max_outstanding, origin_ns;
    const char *server_name = NULL, *ca_file = NULL;
    if (!PyArg_ParseTuple(args, "ziiOO!|O", &host, &port, &flows, &tls, &PyTuple_Type, &eargs,
                          &churn))
        return NULL;
    if (!PyArg_ParseTuple(eargs, "O!O!O!O!O!nO!LLnniL", &PyList_Type, &fds, &PyList_Type,
                          &questions, &PyList_Type, &randoms, &PyList_Type, &checks,
                          &PyList_Type, &schedule, &sched_i, &PyList_Type, &pos, &timeout_ns,
                          &max_outstanding, &recv_bytes, &first_flow, &nw, &origin_ns))
        return NULL;
    if (tls != Py_None &&
        !PyArg_ParseTuple(tls, "zzpS", &server_name, &ca_file, &resume, &alpn))
        return NULL;
    Stream *s = (Stream *)type->tp_alloc(type, 0);
    if (s == NULL) return NULL;
    s->e.epfd = -1;
    s->resume = resume;
    s->k.handshake_us = PyDict_New();
    if (s->k.handshake_us == NULL ||
        engine_setup(&s->e, questions, randoms, checks, schedule, sched_i, pos, timeout_ns,
                     max_outstanding, nw, origin_ns) < 0)
        goto fail;
    if (fastconn_addr(host, port, &s->addr, &s->alen) < 0) goto fail;
    if (flows < 1) {
        PyErr_SetString(PyExc_ValueError, "Engine: flows must be at least 1");
        goto fail;
    }
    if (churn_setup(s, flows, churn) < 0) goto fail;
    s->conns = PyMem_Calloc((size_t)s->nconns, sizeof(Conn));
    if (s->conns == NULL) { PyErr_NoMemory(); goto fail; }
    for (int i = 0; i < s->nconns; i++) {
        s->conns[i].fd = -1;
        s->conns[i].slot = i;
        made_new(s, i);
    }
    if (server_name != NULL) {
        s->server_name = PyMem_Malloc(strlen(server_name) + 1);
        if (s->server_name == NULL) { PyErr_NoMemory(); goto fail; }
        strcpy(s->server_name, server_name);
    }
    if (tls != Py_None && make_ctx(s, ca_file, alpn) < 0) goto fail;
    s->e.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->e.epfd < 0) { PyErr_SetFromErrno(PyExc_OSError); goto fail; }
    return (PyObject *)s;
fail:
    Py_DECREF(s);
    return NULL;
}

static PyObject *Stream_set_address(Stream *s, PyObject *args) {
    return fastconn_set_address(args, &s->addr, &s->alen);
}

static PyMethodDef Stream_methods[] = {
    ENGINE_METHODS(Stream_run),
    ENGINE_BEGIN,
    {"take", (PyCFunction)Stream_take, METH_O,
     "take(cursor_second) -> udp take's counts and (opened, errors, resumed, handshake_us, "
     "hung_up)"},
    {"finish", (PyCFunction)Stream_finish, METH_NOARGS,
     "finish(): what is still queued fails at the socket; every connection closes"},
    {"set_address", (PyCFunction)Stream_set_address, METH_VARARGS,
     "set_address(host or None, port): where later connects go (None: nowhere, each fails)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StreamType =
    ENGINE_TYPE("soak.load._faststream.Engine", Stream,
                "The TCP and DoT loop of a load worker (pipelined connections, OpenSSL).",
                Stream_new, Stream_dealloc, Stream_methods);

static struct PyModuleDef module =
    ENGINE_MODULE("soak.load._faststream", "TCP and DoT load loop.", NULL);

PyMODINIT_FUNC PyInit__faststream(void) { return module_with_engine(&module, &StreamType); }
