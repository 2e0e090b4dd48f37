/* Part of soak.load._faststream (see the top of _faststream.c): which connections carry
 * which class, and connections that churn on purpose (tcp.Flows and conn.StreamFlow's
 * policy in C). A class's connection policy (conn.Policy) closes its connection after
 * `quota` queries or at `age_ns` since it came up: the connection is spent, takes no
 * more queries, and retires: a new one takes its slot at once (offered the old one's
 * TLS session), the old one moves to a place of its own and closes once its answers
 * are in (or their timeout passed) and `idle_ns` more have gone by. Of a class's
 * connections, `hangup_fraction` are hang-up clients (spread evenly: hangs_up): once
 * spent and their last query has left, they reset (TCP RST) with answers still due,
 * whose queries end abandoned (StreamFlow.hang_up). The rules (spent, due to close,
 * hangs_up, the slots per class) are _fastchurn.h's, shared with the DoH loop; here,
 * what they do to this loop's connections. Included once, by _faststream.c, after the
 * Stream type. */

/* Slot i's connection is a new one of its class: whether it hangs up (tcp.Flows.new_flow). */
static void made_new(Stream *s, int i) {
    Conn *c = &s->conns[i];
    c->hangup = plan_new_hangs_up(&s->plan, i);
    c->ninflight = 0;
}

/* Whether c is done under its slot's policy (StreamFlow.spent). */
static int spent(const Stream *s, const Conn *c, long long now) {
    return policy_spent(&s->plan.policy[c->slot], c->carried, c->phase == UP, c->born_ns, now);
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
    return policy_close_due(&s->plan.policy[c->slot], &c->close_at_ns, c->carried, c->answered,
                            c->last_send_ns, s->e.timeout_ns, now);
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
    if (!s->plan.hangups) return 0;
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
    const int *pool = s->plan.pools[cls];
    int n = s->plan.pool_len[cls];
    for (int attempt = 0; attempt < 2; attempt++) {
        int i = s->plan.cursor[cls], opening = -1;
        for (int k = 0; k < n; k++) {
            Conn *c = &s->conns[pool[i]];
            int here = pool[i];
            i = i + 1 < n ? i + 1 : 0;
            if (c->fd < 0 || spent(s, c, now)) continue;
            if (c->phase == UP) {
                s->plan.cursor[cls] = i;
                return c;
            }
            if (opening < 0) opening = here;
        }
        if (opening >= 0) return &s->conns[opening];
        if (attempt == 0 && renew(s, pool, n, now) < 0) return NULL;
    }
    return NULL;
}

/* churn: None or (pools, policies) (_fastchurn.h: churn_plan_setup); sets nconns. 0, or
 * -1 with an exception. */
static int churn_setup(Stream *s, int flows, PyObject *churn) {
    if (churn_plan_setup(&s->plan, s->e.nc, flows, churn) < 0) return -1;
    s->nconns = s->plan.nslots;
    return 0;
}

static void churn_free(Stream *s) { churn_plan_free(&s->plan); }
