/* The replay's TCP and DoT loop in C: soak.load.replay._fastreplay_stream.Engine.
 *
 * _fastreplay.c's contract (play, drain, take, stats, shut; soak.load.replay._stream
 * drives it through _engine.run_compiled) over streams, as the Python replay keeps
 * them (_conns.py): each of a client's captured connections ("streams", numbered by
 * soak.load.replay._stream) is a connection of its own, opened at its first query,
 * reused while the client keeps asking, closed after idle_ns with nothing in flight,
 * and retired at a client's new loop with rename_clients (it closes once its answers
 * are in; the next query opens a new one). Queries leave at their due time in the
 * capture's order, pipelined with RFC 7766's length prefix and their captured flags,
 * and are matched by id and echoed question.
 *
 * Nothing here is a copy: the id ring, the windows (counts, rcodes, latency buckets),
 * the matching of replies and the sweep are the load engine's (_fastudp_defs.h,
 * _fastudp_loop.h, _fastengine.h), the connection (non-blocking connect, OpenSSL,
 * framing, the write and read buffers) _faststream_conn.h's, the TLS context
 * _fastconn.h's, the play loop _fastreplay_play.h's. A play step's queries are written
 * once per connection at its end (flush_step, _fastreplay_step.h, as the DoH replay's
 * and the load loop's batch). A connection the server
 * closes or breaks is dropped (its queries end lost at their timeout); the client's
 * next query opens another, as the Python replay's does (no throttle: each attempt
 * the server refuses is a connection error and its query a failed send). Sessions
 * are not resumed (the Python replay's connections do not either).
 */
#if !__has_include(<openssl/ssl.h>)
#error "soak: the compiled TCP/DoT replay loop needs OpenSSL's headers: apt-get install libssl-dev"
#endif
#include "../_fastudp_defs.h"
#include "../_fastudp_loop.h"
#include "../_fastengine.h"
#include "../_faststream_conn.h"
#include "_fastreplay_offsets.h"

#define NW 64                      /* open windows (as _fastreplay.c) */
#define BACKLOG_NS 1000000000LL    /* soak.load.worker.MAX_BACKLOG_S */
/* Sends before replies are read again: a step behind its plan then spans a client's
 * connection more than once (100 clients in turn: five queries each), and flush_step
 * writes them together (as _fastreplay_doh.c's). */
#define SEND_STEP 512
#define IDLE_SWEEP_NS 100000000LL  /* _conns.IDLE_SWEEP_NS */

/* A connection's queries in flight, (slot, send time) oldest first: one still waits
 * while the ring holds that time for its slot (ClientConns.in_flight). */
typedef struct {
    long long *v;
    size_t head, len, cap;
} Flight;

typedef struct {
    Engine e; /* first: the shared ring and window code sees an Engine */
    Conn *pool;   /* connections, live and free; epoll's data is the index */
    Flight *flight;
    int *owner;   /* per pool entry: its stream, -1 while free */
    char *retiring;
    char *stepped;  /* per pool entry: in this step's list (step) */
    int *free_list, nfree, npool;
    int nclients, nstreams, rename;
    int *qstream;         /* per captured query: its stream */
    int *cur;             /* per stream: its connection in the pool, -1: none */
    int *cfirst, *cstreams; /* client k's streams: cstreams[cfirst[k] .. cfirst[k+1]) */
    long long *cloop, *csent, *ccomp;
    int ring_k[RING];     /* the client of each id */
    SSL_CTX *ctx;
    char *server_name;
    struct sockaddr_storage addr;
    socklen_t alen;
    ConnCounts k;
    long long idle_ns, next_idle, reused, idled_out, late, open_fds, fds_peak;
    long long writes;     /* SSL_write or send calls that took bytes (writes()) */
    int step[SEND_STEP];  /* pool entries handed queries in this play step, each once */
    int nstep;
    Py_ssize_t handled;   /* queries of the last play() counted (sent or skipped) */
    PyObject *woff[NW];   /* per window slot: its queries' send offsets, {us: n} (three
                           * digits, as OffsetTotals keeps them), handed over with it */
} Replay;

static int flight_push(Flight *f, long long slot, long long t) {
    if (f->len == f->cap) { /* grow, oldest first again */
        size_t cap = f->cap ? f->cap * 2 : 16;
        long long *v = PyMem_Malloc(sizeof(long long) * 2 * cap);
        if (v == NULL) return -1;
        for (size_t i = 0; i < f->len; i++) {
            size_t j = (f->head + i) % f->cap;
            v[2 * i] = f->v[2 * j], v[2 * i + 1] = f->v[2 * j + 1];
        }
        PyMem_Free(f->v);
        f->v = v, f->cap = cap, f->head = 0;
    }
    size_t at = (f->head + f->len) % f->cap;
    f->v[2 * at] = slot, f->v[2 * at + 1] = t;
    f->len++;
    return 0;
}

/* Whether a query sent on pool entry i still waits for its answer (the ended ones at
 * the front are let go: what is left starts with one that waits). */
static int waiting(Replay *r, int i) {
    Flight *f = &r->flight[i];
    while (f->len && r->e.ring_t[f->v[2 * f->head]] != f->v[2 * f->head + 1]) {
        f->head = (f->head + 1) % f->cap;
        f->len--;
    }
    return f->len > 0;
}

static int watch(Replay *r, int i, int op) {
    Conn *c = &r->pool[i];
    struct epoll_event ev = {.events = conn_events(c), .data.u32 = (uint32_t)i};
    c->out = (ev.events & EPOLLOUT) != 0;
    return epoll_ctl(r->e.epfd, op, c->fd, &ev);
}

/* Pool entry i closed (what no socket took whole fails at it) and freed, its buffers
 * and its flight given back (conn_drop_buffers): what the pool holds follows the
 * connections open, not the most ever open at once. */
static void release(Replay *r, int i) {
    Conn *c = &r->pool[i];
    if (c->fd >= 0) {
        epoll_ctl(r->e.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        r->e.send_failed += conn_unwritten(c);
        conn_close(c, 0);
        r->open_fds--;
    }
    conn_drop_buffers(c);
    PyMem_Free(r->flight[i].v);
    r->flight[i].v = NULL;
    r->flight[i].cap = 0;
    int s = r->owner[i];
    if (s >= 0 && r->cur[s] == i) r->cur[s] = -1;
    r->owner[i] = -1;
    r->retiring[i] = 0;
    r->flight[i].len = r->flight[i].head = 0;
    r->free_list[r->nfree++] = i;
}

/* A free pool entry's index (the pool doubled when none is), -1 on no memory. */
static int pool_take(Replay *r) {
    if (r->nfree == 0) {
        int n = r->npool ? r->npool * 2 : 64;
        Conn *pool = PyMem_Realloc(r->pool, sizeof(Conn) * n);
        if (pool) r->pool = pool;
        Flight *fl = PyMem_Realloc(r->flight, sizeof(Flight) * n);
        if (fl) r->flight = fl;
        int *owner = PyMem_Realloc(r->owner, sizeof(int) * n);
        if (owner) r->owner = owner;
        char *ret = PyMem_Realloc(r->retiring, n);
        if (ret) r->retiring = ret;
        char *stepped = PyMem_Realloc(r->stepped, n);
        if (stepped) r->stepped = stepped;
        int *fr = PyMem_Realloc(r->free_list, sizeof(int) * n);
        if (fr) r->free_list = fr;
        if (!pool || !fl || !owner || !ret || !stepped || !fr) return -1;
        memset(pool + r->npool, 0, sizeof(Conn) * (n - r->npool));
        memset(fl + r->npool, 0, sizeof(Flight) * (n - r->npool));
        for (int i = n - 1; i >= r->npool; i--) {
            pool[i].fd = -1, owner[i] = -1, ret[i] = 0, stepped[i] = 0;
            r->free_list[r->nfree++] = i;
        }
        r->npool = n;
    }
    return r->free_list[--r->nfree];
}

/* Stream s's connection: its open one (reused), else a new one starting to open; -1
 * when none could even start (counted; the query fails at the socket). -2: no memory. */
static int stream_conn(Replay *r, int s, long long now) {
    int i = r->cur[s];
    if (i >= 0) {
        r->reused++;
        return i;
    }
    i = pool_take(r);
    if (i < 0) return -2;
    Conn *c = &r->pool[i];
    c->retry_ns = 0; /* a new connection of its own, as the Python replay's */
    if (!conn_connect(c, (struct sockaddr *)&r->addr, r->alen, now, &r->k)) {
        r->free_list[r->nfree++] = i;
        return -1;
    }
    if (watch(r, i, EPOLL_CTL_ADD) < 0) {
        r->k.errors++;
        conn_close(c, 0);
        r->free_list[r->nfree++] = i;
        return -1;
    }
    r->owner[i] = s;
    r->cur[s] = i;
    if (++r->open_fds > r->fds_peak) r->fds_peak = r->open_fds;
    return i;
}

/* What is queued on pool entry i written as far as the socket takes it (once up). */
static void flush_one(Replay *r, int i) {
    Conn *c = &r->pool[i];
    if (c->phase != UP || c->woff >= c->wlen) return;
    size_t queued = c->wlen - c->woff;
    long long whole = conn_flush(c);
    if (whole < 0) { /* broken: its queries end lost at their timeout */
        r->k.errors++;
        release(r, i);
        return;
    }
    if (c->wlen - c->woff < queued) r->writes++; /* the socket took bytes */
    r->e.sock_sent += whole;
    if ((c->woff < c->wlen) != c->out) watch(r, i, EPOLL_CTL_MOD); /* EPOLLOUT or not */
}

#include "_fastreplay_step.h" /* flush_step, step_add */

/* A client's new loop with rename_clients: its connections retire (each closes once
 * its answers are in), its next queries open new ones. */
static void retire_client(Replay *r, int client) {
    for (int j = r->cfirst[client]; j < r->cfirst[client + 1]; j++) {
        int s = r->cstreams[j], i = r->cur[s];
        if (i < 0) continue;
        r->cur[s] = -1;
        r->retiring[i] = 1;
    }
}

/* Query i framed on its stream's connection, with its captured flags. It waits in the
 * connection's buffer for the step's end (flush_step), microseconds later: its send
 * offset stays the time it is handed to the connection. */
static int write_query(Replay *r, Py_ssize_t i, int slot, const long long *v, PyObject *q,
                       long long t) {
    int flags = (int)v[4];
    char *qbuf = PyBytes_AS_STRING(q);
    size_t qlen = (size_t)PyBytes_GET_SIZE(q);
    int at = stream_conn(r, r->qstream[i], t);
    if (at == -2) { PyErr_NoMemory(); return -1; }
    if (at >= 0 && conn_queue(&r->pool[at], slot, qbuf, qlen, t) == 0) {
        Conn *c = &r->pool[at];
        unsigned char *frame = c->wbuf + c->wlen - (2 + HEADER_LEN + qlen);
        frame[4] = (unsigned char)(flags >> 8), frame[5] = (unsigned char)(flags & 255);
        if (flight_push(&r->flight[at], slot, t) < 0) { PyErr_NoMemory(); return -1; }
        step_add(r, at);
    } else { /* no connection, or one that cannot take more: sent, will be lost */
        r->e.send_failed++;
    }
    return 0;
}

#define SEND_ENGINE(r) (&(r)->e)
#include "_fastreplay_send.h"

/* The replies in a connection's read buffer, matched and counted: the late ones (after
 * their timeout) and each client's answered ones told apart here. */
static int replies(Replay *r, Conn *c, long long now) {
    Engine *e = &r->e;
    size_t pos = 0;
    while (c->rlen - pos >= 2) {
        size_t size = ((size_t)c->rbuf[pos] << 8) | c->rbuf[pos + 1];
        if (c->rlen - pos - 2 < size) break;
        const unsigned char *m = c->rbuf + pos + 2;
        long long done = e->completed_total, stray = e->unexpected;
        c->answered++;
        e->sock_received++;
        if (on_reply(e, m, size, now) < 0) return -1;
        if (e->completed_total != done)
            r->ccomp[r->ring_k[message_id(m)]]++;
        else if (e->unexpected == stray)
            r->late++; /* matched after its timeout: already lost */
        pos += 2 + size;
    }
    if (pos > 0) {
        memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
        c->rlen -= pos;
    }
    return 0;
}

/* What epoll said of pool entry i. -1 with an exception set. */
static int on_event(Replay *r, int i, uint32_t events) {
    Conn *c = &r->pool[i];
    if (c->fd < 0) return 0;
    if (c->phase != UP) {
        int got = conn_advance(c, r->ctx, r->server_name, 0, &r->k);
        if (got == -1) return -1;
        if (got == -2) { release(r, i); return 0; }
        watch(r, i, EPOLL_CTL_MOD);
        if (got == 1) flush_one(r, i); /* what was queued while it opened */
        return 0;
    }
    if (events & EPOLLOUT) flush_one(r, i);
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || c->fd < 0) return 0;
    int got = conn_read(c);
    long long now = mono_ns();
    if (got == -2) { PyErr_NoMemory(); return -1; }
    if (got != 0 && replies(r, c, now) < 0) return -1;
    if (got == -1) release(r, i); /* closed by the server: its queries end lost */
    return 0;
}

/* Waits for replies up to wait_ns (the GIL released meanwhile) and reads them. */
static int poll_once(Replay *r, long long wait_ns) {
    struct epoll_event evs[MAX_EVENTS];
    struct timespec ts = {wait_ns / 1000000000LL, wait_ns % 1000000000LL};
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = epoll_pwait2(r->e.epfd, evs, MAX_EVENTS, &ts, NULL);
    Py_END_ALLOW_THREADS
    for (int j = 0; j < n; j++)
        if (on_event(r, (int)evs[j].data.u32, evs[j].events) < 0) return -1;
    return 0;
}

/* Timeouts swept; openings past CONNECT_TIMEOUT_NS dropped (a connection error),
 * retired connections closed once answered; every IDLE_SWEEP_NS, connections idle for
 * idle_ns with nothing in flight closed (ClientConns.sweep and idle). */
static void housekeeping(Replay *r) {
    long long now = mono_ns();
    if (now < r->e.next_sweep) return;
    r->e.next_sweep = now + SWEEP_NS;
    sweep(&r->e, now, 0);
    int idle = now >= r->next_idle;
    if (idle) r->next_idle = now + IDLE_SWEEP_NS;
    for (int i = 0; i < r->npool; i++) {
        Conn *c = &r->pool[i];
        if (r->owner[i] < 0) continue;
        if (c->fd >= 0 && c->phase != UP && now - c->start_ns >= CONNECT_TIMEOUT_NS) {
            r->k.errors++;
            release(r, i);
        } else if (r->retiring[i] && !waiting(r, i)) {
            release(r, i);
        } else if (idle && !r->retiring[i] && now - c->last_send_ns > r->idle_ns &&
                   !waiting(r, i)) {
            r->idled_out++;
            release(r, i);
        }
    }
}

#define PLAY_STEP_END(r) flush_step(r)
#include "_fastreplay_stream_face.h"
