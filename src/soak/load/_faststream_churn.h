/* Part of soak.load._faststream (see the top of _faststream.c): which connections carry
 * which class, and connections that churn on purpose (tcp.Flows and conn.StreamFlow's
 * policy in C). A class's connection policy (conn.Policy) closes its connection after
 * `quota` queries or at `age_ns` since it came up: the connection is spent, takes no
 * more queries, and retires: a new one takes its slot at once (offered the old one's
 * TLS session), the old one moves to a place of its own and closes once its answers
 * are in (or their timeout passed) and `idle_ns` more have gone by. Of a class's
 * connections, `hangup_fraction` are hang-up clients (spread evenly: hangs_up): once
 * spent and their last query has left, they reset (TCP RST) with answers still due,
 * whose queries end abandoned (StreamFlow.hang_up). Included once, by _faststream.c,
 * after the Stream type. */

/* Whether a class's connection number n (from 0) hangs up (tcp.hangs_up: the same
 * floating-point sums, so the same connections). */
static int hangs_up(long long n, double fraction) {
    return floor((double)(n + 1) * fraction) > floor((double)n * fraction);
}

/* Slot i's connection is a new one of its class: whether it hangs up (tcp.Flows.new_flow). */
static void made_new(Stream *s, int i) {
    const ConnPolicy *p = &s->policy[i];
    Conn *c = &s->conns[i];
    c->hangup = hangs_up(s->made[p->cls]++, p->hangup_fraction);
    c->ninflight = 0;
}

/* Whether c is done under its slot's policy (StreamFlow.spent). */
static int spent(const Stream *s, const Conn *c, long long now) {
    const ConnPolicy *p = &s->policy[c->slot];
    if (p->quota >= 0 && c->carried >= p->quota) return 1;
    return p->age_ns >= 0 && c->phase == UP && now - c->born_ns >= p->age_ns;
}

/* A free place for a retiring connection (one whose fd is closed), made when there is
 * none. Its index, or -1 with an exception set. conns may move: no Conn pointer lives
 * across this call. */
static int free_place(Stream *s) {
    int total = s->nconns + s->nplaces;
    for (int j = s->nconns; j < total; j++)
        if (s->conns[j].fd < 0) return j;
    int more = s->nplaces ? s->nplaces : 4;
    Conn *p = PyMem_Realloc(s->conns, (size_t)(total + more) * sizeof(Conn));
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    memset(p + total, 0, (size_t)more * sizeof(Conn));
    for (int j = total; j < total + more; j++) p[j].fd = -1;
    s->conns = p;
    s->nplaces += more;
    return total;
}

/* Slot i's spent connection retires to a place; the slot gets a new one, not yet
 * connected (tcp.Flows.retire). The place's closed connection lends its buffers to the
 * slot. 0, or -1 with an exception set. */
static int retire(Stream *s, int i) {
    int j = free_place(s);
    if (j < 0) return -1;
    Conn spare = s->conns[j];
    s->conns[j] = s->conns[i];
    Conn *old = &s->conns[j], *c = &s->conns[i];
    *c = spare;
    if (c->session != NULL) SSL_SESSION_free(c->session);
    c->session = NULL;
    /* what the old one was offered (a copy: _fastconn.h), unless it has a newer one */
    if (s->resume && old->session != NULL) c->session = SSL_SESSION_dup(old->session);
    if (s->resume && old->ssl != NULL) fastconn_keep_session(old->ssl, &c->session);
    c->slot = i;
    c->retry_ns = c->close_at_ns = 0;
    c->woff = c->wlen = c->ehead = c->nends = c->rlen = 0;
    c->carried = c->answered = 0;
    made_new(s, i);
    return watch(s, j, EPOLL_CTL_MOD) < 0 ? (PyErr_SetFromErrno(PyExc_OSError), -1) : 0;
}

/* The given slots: a spent connection retires, a closed one opens again (at most every
 * RECONNECT_NS). 0, or -1 with an exception set. */
static int renew(Stream *s, const int *slots, int n, long long now) {
    for (int k = 0; k < n; k++) {
        int i = slots ? slots[k] : k;
        if (s->conns[i].fd >= 0 && spent(s, &s->conns[i], now) && retire(s, i) < 0) return -1;
        reopen(s, i, now);
    }
    return 0;
}

/* A retired connection whose answers are in (or timed out) and whose idle time is over
 * (StreamFlow.due_to_close). */
static int due_to_close(Stream *s, Conn *c, long long now) {
    if (c->close_at_ns == 0) {
        if (c->answered < c->carried && now - c->last_send_ns < s->e.timeout_ns) return 0;
        c->close_at_ns = now + s->policy[c->slot].idle_ns;
    }
    return now >= c->close_at_ns;
}

/* A hang-up client resets at once, answers still due: its queries in flight end
 * abandoned (StreamFlow.hang_up); its TLS session is kept for the slot's next one. */
static void hang_up(Stream *s, int j) {
    Conn *c = &s->conns[j];
    struct linger reset = {.l_onoff = 1, .l_linger = 0}; /* close() sends a RST */
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    for (size_t k = 0; k < c->ninflight; k++)
        abandon(&s->e, (int)c->inflight[2 * k], c->inflight[2 * k + 1]);
    c->ninflight = 0;
    s->k.hung_up++;
    drop(s, j);
}

/* tcp.run_tcp's hang_ups: a hang-up client's spent slot retires (and its successor
 * opens), and a retired one whose last query has left resets, before any of its
 * answers is read. 0, or -1 with an exception set. */
static int hang_ups(Stream *s, long long now) {
    if (!s->hangups) return 0;
    for (int i = 0; i < s->nconns; i++) {
        Conn *c = &s->conns[i];
        if (!c->hangup || c->fd < 0 || !spent(s, c, now)) continue;
        if (retire(s, i) < 0) return -1;
        reopen(s, i, now);
    }
    for (int j = s->nconns; j < s->nconns + s->nplaces; j++) {
        Conn *c = &s->conns[j];
        if (c->fd >= 0 && c->hangup && c->phase == UP && c->woff >= c->wlen) hang_up(s, j);
    }
    return 0;
}

/* The class's next connection that is up and taking queries (its own round robin); one
 * still opening only if none is up; when every one is spent or down they are renewed
 * now, not next turn (tcp.run_tcp's pick). NULL when none takes queries, or with an
 * exception set (PyErr_Occurred). */
static Conn *pick(Stream *s, int cls, long long now) {
    const int *pool = s->pools[cls];
    int n = s->pool_len[cls];
    for (int attempt = 0; attempt < 2; attempt++) {
        int i = s->cursor[cls], opening = -1;
        for (int k = 0; k < n; k++) {
            Conn *c = &s->conns[pool[i]];
            int here = pool[i];
            i = i + 1 < n ? i + 1 : 0;
            if (c->fd < 0 || spent(s, c, now)) continue;
            if (c->phase == UP) {
                s->cursor[cls] = i;
                return c;
            }
            if (opening < 0) opening = here;
        }
        if (opening >= 0) return &s->conns[opening];
        if (attempt == 0 && renew(s, pool, n, now) < 0) return NULL;
    }
    return NULL;
}

/* churn: None (every class on every slot, connections that last), or (pools, policies):
 * per class the slots it sends on (conn.slot_plan), per slot (quota or -1, idle_ns,
 * age_ns or -1, hangup_fraction, its class). Sets nconns, the pools and the policies.
 * 0, or -1 with an exception. */
static int churn_setup(Stream *s, int flows, PyObject *churn) {
    int nc = s->e.nc;
    PyObject *pools = NULL, *policies = NULL;
    if (churn != Py_None) {
        if (!PyArg_ParseTuple(churn, "O!O!", &PyList_Type, &pools, &PyList_Type, &policies))
            return -1;
        if (PyList_GET_SIZE(pools) != nc || PyList_GET_SIZE(policies) < 1) {
            PyErr_SetString(PyExc_ValueError, "Engine: one pool per class, one policy per slot");
            return -1;
        }
        flows = (int)PyList_GET_SIZE(policies);
    }
    s->nconns = flows;
    s->policy = PyMem_Calloc((size_t)flows, sizeof(ConnPolicy));
    s->pools = PyMem_Calloc((size_t)nc, sizeof(int *));
    s->pool_len = PyMem_Calloc((size_t)nc, sizeof(int));
    s->cursor = PyMem_Calloc((size_t)nc, sizeof(int));
    s->made = PyMem_Calloc((size_t)nc, sizeof(long long));
    if (!s->policy || !s->pools || !s->pool_len || !s->cursor || !s->made) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < flows; i++) {
        ConnPolicy *p = &s->policy[i];
        p->quota = p->age_ns = -1;
        if (policies != NULL &&
            !PyArg_ParseTuple(PyList_GET_ITEM(policies, i), "LLLdi", &p->quota, &p->idle_ns,
                              &p->age_ns, &p->hangup_fraction, &p->cls))
            return -1;
        if (p->cls < 0 || p->cls >= nc) {
            PyErr_SetString(PyExc_ValueError, "Engine: a slot's class is out of range");
            return -1;
        }
        if (p->hangup_fraction > 0) s->hangups = 1;
    }
    for (int c = 0; c < nc; c++) {
        PyObject *pool = pools ? PyList_GET_ITEM(pools, c) : NULL;
        Py_ssize_t n = pool ? (PyList_Check(pool) ? PyList_GET_SIZE(pool) : -1) : flows;
        if (n < 1) {
            PyErr_SetString(PyExc_ValueError, "Engine: each class's pool is a list of slots");
            return -1;
        }
        s->pools[c] = PyMem_Calloc((size_t)n, sizeof(int));
        if (s->pools[c] == NULL) { PyErr_NoMemory(); return -1; }
        s->pool_len[c] = (int)n;
        for (Py_ssize_t k = 0; k < n; k++) {
            long i = pool ? PyLong_AsLong(PyList_GET_ITEM(pool, k)) : (long)k;
            if (i < 0 || i >= flows) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Engine: no such slot");
                return -1;
            }
            s->pools[c][k] = (int)i;
        }
    }
    return 0;
}

static void churn_free(Stream *s) {
    for (int c = 0; s->pools != NULL && c < s->e.nc; c++) PyMem_Free(s->pools[c]);
    PyMem_Free(s->pools);
    PyMem_Free(s->pool_len);
    PyMem_Free(s->cursor);
    PyMem_Free(s->made);
    PyMem_Free(s->policy);
}
