/* Part of soak.load._fastdoh (see the top of _fastdoh.c): the connections of a worker
 * (tcp.Flows: slots per class, retiring, reopening; a class's connection policy, churn
 * and hang-ups, by _fastchurn.h's rules) and the loop: sending what is due, reading
 * what epoll says is ready. Included once, by _fastdoh.c, after _fastdoh_conn.h. */

/* Whether c takes no more queries: told to go away, or done under its slot's policy
 * (StreamFlow.spent: a quota carried, an age reached; _fastchurn.h). */
static int conn_spent(DohEngine *d, const Conn *c, long long now) {
    return c->goaway ||
           policy_spent(&d->plan.policy[c->slot], c->carried, c->phase == UP, c->born_ns, now);
}

/* Slot i's spent connection retires: a new one takes the slot at once (so queries
 * never wait) and the old one closes once its answers are in and its idle time is over
 * (tcp.Flows.retire). Its requests in flight are still answered on it: it is closed,
 * not told to go away. */
static int retire(DohEngine *d, int i) {
    if (d->nretiring == d->retiring_cap) {
        int cap = d->retiring_cap ? d->retiring_cap * 2 : 8;
        Conn **r = realloc(d->retiring, (size_t)cap * sizeof *r);
        if (r == NULL) return PyErr_NoMemory(), -1;
        d->retiring = r;
        d->retiring_cap = cap;
    }
    Conn *old = d->flows[i], *fresh = conn_new(d);
    if (fresh == NULL) return PyErr_NoMemory(), -1;
    fresh->slot = i;
    fresh->hangup = plan_new_hangs_up(&d->plan, i);
    /* what the old one was offered (a copy: _fastconn.h), unless it has a newer one */
    if (d->resume && old->session) fresh->session = SSL_SESSION_dup(old->session);
    if (d->resume && old->ssl) fastconn_keep_session(old->ssl, &fresh->session);
    d->retiring[d->nretiring++] = old;
    d->flows[i] = fresh;
    return 0;
}

/* The given slots (all when NULL): a spent one retires, a closed one opens again (at
 * most every RECONNECT_NS). */
static int renew(DohEngine *d, const int *slots, int n, long long now) {
    for (int k = 0; k < n; k++) {
        int i = slots ? slots[k] : k;
        if (d->flows[i]->fd >= 0 && conn_spent(d, d->flows[i], now) && retire(d, i) < 0)
            return -1;
        if (d->flows[i]->fd < 0) conn_connect(d->flows[i], now);
    }
    return 0;
}

/* The class's next connection that is up and taking queries (its own round robin); one
 * still opening only if none is up: its queries leave once it is; when every one is
 * spent or down they are renewed now, not next turn (tcp.run_tcp's pick). */
static Conn *pick(DohEngine *d, int cls, long long now) {
    const int *pool = d->plan.pools[cls];
    int n = d->plan.pool_len[cls];
    for (int attempt = 0; attempt < 2; attempt++) {
        Conn *opening = NULL;
        int i = d->plan.cursor[cls];
        for (int k = 0; k < n; k++) {
            Conn *c = d->flows[pool[i]];
            i = i + 1 < n ? i + 1 : 0;
            if (!h2_accepting(c) || conn_spent(d, c, now)) continue;
            if (c->phase == UP) {
                d->plan.cursor[cls] = i;
                return c;
            }
            if (opening == NULL) opening = c;
        }
        if (opening != NULL) return opening;
        if (attempt == 0 && renew(d, pool, n, now) < 0) return NULL;
    }
    return NULL;
}

/* A hang-up client resets at once (TCP RST), answers still due: its requests in flight
 * end abandoned (StreamFlow.hang_up); its TLS session went to the slot's next one. */
static void hang_up(DohEngine *d, Conn *c) {
    struct linger reset = {.l_onoff = 1, .l_linger = 0}; /* close() sends a RST */
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    for (Stream *s = c->streams; s != NULL; s = s->next) abandon(&d->e, s->slot, s->sent_ns);
    d->hung_up++;
    conn_close(c);
}

/* tcp.run_tcp's hang_ups: a hang-up client's spent slot retires (and its successor
 * opens), and a retired one whose last request has left resets, before any of its
 * answers is read. 0, or -1 with an exception set. */
static int hang_ups(DohEngine *d, long long now) {
    if (!d->plan.hangups) return 0;
    for (int i = 0; i < d->nflows; i++) {
        Conn *c = d->flows[i];
        if (!c->hangup || c->fd < 0 || !conn_spent(d, c, now)) continue;
        if (retire(d, i) < 0) return -1;
        conn_connect(d->flows[i], now);
    }
    for (int i = 0; i < d->nretiring; i++) {
        Conn *c = d->retiring[i];
        if (c->fd >= 0 && c->hangup && c->phase == UP && c->wlen == 0) hang_up(d, c);
    }
    return 0;
}

static int opening_expired(Conn *c, long long now) {
    if (c->fd < 0 || c->phase == UP || now - c->start_ns < CONNECT_TIMEOUT_NS) return 0;
    c->d->errors++;
    return 1;
}

static int housekeeping(DohEngine *d, long long now) {
    for (int i = 0; i < d->nflows; i++)
        if (opening_expired(d->flows[i], now)) conn_close(d->flows[i]);
    if (renew(d, NULL, d->nflows, now) < 0 || hang_ups(d, now) < 0) return -1;
    int kept = 0;
    for (int i = 0; i < d->nretiring; i++) {
        Conn *c = d->retiring[i];
        if (opening_expired(c, now)) conn_close(c);
        if (c->fd < 0 || policy_close_due(&d->plan.policy[c->slot], &c->close_at_ns, c->carried,
                                          c->answered, c->last_send_ns, d->e.timeout_ns, now))
            conn_free(c);
        else d->retiring[kept++] = c;
    }
    d->nretiring = kept;
    return 0;
}

static int flush_all(DohEngine *d, Conn *c) {
    if (c->h2 && conn_push(c) < 0) {
        d->errors++;
        conn_close(c);
    }
    return 0;
}

/* Up to n due queries, each on the next connection taking queries; one due while none
 * is takes no connection and is lost (open loop: the schedule does not wait). Returns
 * how many were counted sent, or -1 with an exception set. */
static long long send_doh(DohEngine *d, long long n, long long now) {
    Engine *e = &d->e;
    long long done = 0;
    for (; done < n; done++) {
        int slot = take_slot(e, now);
        if (slot < 0) break;
        long long second = second_of_query(e, e->sent_total, now);
        long long base = window_base(e, second);
        if (base < 0) return -1;
        int cls;
        PyObject *q = next_question(e, &cls);
        if (q == NULL) return -1;
        Conn *c = pick(d, cls, now);
        if (c == NULL && PyErr_Occurred()) {
            Py_DECREF(q);
            return -1;
        }
        Stream *request = NULL; /* h2_submit puts a request it took first in c->streams */
        if (c != NULL) {
            int put = h2_submit(c, slot, PyBytes_AS_STRING(q), (size_t)PyBytes_GET_SIZE(q));
            if (put < 0) {
                Py_DECREF(q);
                PyErr_NoMemory();
                return -1;
            }
            if (put == 1) request = c->streams;
            c->carried++;
            c->last_send_ns = now;
        } else {
            e->send_failed++;
        }
        long long t = mono_ns(); /* its latency counts from here, as tcp.run_tcp's */
        if (request != NULL) request->sent_ns = t; /* what a hang-up abandons */
        ring_put(e, slot, cls, e->cur_second, base, q, t);
        e->sent_total++;
        e->outstanding++;
    }
    for (int i = 0; i < d->nflows; i++) flush_all(d, d->flows[i]);
    for (int i = 0; i < d->nretiring; i++) flush_all(d, d->retiring[i]);
    return hang_ups(d, now) < 0 ? -1 : done;
}

/* What epoll said about one connection: 0, or -1 with an exception set. */
static int on_event(DohEngine *d, Conn *c, uint32_t events) {
    if (c->fd < 0) return 0; /* closed earlier in this turn */
    if (c->phase != UP) {
        int step = conn_advance(c);
        if (step == -2) return -1;
        if (step == 1 && conn_flush(c) < 0) { /* what was queued while opening */
            d->errors++;
            conn_close(c);
        }
        return 0;
    }
    if ((events & EPOLLOUT) && conn_flush(c) < 0) {
        d->errors++;
        conn_close(c);
        return 0;
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return 0;
    int r = conn_read(c);
    if (r == -2) return -1;
    if (r == 0) { /* closed by the server: an error if answers were due */
        if (c->answered < c->carried && mono_ns() - c->last_send_ns < d->e.timeout_ns) d->errors++;
        conn_close(c);
    }
    return 0;
}

/* How many to send now (the UDP engine's Engine_run rules) and how long epoll may wait. */
static long long due_now(DohEngine *d, long long now, long long send_end, long long *timeout_ns) {
    Engine *e = &d->e;
    long long n = 0;
    *timeout_ns = 10000000LL;
    if (e->rate > 0) {
        long long due = due_by(now < send_end ? now : send_end - 1, e->rate, e->base_ns, e->base_k,
                               e->phase) - e->sent_total;
        if (due > 0) {
            n = due > SEND_BATCH ? SEND_BATCH : due;
            *timeout_ns = 0;
        } else if (e->rate >= 1000) {
            *timeout_ns = 500000; /* epoll rounds up to its 1 ms */
        } else {
            long long next = deadline_of(e, e->sent_total) - now;
            *timeout_ns = next < 0 ? 0 : next > 10000000LL ? 10000000LL : next;
        }
    } else {
        n = e->max_outstanding - e->outstanding;
        if (n > SEND_BATCH) n = SEND_BATCH;
        *timeout_ns = n > 0 ? 0 : 10000000LL;
    }
    return n;
}
