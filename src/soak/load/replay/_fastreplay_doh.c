/* The replay's DoH loop in C: soak.load.replay._fastreplay_doh.Engine.
 *
 * _fastreplay_stream.c's contract (play, drain, take, stats, conns, shut; driven by
 * soak.load.replay._stream through _engine.run_compiled) over HTTP/2, as the Python
 * replay keeps DoH (_conns.py with doh.DohFlow): each of a client's captured connections
 * ("streams", numbered by soak.load.replay._stream) is a DoH connection of its own,
 * opened at its first query, reused while the client keeps asking (at the server's
 * streams in flight, its requests wait on it for a stream: keeps_queries), closed after
 * idle_ns with nothing in flight, retired (closed once its answers are in) when the
 * server says GOAWAY (the requests it did not process moved once to the client's next
 * connection: send_elsewhere), or at a client's new loop with rename_clients. A query
 * is one request (POST, or GET with ?dns=, id 0 and RD as the Python replay's), many in
 * flight on a connection, and its answer is matched by its HTTP/2 stream (the stream's
 * ring slot set as the answer's id, then the load engine's on_reply).
 *
 * Nothing here is a copy: the id ring, the windows and the matching are the load
 * engine's (_fastudp's parts, through _fastdoh_defs.h), the connection, TLS (ALPN h2)
 * and the HTTP/2 session _fastdoh's (_fastdoh_defs.h, _fastdoh_h2.h, _fastdoh_conn.h:
 * this Replay begins with a DohEngine, so that code sees one), the play loop
 * _fastreplay_play.h's. A play step's requests are written once per connection at its
 * end (flush_step, through _fastdoh_conn.h's conn_push, as the load's batch). Sessions
 * are not resumed (the Python replay's are not either).
 */
#if !__has_include(<nghttp2/nghttp2.h>)
#error "soak: the compiled DoH replay loop needs nghttp2's headers: apt-get install libnghttp2-dev"
#elif !__has_include(<openssl/ssl.h>)
#error "soak: the compiled DoH replay loop needs OpenSSL's headers: apt-get install libssl-dev"
#else
#include "../_fastdoh_defs.h"
#include "../_fastdoh_h2.h"
#include "../_fastdoh_conn.h"
#include "_fastreplay_offsets.h"

#define NW 64                      /* open windows (as _fastreplay.c) */
#define BACKLOG_NS 1000000000LL    /* soak.load.worker.MAX_BACKLOG_S */
/* Sends before replies are read again: a step behind its plan then spans a client's
 * connection more than once (100 clients in turn: five requests each), and flush_step
 * writes them together (docs/benchmarks.md: a step of 64 took a write per query). */
#define SEND_STEP 512
#define IDLE_SWEEP_NS 100000000LL  /* _conns.IDLE_SWEEP_NS */

typedef struct {
    DohEngine d; /* first: _fastdoh's connection code sees a DohEngine, the ring an Engine */
    Conn **pool;  /* connections, live and free; a Conn's tag is its index */
    int *owner;   /* per pool entry: its stream, -1 while free */
    char *retiring;
    char *stepped;  /* per pool entry: in this step's list (step) */
    int *free_list, nfree, npool;
    int nclients, nstreams, rename;
    int *qstream;           /* per captured query: its stream */
    int *cur;               /* per stream: its connection in the pool, -1: none */
    int *sclient;           /* per stream: its client */
    int *cfirst, *cstreams; /* client k's streams: cstreams[cfirst[k] .. cfirst[k+1]) */
    long long *cloop, *csent, *ccomp;
    int ring_k[RING];       /* the client of each id */
    long long idle_ns, next_idle, reused, idled_out, open_fds, fds_peak;
    Py_ssize_t handled;     /* queries of the last play() counted (sent or skipped) */
    int step[SEND_STEP];    /* pool entries handed queries in this play step, each once */
    int nstep;
    PyObject *woff[NW];     /* per window slot: its queries' send offsets, {us: n} */
} Replay;

/* Whether a query sent on c may still be answered (tcp.Flows' retiring rule). */
static int waiting(Replay *r, Conn *c, long long now) {
    return c->answered < c->carried && now - c->last_send_ns < r->d.e.timeout_ns;
}

/* Pool entry i closed (its queries end lost at their timeout) and freed: its write
 * buffer and requests given back with the close (conn_close), so what the pool holds
 * follows the connections open (held()), as _fastreplay_stream.c's release. */
static void release(Replay *r, int i) {
    if (r->owner[i] < 0) return;
    conn_close(r->pool[i]);
    r->open_fds--;
    int s = r->owner[i];
    if (r->cur[s] == i) r->cur[s] = -1;
    r->owner[i] = -1;
    r->retiring[i] = 0;
    r->free_list[r->nfree++] = i;
}

/* A free pool entry's index (the pool doubled when none is), -1 on no memory. */
static int pool_take(Replay *r) {
    if (r->nfree == 0) {
        int n = r->npool ? r->npool * 2 : 64;
        Conn **pool = PyMem_Realloc(r->pool, sizeof(Conn *) * n);
        if (pool) r->pool = pool;
        int *owner = PyMem_Realloc(r->owner, sizeof(int) * n);
        if (owner) r->owner = owner;
        char *ret = PyMem_Realloc(r->retiring, n);
        if (ret) r->retiring = ret;
        char *stepped = PyMem_Realloc(r->stepped, n);
        if (stepped) r->stepped = stepped;
        int *fr = PyMem_Realloc(r->free_list, sizeof(int) * n);
        if (fr) r->free_list = fr;
        if (!pool || !owner || !ret || !stepped || !fr) return -1;
        for (int i = r->npool; i < n; i++) pool[i] = NULL;
        for (int i = n - 1; i >= r->npool; i--) {
            if ((pool[i] = conn_new(&r->d)) == NULL) return -1;
            pool[i]->tag = i, owner[i] = -1, ret[i] = 0, stepped[i] = 0;
            r->free_list[r->nfree++] = i;
        }
        r->npool = n;
    }
    return r->free_list[--r->nfree];
}

/* The replay's rule for a client's connection (not the load's h2_accepting, which moves
 * to another of its pool at the server's streams limit): it keeps taking the client's
 * queries until it closes or is told to go away. At the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS a request waits in nghttp2's queue on the connection
 * (nghttp2_session_mem_send opens a queued request's stream only below the peer's
 * limit), and leaves when an answer frees a stream, as an HTTP/2 client's does: the
 * replay adds no connection, and no TLS handshake, that the capture does not have. */
static int keeps_queries(Conn *c) {
    return c->fd >= 0 && !c->goaway;
}

/* Stream s's connection: its open one while it takes queries (reused), else (the old
 * one retired) a new one starting to open; -1 when none could even start (counted; the
 * query fails at the socket). -2: no memory. */
static int stream_conn(Replay *r, int s, long long now) {
    int i = r->cur[s];
    if (i >= 0 && keeps_queries(r->pool[i])) {
        r->reused++;
        return i;
    }
    if (i >= 0) { /* told to go away, or closed under it */
        r->cur[s] = -1;
        r->retiring[i] = 1;
    }
    i = pool_take(r);
    if (i < 0) return -2;
    Conn *c = r->pool[i];
    c->retry_ns = 0; /* a new connection of its own, as the Python replay's */
    if (!conn_connect(c, now)) {
        r->free_list[r->nfree++] = i;
        return -1;
    }
    r->owner[i] = s;
    r->cur[s] = i;
    if (++r->open_fds > r->fds_peak) r->fds_peak = r->open_fds;
    return i;
}

/* What the session has for pool entry i written as far as the socket takes it. */
static void flush_one(Replay *r, int i) {
    if (conn_push(r->pool[i]) < 0) { /* broken: its queries end lost */
        r->d.errors++;
        release(r, i);
    }
}

#include "_fastreplay_step.h" /* flush_step, step_add */

/* DohEngine.elsewhere: request s, which the server did not process as c goes away, on
 * its client's next connection (c retired, a new one opened if none is: stream_conn), a
 * query still (its ring slot, its send time, counted once at the socket). It leaves at
 * on_event's end (the step list: flush_step). 1 moved, 0 not (no connection could even
 * start, or the session refused it: lost at its timeout). */
static int send_elsewhere(Conn *c, Stream *s) {
    Replay *r = (Replay *)c->d;
    int owner = r->owner[c->tag];
    if (owner < 0) return 0;
    long long now = mono_ns(), reused = r->reused;
    int at = stream_conn(r, owner, now);
    r->reused = reused; /* a query already counted, not another on an open connection */
    if (at < 0) return 0;
    Conn *next = r->pool[at];
    if (h2_request(next, s) < 0) return 0;
    stream_unlink(s);
    stream_link(next, s);
    next->carried++;
    next->last_send_ns = now; /* in flight on it: not idle */
    step_add(r, at);
    return 1;
}

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

/* Query i as one request on its stream's connection (DoH sends RD, as the Python
 * replay's: the captured flags are not used). Its frames wait in the connection's
 * buffer for the step's end (flush_step), microseconds later: its send offset stays the
 * time it is handed to the connection, as before. */
static int write_query(Replay *r, Py_ssize_t i, int slot, const long long *v, PyObject *q,
                       long long t) {
    (void)v;
    int at = stream_conn(r, r->qstream[i], t);
    if (at == -2) { PyErr_NoMemory(); return -1; }
    if (at >= 0) {
        Conn *c = r->pool[at];
        if (h2_submit(c, slot, PyBytes_AS_STRING(q), (size_t)PyBytes_GET_SIZE(q)) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        if (c->streams != NULL && c->streams->slot == slot && !c->streams->left)
            c->streams->sent_ns = t; /* the ring's time: held past its timeout, dropped */
        c->carried++;
        c->last_send_ns = t;
        step_add(r, at);
    } else { /* no connection could even start: sent, will be lost */
        r->d.e.send_failed++;
    }
    return 0;
}

#define SEND_ENGINE(r) (&(r)->d.e)
#include "_fastreplay_send.h"

/* What epoll said of a connection: its answers read (all of one client's: the answered
 * ones counted to it). -1 with an exception set. */
static int on_event(Replay *r, Conn *c, uint32_t events) {
    int i = c->tag;
    if (r->owner[i] < 0 || c->fd < 0) return 0; /* closed earlier in this turn */
    if (c->phase != UP) {
        int step = conn_advance(c);
        if (step == -2) return -1;
        if (step == -1) release(r, i);
        else if (step == 1) flush_one(r, i); /* what was queued while it opened */
        return 0;
    }
    if (events & EPOLLOUT) {
        flush_one(r, i);
        if (r->owner[i] < 0) return 0;
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return 0;
    Engine *e = &r->d.e;
    long long done = e->completed_total;
    int got = conn_read(c);
    if (e->completed_total != done) {
        r->ccomp[r->sclient[r->owner[i]]] += e->completed_total - done;
    }
    if (got == -2) return -1;
    if (got == 0) release(r, i); /* closed by the server: its queries end lost */
    flush_step(r); /* requests moved off a connection going away (send_elsewhere) */
    return 0;
}

/* Waits for answers up to wait_ns (the GIL released meanwhile) and reads them. */
static int poll_once(Replay *r, long long wait_ns) {
    struct epoll_event evs[MAX_EVENTS];
    struct timespec ts = {wait_ns / 1000000000LL, wait_ns % 1000000000LL};
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = epoll_pwait2(r->d.e.epfd, evs, MAX_EVENTS, &ts, NULL);
    Py_END_ALLOW_THREADS
    for (int j = 0; j < n; j++)
        if (on_event(r, evs[j].data.ptr, evs[j].events) < 0) return -1;
    return 0;
}

/* Timeouts swept; openings past CONNECT_TIMEOUT_NS dropped (a connection error),
 * retired connections closed once answered; every IDLE_SWEEP_NS, connections idle for
 * idle_ns with nothing in flight closed (ClientConns.sweep and idle). */
static void housekeeping(Replay *r) {
    long long now = mono_ns();
    if (now < r->d.e.next_sweep) return;
    r->d.e.next_sweep = now + SWEEP_NS;
    sweep(&r->d.e, now, 0);
    int idle = now >= r->next_idle;
    if (idle) r->next_idle = now + IDLE_SWEEP_NS;
    for (int i = 0; i < r->npool; i++) {
        Conn *c = r->pool[i];
        if (r->owner[i] < 0) continue;
        if (c->fd < 0) {
            release(r, i);
        } else if (c->phase != UP && now - c->start_ns >= CONNECT_TIMEOUT_NS) {
            r->d.errors++;
            release(r, i);
        } else if (r->retiring[i] && !waiting(r, c, now)) {
            release(r, i);
        } else if (idle && !r->retiring[i] && now - c->last_send_ns > r->idle_ns &&
                   !waiting(r, c, now)) {
            r->idled_out++;
            release(r, i);
        }
    }
}

#define PLAY_STEP_END(r) flush_step(r)
#include "_fastreplay_doh_face.h"
#endif
