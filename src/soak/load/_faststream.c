/* The TCP and DoT loop of a load worker in C: soak.load._faststream.Engine.
 *
 * tcp.run_tcp's loop without the interpreter on the hot path. The id ring, the
 * windows, the matching of replies, the counters and the latency buckets are
 * _fastudp's, the same code (_fastudp_defs.h, _fastudp_loop.h, _fastengine.h are
 * included here too: one owner for each fact); what differs is the transport: `flows`
 * connections (_faststream_conn.h), each carrying pipelined queries with RFC 7766's
 * length prefix, over TCP or TLS (OpenSSL, non-blocking). A connection the server
 * closes is opened again by the housekeeping of the next turn, at most every
 * RECONNECT_NS while the server refuses; an opening that takes longer than
 * CONNECT_TIMEOUT_NS is dropped and counted as an error. A query due while no
 * connection is up is counted sent and fails at the socket (open loop: the schedule
 * does not wait for the server); it ends as lost after its timeout. Python keeps the
 * pacing, the control pipe and the per-second reports (stream_fast.py), as udp_fast.py
 * does.
 *
 * A class's connection policy may churn its connections (a quota of queries, an age,
 * an idle time before the close) and some of them may hang up (a reset as soon as the
 * last query has left, answers still due: abandoned): _faststream_churn.h.
 */
/* Without OpenSSL's headers the build says what to install, in one line, first; the
 * install goes on and workers run tcp.run_tcp (the extension is optional). */
#if !__has_include(<openssl/ssl.h>)
#error "soak: the compiled TCP/DoT load loop needs OpenSSL's headers: apt-get install libssl-dev"
#endif
#include "_fastudp_defs.h"
#include "_fastudp_loop.h"
#include "_fastengine.h"
#include "_faststream_conn.h"

#include "_fastchurn.h" /* the policies and slots: shared with the DoH loop */

typedef struct {
    Engine e; /* first: a Stream is an Engine to the shared code */
    Conn *conns; /* nconns slots, then nplaces places of retired connections (free: fd < 0) */
    int nconns, nplaces;
    ChurnPlan plan;  /* per slot its policy, per class its slots (_fastchurn.h) */
    SSL_CTX *ctx;     /* NULL: plain TCP */
    char *server_name;
    int resume;
    struct sockaddr_storage addr;
    socklen_t alen;
    ConnCounts k;
} Stream;

static int watch(Stream *s, int i, int op) {
    struct epoll_event ev = {.events = conn_events(&s->conns[i]), .data.u32 = (uint32_t)i};
    s->conns[i].out = (ev.events & EPOLLOUT) != 0;
    return epoll_ctl(s->e.epfd, op, s->conns[i].fd, &ev);
}

static void drop(Stream *s, int i) {
    Conn *c = &s->conns[i];
    if (c->fd < 0) return;
    epoll_ctl(s->e.epfd, EPOLL_CTL_DEL, c->fd, NULL);
    s->e.send_failed += conn_unwritten(c);
    conn_close(c, s->resume);
}

static void reopen(Stream *s, int i, long long now) {
    if (s->conns[i].fd >= 0) return;
    if (conn_connect(&s->conns[i], (struct sockaddr *)&s->addr, s->alen, now, &s->k) &&
        watch(s, i, EPOLL_CTL_ADD) < 0) {
        s->k.errors++;
        conn_close(&s->conns[i], 0);
    }
}

#include "_faststream_churn.h"

/* Queue n due queries (tcp.run_tcp's send step). Returns how many, -1 with an
 * exception set. Stops early only when the id ring is full. */
static long long queue_queries(Stream *s, long long n, long long now) {
    Engine *e = &s->e;
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
        char *qbuf;
        Py_ssize_t qlen;
        if (PyBytes_AsStringAndSize(q, &qbuf, &qlen) < 0) { Py_DECREF(q); return -1; }
        Conn *c = pick(s, cls, now);
        if (c == NULL && PyErr_Occurred()) { Py_DECREF(q); return -1; }
        if (c == NULL || conn_queue(c, slot, qbuf, (size_t)qlen, now) < 0) e->send_failed++;
        else if (c->hangup && conn_keep_inflight(c, slot, now) < 0) {
            Py_DECREF(q);
            PyErr_NoMemory();
            return -1;
        }
        ring_put(e, slot, cls, e->cur_second, base, q, now);
        e->sent_total++;
        e->outstanding++;
    }
    return done;
}

static void flush_all(Stream *s) {
    for (int i = 0; i < s->nconns + s->nplaces; i++) {
        Conn *c = &s->conns[i];
        if (c->phase != UP || c->woff >= c->wlen) continue;
        long long whole = conn_flush(c);
        if (whole < 0) {
            s->k.errors++;
            drop(s, i);
            continue;
        }
        s->e.sock_sent += whole;
        if ((c->woff < c->wlen) != c->out) watch(s, i, EPOLL_CTL_MOD); /* EPOLLOUT or not */
    }
}

/* The replies in a connection's read buffer, matched and counted. */
static int replies(Stream *s, Conn *c, long long now) {
    size_t pos = 0;
    while (c->rlen - pos >= 2) {
        size_t size = ((size_t)c->rbuf[pos] << 8) | c->rbuf[pos + 1];
        if (c->rlen - pos - 2 < size) break;
        c->answered++;
        s->e.sock_received++;
        if (on_reply(&s->e, c->rbuf + pos + 2, size, now) < 0) return -1;
        pos += 2 + size;
    }
    if (pos > 0) {
        memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
        c->rlen -= pos;
    }
    return 0;
}

/* What epoll said of connection i. -1 with an exception set. */
static int on_event(Stream *s, int i, uint32_t events) {
    Conn *c = &s->conns[i];
    if (c->fd < 0) return 0;
    if (c->phase != UP) {
        int r = conn_advance(c, s->ctx, s->server_name, s->resume, &s->k);
        if (r == -1) return -1;
        if (r == -2) { drop(s, i); return 0; } /* housekeeping opens it again */
        watch(s, i, EPOLL_CTL_MOD);
        if (r == 1) flush_all(s); /* what was queued while it opened */
        return 0;
    }
    if (events & EPOLLOUT) flush_all(s);
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || c->fd < 0) return 0;
    int r = conn_read(c);
    long long got = mono_ns();
    if (r == -2) { PyErr_NoMemory(); return -1; }
    if (r != 0 && replies(s, c, got) < 0) return -1;
    if (r == -1) { /* closed by the server: an error if answers were due */
        if (c->answered < c->carried && got - c->last_send_ns < s->e.timeout_ns) s->k.errors++;
        drop(s, i);
    }
    return 0;
}

/* An opening that took longer than CONNECT_TIMEOUT_NS is dropped (an error). */
static void expire(Stream *s, int i, long long now) {
    Conn *c = &s->conns[i];
    if (c->fd >= 0 && c->phase != UP && now - c->start_ns >= CONNECT_TIMEOUT_NS) {
        s->k.errors++;
        drop(s, i);
    }
}

/* tcp.run_tcp's housekeeping: openings that took too long dropped, the slots renewed
 * (spent ones retire, closed ones open again), hang-ups done, retired connections closed once due.
 * 0, or -1 with an exception set. */
static int housekeeping(Stream *s, long long now) {
    for (int i = 0; i < s->nconns; i++) expire(s, i, now);
    if (renew(s, NULL, s->nconns, now) < 0 || hang_ups(s, now) < 0) return -1;
    for (int j = s->nconns; j < s->nconns + s->nplaces; j++) {
        expire(s, j, now);
        if (s->conns[j].fd >= 0 && due_to_close(s, &s->conns[j], now)) drop(s, j);
    }
    return 0;
}

#include "_faststream_face.h"
