/* The replay's UDP send and reply loop in C: soak.load.replay._fastreplay.Engine.
 *
 * The plan (which query, when, which client, which name) stays Python
 * (soak.load.replay._plan) and is computed ahead: play() reads the capture's
 * queries as four int64 each (due in the loop, client, class, flags), a loop's start
 * and the loop's questions (bytes, renamed or not), in batches. Here: each client's
 * connected UDP socket (opened at its first query, opened again at a new loop with
 * rename_clients, closed after idle_ns with nothing in flight; at a new loop the old
 * one is still read until the timeout has passed since its last query, so that no
 * answer in flight is lost to a port the replay closed), each query sent
 * at its time, the replies read with recvmmsg from every socket epoll says is
 * ready, matched by id and echoed question (the id ring, as Replay's in _loop.py,
 * slot for slot), and the one-second windows' counts (due, sent, skipped,
 * completed, lost, rcodes, per class) and latencies kept here, in
 * soak.histogram's buckets (exact below 256 us, 128 per power of two above), and
 * the queries' send offsets in soak.load.replay._result.OffsetTotals' buckets (three
 * significant digits), both handed back per closed window (take()): the sending loop
 * builds no Python object per query or per batch. Every rule of the count is Replay's:
 * a query more than 1 s behind is due and skipped; one past its timeout is lost,
 * a reply after it late; a window closes once its second is passed and nothing
 * due in it is in flight.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RING 65536
#define NW 64             /* open windows: a window lives its second, 1 s of backlog, the timeout */
#define NB 3456           /* soak.histogram buckets up to 2^32 us */
#define RECV_BATCH 32
#define RECV_BYTES 2048   /* the header and the question are all that is read of a reply */
#define MAX_EVENTS 256
#define SWEEP_NS 10000000LL
#define BACKLOG_NS 1000000000LL /* soak.load.worker.MAX_BACKLOG_S */
#define SEND_STEP 64      /* sends before replies are read again */
#define IDLE_SWEEP_NS 100000000LL /* idle sockets looked for this often (_conns.IDLE_SWEEP_NS) */
#define OLD_SOCKET 0x80000000u    /* in a socket's epoll data: a client's socket of its last loop */
/* _result.OffsetTotals' buckets: exact below 1 ms, 900 a decade above, up to 1,000 s */
#define OFF_EXACT 1000
#define OFF_DECADES 6
#define NOFF (OFF_EXACT + 900 * OFF_DECADES)
enum { DUE, SENT, SKIPPED, COMPLETED, LOST, RC0, NCOUNT = RC0 + 16 };

typedef struct {
    PyObject_HEAD
    int epfd, nclients, nc, rename, overflow;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int *fd;
    int *ofd;           /* per client: its socket of the loop before, still read, or -1 */
    long long *ountil;  /* ... until then: its last query's timeout */
    long long *cloop, *csent, *clost;
    long long *clast, *cinfl; /* per client: its last send, its queries in flight */
    long long idle_ns, next_idle, open_fds, fds_peak;
    long long socket_errors; /* sockets that could not be opened (out of descriptors) */
    /* the sockets' own counts (soak.load.stats.SocketCounts): datagrams the kernel
     * took, queries counted sent it refused (or with no socket), datagrams read */
    long long socket_sent, send_failed, socket_received;
    long long timeout_ns, inflight, unexpected, late, next_sweep;
    int next_slot;
    Py_ssize_t handled; /* queries of the last play() counted (sent or skipped) */
    long long ring_t[RING]; /* send time > 0 in flight, negated once lost, 0 answered */
    int ring_c[RING], ring_k[RING];
    long long ring_w[RING];
    PyObject *ring_q[RING];
    long long *order; /* (send time, slot) pairs, oldest first: the sweep's queue */
    size_t ocap, ohead, olen;
    long long wsec[NW], winfl[NW];
    long long *cnt;     /* ((w * nc) + c) * NCOUNT + field */
    unsigned int *lat;  /* ((w * nc) + c) * NB + bucket */
    unsigned int *off;  /* w * NOFF + bucket: the send offsets of the queries due in w */
    unsigned char rbuf[RECV_BATCH][RECV_BYTES];
    struct mmsghdr rmsgs[RECV_BATCH];
    struct iovec riov[RECV_BATCH];
} Engine;

static inline long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* soak.histogram.bucket_of and the lowest value of a bucket (bucket_range). */
static inline int bucket_of(unsigned long long us) {
    if (us > 0xffffffffULL) us = 0xffffffffULL;
    int bits = us ? 64 - __builtin_clzll(us) : 0;
    int shift = bits > 8 ? bits - 8 : 0;
    return ((shift + 1) << 7) + (int)(us >> shift) - 128;
}

static inline long long bucket_low(int b) {
    int shift = (b >> 7) - 1;
    long long sub = (b & 127) + 128;
    if (shift < 0) return sub - 128;
    return sub << shift;
}

/* _result._bucket of _result.three_digits(us) (exact below 1 ms, three significant
 * digits above), and the value a bucket stands for (_result._bucket_us). */
static inline int off_bucket(long long us) {
    if (us < OFF_EXACT) return us < 0 ? 0 : (int)us;
    int digits = 0;
    while (us >= 1000) us /= 10, digits++;
    if (digits > OFF_DECADES) return NOFF - 1;
    return OFF_EXACT + (digits - 1) * 900 + (int)us - 100;
}

static inline long long off_value(int b) {
    if (b < OFF_EXACT) return b;
    long long v = (b - OFF_EXACT) % 900 + 100;
    for (int d = (b - OFF_EXACT) / 900 + 1; d > 0; d--) v *= 10;
    return v;
}

static long long *counts(Engine *e, long long second, int c) {
    int w = (int)(second & (NW - 1));
    if (e->wsec[w] != second) {
        if (e->wsec[w] != -1) e->overflow = 1; /* a window open past NW seconds: said by play() */
        e->wsec[w] = second;
        e->winfl[w] = 0;
        memset(e->cnt + (size_t)w * e->nc * NCOUNT, 0, sizeof(long long) * e->nc * NCOUNT);
        memset(e->lat + (size_t)w * e->nc * NB, 0, sizeof(unsigned int) * e->nc * NB);
        memset(e->off + (size_t)w * NOFF, 0, sizeof(unsigned int) * NOFF);
    }
    return e->cnt + ((size_t)w * e->nc + c) * NCOUNT;
}

/* Replay.end_query: a query in flight ends completed (latency, rcode) or lost. */
static void end_query(Engine *e, int slot, int how, long long now, int rcode) {
    long long t = e->ring_t[slot];
    if (t <= 0) return;
    e->ring_t[slot] = how == LOST ? -t : 0;
    if (how == LOST) e->clost[e->ring_k[slot]]++;
    e->cinfl[e->ring_k[slot]]--;
    long long second = e->ring_w[slot];
    int c = e->ring_c[slot], w = (int)(second & (NW - 1));
    long long *n = counts(e, second, c);
    e->winfl[w]--;
    e->inflight--;
    n[how]++;
    if (how == COMPLETED) {
        n[RC0 + rcode]++;
        e->lat[((size_t)w * e->nc + c) * NB + bucket_of((unsigned long long)(now - t) / 1000)]++;
    }
}

static void on_reply(Engine *e, const unsigned char *m, size_t len, long long now) {
    if (len < 12) {
        e->unexpected++;
        return;
    }
    int slot = (m[0] << 8) | m[1];
    long long t = e->ring_t[slot];
    PyObject *q = e->ring_q[slot];
    Py_ssize_t qlen = q ? PyBytes_GET_SIZE(q) : 0;
    if (t == 0 || q == NULL || len < 12 + (size_t)qlen ||
        memcmp(m + 12, PyBytes_AS_STRING(q), (size_t)qlen) != 0) {
        e->unexpected++;
        return;
    }
    if (t < 0 || now - t > e->timeout_ns) { /* after its timeout: late, already lost */
        end_query(e, slot, LOST, now, 0);
        e->late++;
        e->ring_t[slot] = 0;
        return;
    }
    end_query(e, slot, COMPLETED, now, m[3] & 15);
}

static void read_client(Engine *e, int fd) {
    for (;;) {
        int got = recvmmsg(fd, e->rmsgs, RECV_BATCH, MSG_DONTWAIT, NULL);
        if (got <= 0) return; /* drained, or an ICMP error: the query ends lost at its timeout */
        long long now = mono_ns();
        e->socket_received += got; /* every datagram read, stray ones included */
        for (int i = 0; i < got; i++)
            on_reply(e, e->rbuf[i], e->rmsgs[i].msg_len, now);
        if (got < RECV_BATCH) return;
    }
}

/* Waits for replies up to wait_ns (the GIL released meanwhile) and reads them. */
static void poll_once(Engine *e, long long wait_ns) {
    struct epoll_event evs[MAX_EVENTS];
    struct timespec ts = {wait_ns / 1000000000LL, wait_ns % 1000000000LL};
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = epoll_pwait2(e->epfd, evs, MAX_EVENTS, &ts, NULL);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < n; i++) { /* a socket closed earlier in this turn: -1, skipped */
        unsigned u = evs[i].data.u32;
        int k = (int)(u & ~OLD_SOCKET), fd = (u & OLD_SOCKET) ? e->ofd[k] : e->fd[k];
        if (fd >= 0) read_client(e, fd);
    }
}

static void sweep(Engine *e, long long now) {
    while (e->olen && now - e->order[2 * e->ohead] > e->timeout_ns) {
        long long t = e->order[2 * e->ohead];
        int slot = (int)e->order[2 * e->ohead + 1];
        e->ohead = (e->ohead + 1) % e->ocap;
        e->olen--;
        if (e->ring_t[slot] == t) end_query(e, slot, LOST, now, 0);
    }
}

static int push_order(Engine *e, long long t, int slot) {
    if (e->olen == e->ocap) { /* grow, oldest first again */
        size_t cap = e->ocap * 2;
        long long *o = PyMem_Malloc(sizeof(long long) * 2 * cap);
        if (!o) return -1;
        for (size_t i = 0; i < e->olen; i++) {
            size_t j = (e->ohead + i) % e->ocap;
            o[2 * i] = e->order[2 * j];
            o[2 * i + 1] = e->order[2 * j + 1];
        }
        PyMem_Free(e->order);
        e->order = o;
        e->ocap = cap;
        e->ohead = 0;
    }
    size_t at = (e->ohead + e->olen) % e->ocap;
    e->order[2 * at] = t;
    e->order[2 * at + 1] = slot;
    e->olen++;
    return 0;
}

static int take_slot(Engine *e) {
    for (int i = 0; i < RING; i++) {
        int slot = e->next_slot;
        e->next_slot = (slot + 1) & (RING - 1);
        if (e->ring_t[slot] <= 0) return slot;
    }
    return -1;
}

static void close_fd(Engine *e, int *fd) {
    if (*fd < 0) return;
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
    e->open_fds--;
}

static void close_client(Engine *e, int k) {
    close_fd(e, &e->ofd[k]);
    close_fd(e, &e->fd[k]);
}

/* A client's new loop with rename_clients: its next query leaves from a new port
 * (a new socket), while the old one is read until its last query's timeout (ClientConns.
 * retire_udp). An older one still open then closes: what it carries ends lost. */
static void retire_client(Engine *e, int k) {
    close_fd(e, &e->ofd[k]);
    if (e->fd[k] < 0) return;
    if (e->cinfl[k] <= 0) {
        close_fd(e, &e->fd[k]);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (unsigned)k | OLD_SOCKET};
    epoll_ctl(e->epfd, EPOLL_CTL_MOD, e->fd[k], &ev);
    e->ofd[k] = e->fd[k];
    e->ountil[k] = e->clast[k] + e->timeout_ns;
    e->fd[k] = -1;
}

static void open_client(Engine *e, int k) {
    int fd = socket(e->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) { /* counted (ClientConns.socket_errors), the query ends lost */
        e->socket_errors++;
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (unsigned)k};
    if (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        e->socket_errors++;
        return;
    }
    e->fd[k] = fd;
    if (++e->open_fds > e->fds_peak) e->fds_peak = e->open_fds;
}

/* Replay.send (and run()'s backlog rule in _loop.py): one planned query, now. */
static int send_one(Engine *e, const long long *v, PyObject *q, long long origin, long long now) {
    long long due = v[0], loop = v[2];
    int k = (int)v[1], c = (int)v[3], flags = (int)v[4];
    long long second = due / 1000000000LL;
    long long *n = counts(e, second, c);
    if (now - (origin + due) > BACKLOG_NS) { /* too far behind: due, never sent */
        n[DUE]++, n[SKIPPED]++;
        return 0;
    }
    if (e->cloop[k] != loop) {
        if (e->rename && e->cloop[k] >= 0) retire_client(e, k); /* a new loop: a new port */
        e->cloop[k] = loop;
    }
    int slot = take_slot(e);
    if (slot < 0) { /* 65,536 in flight: this one cannot leave */
        n[DUE]++, n[SKIPPED]++;
        return 0;
    }
    unsigned char head[12] = {slot >> 8, slot & 255, flags >> 8, flags & 255, 0, 1};
    struct iovec iov[2] = {{head, 12}, {PyBytes_AS_STRING(q), (size_t)PyBytes_GET_SIZE(q)}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    if (e->fd[k] < 0) open_client(e, k);
    long long t = mono_ns();
    /* refused, full or no socket: counted sent, ends lost, and send_failed says so */
    if (e->fd[k] >= 0 && sendmsg(e->fd[k], &msg, 0) >= 0)
        e->socket_sent++;
    else
        e->send_failed++;
    /* never early: a clock stepped back is on time (OffsetTotals.add) */
    e->off[(second & (NW - 1)) * NOFF + off_bucket((t - origin - due) / 1000)]++;
    if (push_order(e, t, slot) < 0) return -1;
    e->ring_t[slot] = t;
    e->ring_c[slot] = c;
    e->ring_w[slot] = second;
    e->ring_k[slot] = k;
    Py_INCREF(q);
    Py_XSETREF(e->ring_q[slot], q);
    e->csent[k]++;
    e->cinfl[k]++;
    e->clast[k] = t;
    e->winfl[second & (NW - 1)]++;
    e->inflight++;
    n[DUE]++, n[SENT]++;
    return 0;
}

/* ClientConns.idle: a socket idle for idle_timeout_s with nothing in flight closes (a
 * capture's clients may outnumber the descriptors a process may hold). */
static void idle(Engine *e, long long now) {
    for (int k = 0; k < e->nclients; k++) {
        if (e->ofd[k] >= 0 && now > e->ountil[k]) close_fd(e, &e->ofd[k]);
        if (e->fd[k] >= 0 && e->cinfl[k] <= 0 && now - e->clast[k] > e->idle_ns)
            close_client(e, k);
    }
}

static void housekeeping(Engine *e) {
    long long now = mono_ns();
    if (now >= e->next_sweep) {
        sweep(e, now);
        e->next_sweep = now + SWEEP_NS;
    }
    if (now >= e->next_idle) {
        idle(e, now);
        e->next_idle = now + IDLE_SWEEP_NS;
    }
}

static PyObject *overflowed(void) {
    PyErr_SetString(PyExc_RuntimeError, "a replay window stayed open longer than its ring holds");
    return NULL;
}

#include "_fastreplay_face.h"
