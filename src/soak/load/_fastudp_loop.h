/* Part of soak.load._fastudp (see the top of _fastudp.c): the windows and slots, the
 * sweep, sending, replies, and a window handed to Python. Included once, by _fastudp.c,
 * after _fastudp_defs.h. */


/* The index of a second's class-0 counters if it is open, else -1. */
static inline long long base_of(Engine *e, long long second) {
    long long slot = second & e->wmask;
    return e->wsec[slot] == second ? slot * e->nc : -1;
}

static inline void lose(Engine *e, int slot) {
    long long base = base_of(e, e->ring_w[slot]);
    if (base >= 0) e->cnt[(base + e->ring_c[slot]) * NCOUNT + LOST]++;
}

/* The client hung up with the query of this id (sent at sent_ns) in flight: neither
 * answered nor lost (Book.abandon). An id answered, timed out or reused since is left
 * alone. */
static inline void abandon(Engine *e, int slot, long long sent_ns) {
    if (e->ring_t[slot] != sent_ns) return;
    e->ring_t[slot] = 0;
    e->outstanding--;
    long long base = base_of(e, e->ring_w[slot]);
    if (base >= 0) e->cnt[(base + e->ring_c[slot]) * NCOUNT + ABANDONED]++;
}

static long long inflight(Engine *e, long long slot) {
    long long n = 0;
    for (int c = 0; c < e->nc; c++) {
        long long *v = e->cnt + (slot * e->nc + c) * NCOUNT;
        n += v[SENT] - v[COMPLETED] - v[LOST] - v[ABANDONED];
    }
    return n;
}

/* Open `second` (no earlier than closed_below); an older second still in its slot is
 * closed by force, its queries in flight lost. Returns its class-0 index, or -1 with
 * an exception set. */
static long long open_second(Engine *e, long long second) {
    if (second < e->closed_below) second = e->closed_below;
    long long slot = second & e->wmask;
    if (e->wsec[slot] != second) {
        if (e->wsec[slot] >= 0) {
            for (int c = 0; c < e->nc; c++) {
                long long *v = e->cnt + (slot * e->nc + c) * NCOUNT;
                v[LOST] += v[SENT] - v[COMPLETED] - v[LOST] - v[ABANDONED];
            }
            PyObject *w = window_of(e, (int)slot);
            if (w == NULL || PyList_Append(e->forced, w) < 0) {
                Py_XDECREF(w);
                return -1;
            }
            Py_DECREF(w);
        }
        e->wsec[slot] = second;
    }
    return slot * e->nc;
}

/* The counts' index (class 0) of the window of `second`, the one queries go into now:
 * the current one, else opened and made current. -1 with an exception set. */
static inline long long window_base(Engine *e, long long second) {
    long long base = second == e->cur_second ? base_of(e, second) : -1;
    if (base < 0) { /* a new second (or the last one was taken) */
        base = open_second(e, second);
        if (base < 0) return -1;
        e->cur_second = e->wsec[base / e->nc];
    }
    return base;
}

/* A query counted sent at `t`: its id's slot holds its time, class and window and takes
 * its question's reference; the window counts it. (The loops add it to sent_total and
 * outstanding, one at a time or a batch at once.) */
static inline void ring_put(Engine *e, int slot, int cls, long long window, long long base,
                            PyObject *q, long long t) {
    e->ring_t[slot] = t;
    e->ring_c[slot] = cls;
    e->ring_w[slot] = window;
    PyObject *old = e->ring_q[slot];
    e->ring_q[slot] = q;
    Py_XDECREF(old);
    e->cnt[(base + cls) * NCOUNT + SENT]++;
}

/* The grid second query k is due in (flat out: now's). */
static inline long long second_of_query(Engine *e, long long k, long long now) {
    long long due = now;
    if (e->rate > 0 && k >= e->base_k)
        due = deadline_of(e, k);
    long long d = due - e->origin_ns;
    return d >= 0 ? d / 1000000000LL : -((-d + 999999999LL) / 1000000000LL);
}

static int take_slot(Engine *e, long long now) {
    for (int i = 0; i < 16; i++) {
        int slot = (int)(e->seq & MASK);
        e->seq++;
        long long t = e->ring_t[slot];
        if (t <= 0) return slot;
        if (now - t > e->timeout_ns) { /* a straggler past its timeout: lost, reused */
            lose(e, slot);
            e->outstanding--;
            e->ring_t[slot] = 0;
            return slot;
        }
    }
    return -1;
}

static void sweep(Engine *e, long long now, int everything) {
    long long limit = now - e->timeout_ns;
    while (e->tail < e->seq) {
        int slot = (int)(e->tail & MASK);
        long long t = e->ring_t[slot];
        if (t > 0) {
            if (t > limit && !everything) break;
            lose(e, slot);
            e->outstanding--;
            e->ring_t[slot] = -t;
        }
        e->tail++;
    }
}

/* The next question of the mix: a new reference, or NULL with an exception set. */
static PyObject *next_question(Engine *e, int *cls) {
    int c = e->schedule[e->sched_i];
    if (++e->sched_i == e->slen) e->sched_i = 0;
    *cls = c;
    if (e->randoms[c] != NULL) return PyObject_CallNoArgs(e->randoms[c]);
    PyObject *list = e->questions[c];
    Py_ssize_t p = e->pos[c];
    PyObject *q = PyList_GET_ITEM(list, p);
    if (++p == PyList_GET_SIZE(list)) p = 0;
    e->pos[c] = p;
    Py_INCREF(q);
    return q;
}

/* Send up to n queries in chunks of CHUNK, one flow per chunk. Returns how many
 * left, or -1 with an exception set. Stops early when ids or buffer space run out. */
static long long send_queries(Engine *e, long long n, long long now) {
    unsigned char hdr[CHUNK][HEADER_LEN];
    struct iovec iov[CHUNK][2];
    struct mmsghdr msgs[CHUNK];
    PyObject *qs[CHUNK];
    int slots[CHUNK], cls[CHUNK];
    long long secs[CHUNK], bases[CHUNK];
    long long done = 0;
    while (done < n) {
        int k = 0, want = (int)(n - done < CHUNK ? n - done : CHUNK), stop = 0;
        for (; k < want; k++) {
            int slot = take_slot(e, now);
            if (slot < 0) { stop = 1; break; }
            long long second = second_of_query(e, e->sent_total + k, now) /* sent_total counts earlier chunks */;
            long long base = window_base(e, second);
            if (base < 0) {
                for (int j = 0; j < k; j++) Py_DECREF(qs[j]);
                return -1;
            }
            secs[k] = e->cur_second;
            bases[k] = base;
            PyObject *q = next_question(e, &cls[k]);
            if (q == NULL) {
                for (int j = 0; j < k; j++) Py_DECREF(qs[j]);
                return -1;
            }
            char *qbuf;
            Py_ssize_t qlen;
            if (PyBytes_AsStringAndSize(q, &qbuf, &qlen) < 0) {
                Py_DECREF(q);
                for (int j = 0; j < k; j++) Py_DECREF(qs[j]);
                return -1;
            }
            set_id(hdr[k], slot);
            memcpy(hdr[k] + 2, QUERY_AFTER_ID, sizeof QUERY_AFTER_ID);
            iov[k][0].iov_base = hdr[k];
            iov[k][0].iov_len = HEADER_LEN;
            iov[k][1].iov_base = qbuf;
            iov[k][1].iov_len = (size_t)qlen;
            memset(&msgs[k], 0, sizeof(msgs[k]));
            msgs[k].msg_hdr.msg_iov = iov[k];
            msgs[k].msg_hdr.msg_iovlen = 2;
            qs[k] = q;
            slots[k] = slot;
        }
        if (k == 0) break;
        int fd = e->fds[e->flow];
        if (++e->flow == e->nflows) e->flow = 0;
        long long t = mono_ns();
        int left = 0, refusals = 0;
        while (left < k) {
            int r = sendmmsg(fd, msgs + left, (unsigned)(k - left), 0);
            if (r > 0) {
                left += r;
                e->sock_sent += r;
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                stop = 1; /* the socket buffer is full: the rest is due but cannot leave */
                break;
            } else if (errno == EINTR) {
                continue;
            } else {
                /* ICMP unreachable from an earlier query (or another error): once more,
                 * then the message counts as sent and will time out. */
                e->refused++;
                if (++refusals > 1) { left++; refusals = 0; e->send_failed++; }
            }
        }
        for (int j = 0; j < k; j++) {
            if (j < left) {
                ring_put(e, slots[j], cls[j], secs[j], bases[j], qs[j], t);
            } else {
                Py_DECREF(qs[j]); /* its slot stays free (time 0) */
            }
        }
        e->sent_total += left;
        e->outstanding += left;
        done += left;
        if (stop || left < k) break;
    }
    return done;
}

static int on_reply(Engine *e, const unsigned char *data, size_t len, long long now) {
    if (len < HEADER_LEN) { e->unexpected++; return 0; }
    int slot = message_id(data);
    long long t = e->ring_t[slot];
    PyObject *q = e->ring_q[slot];
    if (t == 0 || q == NULL) { e->unexpected++; return 0; }
    Py_ssize_t qlen = PyBytes_GET_SIZE(q);
    if (!echoes(data, len, PyBytes_AS_STRING(q), (size_t)qlen)) {
        e->unexpected++;
        return 0;
    }
    int c = e->ring_c[slot];
    long long base = base_of(e, e->ring_w[slot]);
    e->ring_t[slot] = 0;
    if (t < 0 || now - t > e->timeout_ns || base < 0) {
        if (t > 0) {
            if (base >= 0) e->cnt[(base + c) * NCOUNT + LOST]++;
            e->outstanding--;
        }
        if (base < 0) base = base_of(e, e->cur_second);
        if (base >= 0) e->cnt[(base + c) * NCOUNT + LATE]++;
        return 0;
    }
    long long *v = e->cnt + (base + c) * NCOUNT;
    e->outstanding--;
    v[COMPLETED]++;
    e->completed_total++;
    e->lat[(size_t)(base + c) * NBUCKETS + bucket_of((unsigned long long)((now - t) / 1000))]++;
    v[RCODES + reply_rcode(data)]++;
    if (e->checks[c] != NULL) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
        if (b == NULL) return -1;
        PyObject *r = PyObject_CallFunction(e->checks[c], "On", b, qlen);
        Py_DECREF(b);
        if (r == NULL) return -1;
        int wrong = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (wrong < 0) return -1;
        v[WRONG] += wrong;
    }
    return 0;
}

static void answered(Engine *e, long long now) {
    long long gap = now - e->last_answer_ns;
    if (gap > e->max_gap_ns) {
        e->max_gap_ns = gap;
        e->max_gap_end_ns = now;
    }
    e->last_answer_ns = now;
}

static int read_replies(Engine *e, int fd) {
    for (;;) {
        for (int j = 0; j < RECV_BATCH; j++) e->rmsgs[j].msg_hdr.msg_flags = 0;
        int r = recvmmsg(fd, e->rmsgs, RECV_BATCH, MSG_DONTWAIT, NULL);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) e->refused++;
            return 0;
        }
        long long now = mono_ns();
        e->sock_received += r;
        for (int j = 0; j < r; j++) {
            if (on_reply(e, e->riov[j].iov_base, e->rmsgs[j].msg_len, now) < 0) return -1;
        }
        return 0; /* level-triggered epoll brings the socket back if more is queued */
    }
}

static int put_count(PyObject *d, unsigned long long key, long long n) {
    PyObject *k = PyLong_FromUnsignedLongLong(key), *v = PyLong_FromLongLong(n);
    int r = (k && v) ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return r;
}

/* The window in `slot`, emptied: (second, refused, [per class: (sent, completed, lost,
 * late, wrong, skipped, abandoned, {rcode: n}, {latency us: n})]). */
static PyObject *window_of(Engine *e, int slot) {
    PyObject *classes = PyList_New(e->nc);
    if (classes == NULL) return NULL;
    for (int c = 0; c < e->nc; c++) {
        size_t i = (size_t)slot * e->nc + c;
        long long *v = e->cnt + i * NCOUNT, *lat = e->lat + i * NBUCKETS;
        PyObject *rc = PyDict_New(), *lt = PyDict_New();
        int bad = rc == NULL || lt == NULL;
        for (int r = 0; r < 16 && !bad; r++)
            if (v[RCODES + r] && put_count(rc, (unsigned long long)r, v[RCODES + r]) < 0) bad = 1;
        if (!bad && v[COMPLETED]) {
            for (int b = 0; b < NBUCKETS; b++)
                if (lat[b] && put_count(lt, value_of(b), lat[b]) < 0) { bad = 1; break; }
        }
        PyObject *t = bad ? NULL
                          : Py_BuildValue("LLLLLLLOO", v[SENT], v[COMPLETED], v[LOST], v[LATE],
                                          v[WRONG], v[SKIPPED], v[ABANDONED], rc, lt);
        Py_XDECREF(rc);
        Py_XDECREF(lt);
        if (t == NULL) { Py_DECREF(classes); return NULL; }
        PyList_SET_ITEM(classes, c, t);
        if (v[COMPLETED]) memset(lat, 0, NBUCKETS * sizeof(long long));
        memset(v, 0, NCOUNT * sizeof(long long));
    }
    PyObject *out = Py_BuildValue("LLN", e->wsec[slot], e->wrefused[slot], classes);
    e->wrefused[slot] = 0;
    e->wsec[slot] = -1;
    return out;
}

