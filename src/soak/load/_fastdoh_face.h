/* Part of soak.load._fastdoh (see the top of _fastdoh.c): the Python face, Engine's
 * methods, the type and the module. Included once, by _fastdoh.c, last. */

#include "_fastface.h" /* the type and the module's set-up */

/* run(until_ns, send_end_ns, rate_qps, base_ns, base_k, phase, sending)
 *   -> (sent_total, outstanding, sending): as the UDP Engine's run. */
static PyObject *Doh_run(DohEngine *d, PyObject *args) {
    Engine *e = &d->e;
    long long until, send_end;
    int sending;
    if (!PyArg_ParseTuple(args, "LLdLLdp", &until, &send_end, &e->rate, &e->base_ns, &e->base_k,
                          &e->phase, &sending))
        return NULL;
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        long long now = mono_ns();
        if (sending && now >= send_end &&
            e->sent_total >= due_by(send_end - 1, e->rate, e->base_ns, e->base_k, e->phase))
            sending = 0;
        if ((!sending && e->outstanding <= 0) || now >= until) break;
        long long timeout_ns = 10000000LL;
        if (sending) {
            long long n = due_now(d, now, send_end, &timeout_ns);
            if (n > 0 && send_doh(d, n, now) < 0) return NULL;
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
            if (on_event(d, evs[i].data.ptr, evs[i].events) < 0) return NULL;
        if (e->completed_total != before) answered(e, woke);
        now = mono_ns();
        if (housekeeping(d, now) < 0) return PyErr_NoMemory();
        if (now >= e->next_sweep) {
            sweep(e, now, 0);
            e->next_sweep = now + SWEEP_NS;
        }
        if (PyErr_CheckSignals() < 0) return NULL;
    }
    return Py_BuildValue("LLO", e->sent_total, e->outstanding, sending ? Py_True : Py_False);
}

/* begin(start_ns): the load starts now; every connection starts opening. */
static PyObject *Doh_begin(DohEngine *d, PyObject *arg) {
    PyObject *r = Engine_begin(&d->e, arg);
    if (r == NULL) return NULL;
    for (int i = 0; i < d->nflows; i++) conn_connect(d->flows[i], d->e.last_answer_ns);
    return r;
}

/* take(cursor_second) -> the UDP Engine's take, then (opened, errors, resumed,
 * {handshake us: n}, hung_up, streams reset, refused, retried, goaways) of the interval's
 * connections (stats.Connections). */
static PyObject *Doh_take(DohEngine *d, PyObject *arg) {
    PyObject *counts = Engine_take(&d->e, arg);
    PyObject *fresh = PyDict_New();
    if (counts == NULL || fresh == NULL) {
        Py_XDECREF(counts);
        Py_XDECREF(fresh);
        return NULL;
    }
    PyObject *conns = Py_BuildValue("LLLNLLLLL", d->opened, d->errors, d->resumed, d->handshake_us,
                                    d->hung_up, d->streams_reset, d->streams_refused,
                                    d->streams_retried, d->goaways);
    d->handshake_us = fresh;
    d->opened = d->errors = d->resumed = d->hung_up = 0;
    d->streams_reset = d->streams_refused = d->streams_retried = d->goaways = 0;
    PyObject *tail = conns ? PyTuple_Pack(1, conns) : NULL;
    PyObject *out = tail ? PySequence_Concat(counts, tail) : NULL;
    Py_XDECREF(conns);
    Py_XDECREF(tail);
    Py_DECREF(counts);
    return out;
}

/* finish(): what no socket took by the end never will (send_failed); connections close. */
static PyObject *Doh_finish(DohEngine *d, PyObject *Py_UNUSED(arg)) {
    for (int i = 0; i < d->nflows; i++) conn_close(d->flows[i]);
    for (int i = 0; i < d->nretiring; i++) conn_close(d->retiring[i]);
    Py_RETURN_NONE;
}

static void Doh_dealloc(DohEngine *d) {
    for (int i = 0; i < d->nflows; i++)
        if (d->flows[i]) conn_free(d->flows[i]);
    for (int i = 0; i < d->nretiring; i++) conn_free(d->retiring[i]);
    free(d->flows);
    free(d->retiring);
    churn_plan_free(&d->plan);
    if (d->ctx) SSL_CTX_free(d->ctx);
    if (d->cbs) nghttp2_session_callbacks_del(d->cbs);
    PyMem_Free(d->path);
    PyMem_Free(d->authority);
    PyMem_Free(d->server_name);
    Py_XDECREF(d->handshake_us);
    Engine_dealloc(&d->e);
}

static char *copy_str(const char *s) {
    if (s == NULL) return NULL;
    char *out = PyMem_Malloc(strlen(s) + 1);
    if (out) strcpy(out, s);
    return out;
}

/* The TLS context of conn.tls_context (_fastconn.h). 0, or -1 with an exception set. */
static int make_ctx(DohEngine *d, const char *ca_file, const char *alpn, Py_ssize_t alpn_len) {
    d->ctx = fastconn_ctx(ca_file, (const unsigned char *)alpn, (size_t)alpn_len, d->resume);
    return d->ctx == NULL ? -1 : 0;
}

/* Engine(engine_args, host, port, flows, get, path, authority, server_name, ca_file,
 *        resume, alpn, churn=None): engine_args are the UDP Engine's (its fds list is not
 * used); host an IP literal, or None while the server's name does not resolve; alpn is
 * in wire format (b"\x02h2"); churn: None, or per class the slots it sends on and per
 * slot its connection policy (_fastchurn.h: churn_plan_setup). */
static PyObject *Doh_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kw)) {
    PyObject *eargs, *churn = Py_None;
    const char *host, *path, *authority, *server_name, *ca_file, *alpn;
    Py_ssize_t alpn_len;
    int port, flows, get, resume;
    if (!PyArg_ParseTuple(args, "O!ziipszzzpy#|O", &PyTuple_Type, &eargs, &host, &port, &flows,
                          &get, &path, &authority, &server_name, &ca_file, &resume, &alpn,
                          &alpn_len, &churn))
        return NULL;
    /* doh_fast.MAX_PATH_BYTES: GET's :path is built in a buffer of 1,024 bytes */
    if (flows < 1 || strlen(path) > 512 || PyTuple_GET_SIZE(eargs) < 1) {
        PyErr_SetString(PyExc_ValueError, "Engine: flows >= 1 and a path of at most 512 bytes");
        return NULL;
    }
    /* The UDP Engine's constructor wants sockets to wait on; DoH opens its own later.
     * It is handed one eventfd, taken out of its epoll again at once. */
    int efd = eventfd(0, EFD_CLOEXEC);
    if (efd < 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_ssize_t nargs = PyTuple_GET_SIZE(eargs);
    PyObject *uargs = PyTuple_New(nargs);
    PyObject *fds = Py_BuildValue("[i]", efd);
    if (uargs == NULL || fds == NULL) {
        Py_XDECREF(uargs);
        Py_XDECREF(fds);
        close(efd);
        return NULL;
    }
    PyTuple_SET_ITEM(uargs, 0, fds);
    for (Py_ssize_t i = 1; i < nargs; i++) {
        Py_INCREF(PyTuple_GET_ITEM(eargs, i));
        PyTuple_SET_ITEM(uargs, i, PyTuple_GET_ITEM(eargs, i));
    }
    DohEngine *d = (DohEngine *)Engine_new(type, uargs, NULL);
    Py_DECREF(uargs);
    if (d != NULL) epoll_ctl(d->e.epfd, EPOLL_CTL_DEL, efd, NULL);
    close(efd);
    if (d == NULL) return NULL;
    d->get = get;
    d->resume = resume;
    if (fastconn_addr(host, port, &d->addr, &d->addrlen) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    d->path = copy_str(path);
    d->authority = copy_str(authority);
    d->server_name = copy_str(server_name);
    if (churn_plan_setup(&d->plan, d->e.nc, flows, churn) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    flows = d->plan.nslots;
    d->handshake_us = PyDict_New();
    d->cbs = make_callbacks();
    d->flows = calloc((size_t)flows, sizeof(Conn *));
    if (!d->path || !d->authority || (server_name && !d->server_name) || !d->handshake_us ||
        !d->cbs || !d->flows) {
        Py_DECREF(d);
        return PyErr_NoMemory();
    }
    d->nflows = flows;
    for (int i = 0; i < flows; i++) {
        if ((d->flows[i] = conn_new(d)) == NULL) {
            Py_DECREF(d);
            return PyErr_NoMemory();
        }
        d->flows[i]->slot = i;
        d->flows[i]->hangup = plan_new_hangs_up(&d->plan, i); /* tcp.Flows: in slot order */
    }
    if (make_ctx(d, ca_file, alpn, alpn_len) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return (PyObject *)d;
}

static PyObject *Doh_set_address(DohEngine *d, PyObject *args) {
    return fastconn_set_address(args, &d->addr, &d->addrlen);
}

static PyMethodDef Doh_methods[] = {
    ENGINE_METHODS(Doh_run),
    {"begin", (PyCFunction)Doh_begin, METH_O, "begin(start_ns): connections open, silences count"},
    {"take", (PyCFunction)Doh_take, METH_O,
     "take(cursor_second) -> the UDP Engine's take, then (opened, errors, resumed, "
     "handshake_us, hung_up, streams_reset, streams_refused, streams_retried, goaways) of "
     "the connections"},
    {"finish", (PyCFunction)Doh_finish, METH_NOARGS,
     "finish(): close the connections; what no socket took counts as send_failed"},
    {"set_address", (PyCFunction)Doh_set_address, METH_VARARGS,
     "set_address(host or None, port): where later connects go (None: nowhere, each fails)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DohEngineType =
    ENGINE_TYPE("soak.load._fastdoh.Engine", DohEngine,
                "The DoH loop of a load worker (OpenSSL and nghttp2).", Doh_new, Doh_dealloc,
                Doh_methods);

static struct PyModuleDef doh_module =
    ENGINE_MODULE("soak.load._fastdoh", "DoH load loop (OpenSSL, nghttp2).", NULL);

PyMODINIT_FUNC PyInit__fastdoh(void) { return module_with_engine(&doh_module, &DohEngineType); }
