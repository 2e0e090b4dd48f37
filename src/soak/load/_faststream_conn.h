/* Part of soak.load._faststream (see the top of _faststream.c): one TCP or DoT
 * connection, conn.StreamFlow in C. It opens without blocking (connect, then the TLS
 * handshake step by step as epoll says the socket is ready), carries framed queries
 * (RFC 7766's 2-byte length) in a write buffer that remembers where each query ends
 * (a query counts as sent at the socket once its last byte is taken), and cuts what it
 * reads into messages. Included once, by _faststream.c. */
#include <fcntl.h>
#include "_fastconn.h" /* the connect, the TLS context and handshake: shared with DoH */

#define WBUF_MAX (8 << 20)           /* a connection that cannot take this much is broken */

typedef struct {
    int fd, phase, hs_events;
    int out; /* EPOLLOUT is registered (bytes wait for room in the socket) */
    SSL *ssl;
    SSL_SESSION *session; /* the last session of this slot, resumed by the next one */
    long long start_ns, retry_ns;
    unsigned char *wbuf;  /* framed queries not yet taken by the socket, from woff */
    size_t woff, wlen, wcap;
    size_t *ends;         /* where each queued query ends in wbuf, from ehead */
    size_t ehead, nends, ecap;
    unsigned char *rbuf;  /* bytes read that do not make a whole message yet */
    size_t rlen, rcap;
    long long carried, answered, last_send_ns;
    long long born_ns;     /* up since (an age policy counts from here) */
    long long close_at_ns; /* > 0 once retired and its answers are in: it closes then */
    int slot;              /* the slot it serves or served (whose policy it follows) */
    int hangup;            /* a hang-up client: it resets once its last query has left */
    /* A hang-up client's queries, as (id, time sent): in flight at the reset, they end
     * abandoned (StreamFlow.inflight). Unused (NULL) on other connections. */
    long long *inflight;
    size_t ninflight, icap;
} Conn;

/* What the connections counted over the interval (Book.conn_* and socket_*). */
typedef struct {
    long long opened, errors, resumed, hung_up;
    PyObject *handshake_us; /* {us: n}, as Book.handshake_us */
} ConnCounts;

/* The queries still queued will never be taken whole: each fails at the socket
 * (StreamFlow.unwritten). Returns how many. */
static long long conn_unwritten(Conn *c) {
    long long n = (long long)c->nends;
    c->woff = c->wlen = c->ehead = c->nends = 0;
    return n;
}

static void conn_close(Conn *c, int keep_session) {
    if (c->ssl != NULL) {
        if (keep_session) fastconn_keep_session(c->ssl, &c->session);
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->phase = DOWN;
    c->rlen = 0;
}

/* Starts opening (non-blocking): 1 when under way, 0 when it could not even start
 * (counted as an error; tried again after RECONNECT_NS). */
static int conn_connect(Conn *c, const struct sockaddr *addr, socklen_t alen, long long now,
                        ConnCounts *k) {
    if (now < c->retry_ns) return 0;
    c->retry_ns = now + RECONNECT_NS;
    int fd = fastconn_open(addr, alen);
    if (fd < 0) { k->errors++; return 0; }
    c->fd = fd;
    c->phase = CONNECTING;
    c->start_ns = mono_ns();
    c->rlen = 0;
    c->carried = c->answered = 0;
    c->close_at_ns = 0;
    return 1;
}

static uint32_t conn_events(const Conn *c) {
    if (c->phase == CONNECTING) return EPOLLOUT;
    if (c->phase == HANDSHAKE) return (uint32_t)c->hs_events;
    return c->woff < c->wlen ? EPOLLIN | EPOLLOUT : EPOLLIN;
}

static int conn_opened(Conn *c, ConnCounts *k) {
    long long done = mono_ns();
    c->phase = UP;
    c->born_ns = done;
    k->opened++;
    if (c->ssl != NULL && SSL_session_reused(c->ssl)) k->resumed++;
    return fastconn_count_handshake(k->handshake_us, (done - c->start_ns) / 1000);
}

/* One step of opening (StreamFlow.advance): 1 once up, 0 while under way, -2 if it
 * failed (counted; the caller closes it), -1 with a Python exception set. */
static int conn_advance(Conn *c, SSL_CTX *ctx, const char *server_name, int resume,
                        ConnCounts *k) {
    if (c->phase == CONNECTING) {
        if (!fastconn_connected(c->fd)) {
            k->errors++;
            return -2;
        }
        if (ctx == NULL) return conn_opened(c, k) < 0 ? -1 : 1;
        c->ssl = fastconn_tls(ctx, c->fd, server_name, resume ? c->session : NULL);
        if (c->ssl == NULL) { k->errors++; return -2; }
        c->phase = HANDSHAKE;
    }
    int r = fastconn_handshake(c->ssl, &c->hs_events);
    if (r == 1) return conn_opened(c, k) < 0 ? -1 : 1;
    if (r == 0) return 0;
    k->errors++;
    return -2;
}

/* Queue one framed query (StreamFlow.queue). -1: no memory (the query is not queued). */
static int conn_queue(Conn *c, int id, const char *q, size_t qlen, long long now) {
    size_t size = HEADER_LEN + qlen, need = c->wlen + 2 + size;
    if (c->woff > 0 && need > c->wcap) { /* make room at the front first */
        memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
        for (size_t i = c->ehead; i < c->ehead + c->nends; i++) c->ends[i] -= c->woff;
        c->wlen -= c->woff;
        need -= c->woff;
        c->woff = 0;
    }
    if (need > WBUF_MAX || fastconn_grow((void **)&c->wbuf, &c->wcap, need, 1) < 0) return -1;
    if (c->ehead > 0 && c->ehead + c->nends + 1 > c->ecap) {
        memmove(c->ends, c->ends + c->ehead, c->nends * sizeof(size_t));
        c->ehead = 0;
    }
    if (fastconn_grow((void **)&c->ends, &c->ecap, c->ehead + c->nends + 1, sizeof(size_t)) < 0) return -1;
    unsigned char *p = c->wbuf + c->wlen;
    p[0] = (unsigned char)(size >> 8);
    p[1] = (unsigned char)(size & 255);
    set_id(p + 2, id);
    memcpy(p + 4, QUERY_AFTER_ID, sizeof QUERY_AFTER_ID);
    memcpy(p + 2 + HEADER_LEN, q, qlen);
    c->wlen = need;
    c->ends[c->ehead + c->nends++] = need;
    c->carried++;
    c->last_send_ns = now;
    return 0;
}

/* Write what is queued, once up (StreamFlow.flush): how many queries the socket took
 * whole, or -1 when the connection broke. */
static long long conn_flush(Conn *c) {
    if (c->phase != UP || c->woff >= c->wlen) return 0;
    size_t want = c->wlen - c->woff;
    ssize_t n;
    if (c->ssl != NULL) {
        ERR_clear_error();
        size_t wrote = 0;
        int r = SSL_write_ex(c->ssl, c->wbuf + c->woff, want, &wrote);
        if (r <= 0) {
            int why = SSL_get_error(c->ssl, r);
            return why == SSL_ERROR_WANT_WRITE || why == SSL_ERROR_WANT_READ ? 0 : -1;
        }
        n = (ssize_t)wrote;
    } else {
        n = send(c->fd, c->wbuf + c->woff, want, MSG_NOSIGNAL);
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    }
    c->woff += (size_t)n;
    long long whole = 0;
    while (c->nends > 0 && c->ends[c->ehead] <= c->woff) {
        c->ehead++;
        c->nends--;
        whole++;
    }
    if (c->woff == c->wlen) c->woff = c->wlen = c->ehead = c->nends = 0;
    return whole;
}

/* Read what is there into rbuf: 1 if something came, 0 if nothing, -1 when the
 * connection ended (or broke), -2 on no memory. TLS is read while OpenSSL holds bytes
 * it has not handed over: epoll would not announce those. */
static int conn_read(Conn *c) {
    int got = 0;
    for (;;) {
        if (fastconn_grow((void **)&c->rbuf, &c->rcap, c->rlen + 16384, 1) < 0) return -2;
        size_t room = c->rcap - c->rlen;
        if (c->ssl != NULL) {
            ERR_clear_error();
            size_t n = 0;
            int r = SSL_read_ex(c->ssl, c->rbuf + c->rlen, room, &n);
            if (r <= 0) {
                int why = SSL_get_error(c->ssl, r);
                if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) return got;
                return got && why == SSL_ERROR_ZERO_RETURN ? 1 : -1;
            }
            c->rlen += n;
            got = 1;
            /* Nothing more in OpenSSL's buffer (it reads ahead): the socket is drained as
             * far as it knows, and level-triggered epoll brings it back for the rest. One
             * recv saved per wake, the one that would only say EAGAIN. */
            if (!SSL_has_pending(c->ssl)) return 1;
        } else {
            ssize_t n = recv(c->fd, c->rbuf + c->rlen, room, 0);
            if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? got : -1;
            if (n == 0) return got ? 1 : -1;
            c->rlen += (size_t)n;
            if ((size_t)n < room) return 1; /* drained: level-triggered epoll brings us back */
            got = 1;
        }
    }
}

/* A hang-up client's query (id, time sent) kept for its reset. -1: no memory. */
static inline int conn_keep_inflight(Conn *c, int id, long long sent_ns) {
    if (fastconn_grow((void **)&c->inflight, &c->icap, 2 * (c->ninflight + 1), sizeof(long long)) < 0)
        return -1;
    c->inflight[2 * c->ninflight] = id;
    c->inflight[2 * c->ninflight + 1] = sent_ns;
    c->ninflight++;
    return 0;
}

/* The buffers given back (a closed connection's: nothing is queued, read or in flight),
 * to be grown afresh by the next connection of this entry. A pool that kept them held
 * every entry's (a read buffer of 32 KiB, the write buffer and its ends) for as many
 * entries as were ever open at once: in a replay whose clients' connections are replaced
 * each loop, that high mark rose for minutes (heaptrack: 149 read buffers live after
 * 1 minute, 157 after 4, each 32 KiB). */
static void conn_drop_buffers(Conn *c) {
    fastconn_give_back((void **)&c->wbuf, &c->wcap);
    fastconn_give_back((void **)&c->ends, &c->ecap);
    fastconn_give_back((void **)&c->rbuf, &c->rcap);
    fastconn_give_back((void **)&c->inflight, &c->icap);
    c->woff = c->wlen = c->ehead = c->nends = c->rlen = c->ninflight = 0;
}

static void conn_free(Conn *c) {
    conn_close(c, 0);
    if (c->session) SSL_SESSION_free(c->session);
    c->session = NULL;
    conn_drop_buffers(c);
}
