/* Part of soak.load._fastdoh (see the top of _fastdoh.c): the connections of a worker
 * (tcp.Flows: slots, retiring, reopening) and the loop: sending what is due, reading
 * what epoll says is ready. Included once, by _fastdoh.c, after _fastdoh_conn.h. */

/* Slot i's connection, told to go away, retires: a new one takes the slot at once (so
 * queries never wait) and the old one closes once its answers are in. */
static int retire(DohEngine *d, int i) {
    if (d->nretiring == d->retiring_cap) {
        int cap = d->retiring_cap ? d->retiring_cap * 2 : 8;
        Conn **r = realloc(d->retiring, (size_t)cap * sizeof *r);
        if (r == NULL) return -1;
        d->retiring = r;
        d->retiring_cap = cap;
    }
    Conn *old = d->flows[i], *fresh = conn_new(d);
    if (fresh == NULL) return -1;
    /* what the old one was offered (a copy: _fastconn.h), unless it has a newer one */
    if (d->resume && old->session) fresh->session = SSL_SESSION_dup(old->session);
    if (d->resume && old->ssl) fastconn_keep_session(old->ssl, &fresh->session);
    d->retiring[d->nretiring++] = old;
    d->flows[i] = fresh;
    return 0;
}

/* Every slot spent or down gets a new connection (at most every RECONNECT_NS). */
static int renew(DohEngine *d, long long now) {
    for (int i = 0; i < d->nflows; i++) {
        if (d->flows[i]->fd >= 0 && d->flows[i]->goaway && retire(d, i) < 0) return -1;
        if (d->flows[i]->fd < 0) conn_connect(d->flows[i], now);
    }
    return 0;
}

/* The next connection that is up and taking queries (round robin); one still opening
 * only if none is up: its queries leave once it is (tcp.run_tcp's pick). */
static Conn *pick(DohEngine *d, long long now) {
    for (int attempt = 0; attempt < 2; attempt++) {
        Conn *opening = NULL;
        int i = d->cursor;
        for (int k = 0; k < d->nflows; k++) {
            Conn *c = d->flows[i];
            i = i + 1 < d->nflows ? i + 1 : 0;
            if (!h2_accepting(c)) continue;
            if (c->phase == UP) {
                d->cursor = i;
                return c;
            }
            if (opening == NULL) opening = c;
        }
        if (opening != NULL) return opening;
        if (attempt == 0 && renew(d, now) < 0) return NULL;
    }
    return NULL;
}

static int opening_expired(Conn *c, long long now) {
    if (c->fd < 0 || c->phase == UP || now - c->start_ns < CONNECT_TIMEOUT_NS) return 0;
    c->d->errors++;
    return 1;
}

static int housekeeping(DohEngine *d, long long now) {
    for (int i = 0; i < d->nflows; i++)
        if (opening_expired(d->flows[i], now)) conn_close(d->flows[i]);
    if (renew(d, now) < 0) return -1;
    int kept = 0;
    for (int i = 0; i < d->nretiring; i++) {
        Conn *c = d->retiring[i];
        if (opening_expired(c, now)) conn_close(c);
        int done = c->answered >= c->carried || now - c->last_send_ns >= d->e.timeout_ns;
        if (c->fd < 0 || done) conn_free(c);
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
        Conn *c = pick(d, now);
        if (c != NULL) {
            if (h2_submit(c, slot, PyBytes_AS_STRING(q), (size_t)PyBytes_GET_SIZE(q)) < 0) {
                Py_DECREF(q);
                PyErr_NoMemory();
                return -1;
            }
            c->carried++;
            c->last_send_ns = now;
        } else {
            e->send_failed++;
        }
        ring_put(e, slot, cls, e->cur_second, base, q, mono_ns());
        e->sent_total++;
        e->outstanding++;
    }
    for (int i = 0; i < d->nflows; i++) flush_all(d, d->flows[i]);
    for (int i = 0; i < d->nretiring; i++) flush_all(d, d->retiring[i]);
    return done;
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
