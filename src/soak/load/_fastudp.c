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
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING 65536
#define MASK (RING - 1)
#define CHUNK 16          /* queries per sendmmsg, all on one flow */
#define SEND_BATCH 64     /* queries per send step before replies are read again */
#define RECV_BATCH 64     /* datagrams per recvmmsg */
#define MAX_EVENTS 256
#define SWEEP_NS 10000000LL
/* Latency buckets (us): exact below 2048, then 1024 per power of two (hdrh's
 * resolution at 3 significant digits); values are capped at 2^32 - 1 us. */
#define EXACT 2048
#define NBUCKETS (EXACT + 21 * 1024)
/* Counters of one class in one window: sent, completed, lost, late, wrong, skipped,
 * then 16 rcodes. */
enum { SENT, COMPLETED, LOST, LATE, WRONG, SKIPPED, RCODES, NCOUNT = RCODES + 16 };

typedef struct {
    PyObject_HEAD
    int epfd;
    int *fds;
    int nflows;
    int flow;
    int nc;
    PyObject **questions;   /* per class: a list of bytes, or NULL for a random class */
    PyObject **randoms;     /* per class: a callable giving a fresh question, or NULL */
    PyObject **checks;      /* per class: check(reply, question_len) -> wrong?, or NULL */
    Py_ssize_t *pos;        /* per class: next question of its list */
    int *schedule;
    Py_ssize_t slen;
    Py_ssize_t sched_i;
    long long timeout_ns;
    long long max_outstanding;
    long long seq, tail, outstanding, sent_total, next_sweep;
    long long ring_t[RING];
    int ring_c[RING];
    long long ring_w[RING]; /* the grid second each query was due in */
    PyObject *ring_q[RING];
    /* the open windows: nw slots of nc classes of NCOUNT counters and NBUCKETS buckets */
    int nw;
    long long wmask, origin_ns, closed_below, cur_second;
    long long *wsec;   /* the second each slot holds, -1: none */
    long long *cnt;    /* ((slot * nc) + c) * NCOUNT + field */
    long long *lat;    /* ((slot * nc) + c) * NBUCKETS + bucket */
    long long *wrefused; /* per slot: ICMP errors seen while it was being sent */
    PyObject *forced;  /* windows closed by force, not yet taken (a list) */
    /* the pacing of the current run() call: query k is due at base + (k - base_k) / rate */
    double rate;
    long long base_ns, base_k;
    double phase;
    /* counts of the current interval */
    long long unexpected, refused;
    /* Silences between replies (a service swap under load), as Book.answered: the
     * last answer and the longest gap of the interval, updated once per wake. */
    long long last_answer_ns, max_gap_ns, max_gap_end_ns, completed_total;
    size_t recv_bytes;
    unsigned char *rbuf;
    struct mmsghdr rmsgs[RECV_BATCH];
    struct iovec riov[RECV_BATCH];
} Engine;

/* wire.py in C (see the top of this file). */
#define HEADER_LEN 12
/* wire.HEADER after its 2-byte id: flags RD, one question, no other sections. */
static const unsigned char QUERY_AFTER_ID[HEADER_LEN - 2] = {0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};

static inline void set_id(unsigned char *msg, int id) {
    msg[0] = (unsigned char)(id >> 8);
    msg[1] = (unsigned char)(id & 255);
}

static inline int message_id(const unsigned char *msg) { return (msg[0] << 8) | msg[1]; }

static inline int reply_rcode(const unsigned char *msg) { return msg[3] & 15; }

static inline int echoes(const unsigned char *reply, size_t len, const char *q, size_t qlen) {
    return len >= HEADER_LEN + qlen && memcmp(reply + HEADER_LEN, q, qlen) == 0;
}

static inline long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int bucket_of(unsigned long long us) {
    if (us < EXACT) return (int)us;
    if (us > 0xffffffffULL) us = 0xffffffffULL;
    int e = 63 - __builtin_clzll(us) - 10;
    return EXACT + (e - 1) * 1024 + (int)((us >> e) - 1024);
}

static inline unsigned long long value_of(int b) {
    if (b < EXACT) return (unsigned long long)b;
    int e = (b - EXACT) / 1024 + 1;
    return ((unsigned long long)((b - EXACT) % 1024 + 1024)) << e;
}

/* Query k of the schedule is due at base + (k - base_k) / rate; this is how
 * many should have left by now (Pacer.due). */
static inline long long due_by(long long now, double rate, long long base_ns, long long base_k,
                               double phase) {
    if (rate <= 0 || now < base_ns) return base_k;
    return base_k + (long long)floor((double)(now - base_ns) * rate / 1e9 - phase) + 1;
}

/* When query k is due (Pacer.deadline_ns). */
static inline long long deadline_of(Engine *e, long long k) {
    return e->base_ns + (long long)ceil(((double)(k - e->base_k) + e->phase) * 1e9 / e->rate);
}

static PyObject *window_of(Engine *e, int slot);

/* The index of a second's class-0 counters if it is open, else -1. */
static inline long long base_of(Engine *e, long long second) {
    long long slot = second & e->wmask;
    return e->wsec[slot] == second ? slot * e->nc : -1;
}

static inline void lose(Engine *e, int slot) {
    long long base = base_of(e, e->ring_w[slot]);
    if (base >= 0) e->cnt[(base + e->ring_c[slot]) * NCOUNT + LOST]++;
}

static long long inflight(Engine *e, long long slot) {
    long long n = 0;
    for (int c = 0; c < e->nc; c++) {
        long long *v = e->cnt + (slot * e->nc + c) * NCOUNT;
        n += v[SENT] - v[COMPLETED] - v[LOST];
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
                v[LOST] += v[SENT] - v[COMPLETED] - v[LOST];
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
            long long base = second == e->cur_second ? base_of(e, second) : -1;
            if (base < 0) { /* a new second (or the last one was taken) */
                base = open_second(e, second);
                if (base < 0) {
                    for (int j = 0; j < k; j++) Py_DECREF(qs[j]);
                    return -1;
                }
                e->cur_second = e->wsec[base / e->nc];
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
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                stop = 1; /* the socket buffer is full: the rest is due but cannot leave */
                break;
            } else if (errno == EINTR) {
                continue;
            } else {
                /* ICMP unreachable from an earlier query (or another error): once more,
                 * then the message counts as sent and will time out. */
                e->refused++;
                if (++refusals > 1) { left++; refusals = 0; }
            }
        }
        for (int j = 0; j < k; j++) {
            if (j < left) {
                int slot = slots[j], c = cls[j];
                e->ring_t[slot] = t;
                e->ring_c[slot] = c;
                e->ring_w[slot] = secs[j];
                PyObject *old = e->ring_q[slot];
                e->ring_q[slot] = qs[j]; /* the ring keeps the reference */
                Py_XDECREF(old);
                e->cnt[(bases[j] + c) * NCOUNT + SENT]++;
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
        for (int j = 0; j < r; j++) {
            if (on_reply(e, e->riov[j].iov_base, e->rmsgs[j].msg_len, now) < 0) return -1;
        }
        return 0; /* level-triggered epoll brings the socket back if more is queued */
    }
}

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

static int put_count(PyObject *d, unsigned long long key, long long n) {
    PyObject *k = PyLong_FromUnsignedLongLong(key), *v = PyLong_FromLongLong(n);
    int r = (k && v) ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return r;
}

/* The window in `slot`, emptied: (second, refused, [per class: (sent, completed, lost,
 * late, wrong, skipped, {rcode: n}, {latency us: n})]). */
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
                          : Py_BuildValue("LLLLLLOO", v[SENT], v[COMPLETED], v[LOST], v[LATE],
                                          v[WRONG], v[SKIPPED], rc, lt);
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
 *                         max_gap_end_ns)
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
    PyObject *out = Py_BuildValue("NLLLLL", windows, e->closed_below, e->unexpected, e->refused,
                                  e->max_gap_ns, e->max_gap_end_ns);
    if (out != NULL) {
        e->unexpected = e->refused = 0;
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
     "max_gap_end_ns): the windows closed by now; resets the interval's counts"},
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
