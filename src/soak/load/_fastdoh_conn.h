/* Part of soak.load._fastdoh (see the top of _fastdoh.c): one connection's life, as
 * conn.StreamFlow lives it: a non-blocking connect, the TLS handshake step by step
 * (ALPN h2, the previous session resumed), writes and reads through OpenSSL, the close.
 * Included once, by _fastdoh.c, after _fastdoh_h2.h. */

static Conn *conn_new(DohEngine *d) {
    Conn *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->d = d;
    c->fd = -1;
    return c;
}

static void conn_set_events(Conn *c, int events) {
    if (c->fd < 0 || events == c->events) return;
    struct epoll_event ev = {.events = (uint32_t)events, .data.ptr = c};
    epoll_ctl(c->d->e.epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

/* What epoll waits for now (StreamFlow.events, and writes the socket did not take). */
static void conn_rearm(Conn *c) {
    if (c->phase == CONNECTING) conn_set_events(c, EPOLLOUT);
    else if (c->phase == HANDSHAKE) conn_set_events(c, c->hs_events);
    else conn_set_events(c, EPOLLIN | (c->wlen ? EPOLLOUT : 0));
}

/* Starts opening (non-blocking): 1 under way, 0 when it could not even start. */
static int conn_connect(Conn *c, long long now) {
    DohEngine *d = c->d;
    if (now < c->retry_ns) return 0;
    c->retry_ns = now + RECONNECT_NS;
    int fd = fastconn_open((struct sockaddr *)&d->addr, d->addrlen);
    if (fd < 0) { d->errors++; return 0; }
    c->fd = fd;
    c->phase = CONNECTING;
    c->start_ns = mono_ns();
    c->carried = c->answered = 0;
    c->goaway = 0;
    c->wlen = 0;
    c->pending = 0;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    c->events = EPOLLOUT;
    if (epoll_ctl(d->e.epfd, EPOLL_CTL_ADD, fd, &ev) < 0 || h2_start(c) < 0 || h2_pump(c) < 0) {
        conn_close(c);
        d->errors++;
        return 0;
    }
    return 1;
}

/* Closes; what no socket took never will (each such query fails at the socket: in the
 * write buffer, or held by nghttp2), and the queries in flight stay in the ring: lost at
 * their timeout. The write buffer is given back (fastconn_give_back): a closed connection
 * holds nothing but its kept session, so a replay's pool holds what its open connections
 * do, not the most ever open at once (it kept each entry's before). A connection opened
 * again grows one afresh. */
static void conn_close(Conn *c) {
    DohEngine *d = c->d;
    if (c->ssl) {
        if (d->resume) fastconn_keep_session(c->ssl, &c->session);
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0) {
        epoll_ctl(d->e.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    if (c->h2) {
        nghttp2_session_del(c->h2); /* it calls no callback: the streams are freed here */
        c->h2 = NULL;
    }
    for (Stream *s = c->streams; s; s = s->next) d->e.send_failed += !s->left;
    while (c->streams) stream_free(c->streams);
    d->e.send_failed += c->pending;
    c->pending = 0;
    c->wlen = 0;
    fastconn_give_back((void **)&c->wbuf, &c->wcap);
    c->phase = DOWN;
    c->events = 0;
}

static void conn_free(Conn *c) {
    conn_close(c);
    if (c->session) SSL_SESSION_free(c->session);
    free(c);
}

static int conn_opened(Conn *c) {
    DohEngine *d = c->d;
    const unsigned char *alpn = NULL;
    unsigned alen = 0;
    SSL_get0_alpn_selected(c->ssl, &alpn, &alen);
    if (alen != 2 || memcmp(alpn, "h2", 2) != 0) return -1; /* no HTTP/2 agreed */
    long long done = mono_ns();
    c->phase = UP;
    c->born_ns = done;
    d->opened++;
    if (SSL_session_reused(c->ssl)) d->resumed++;
    return fastconn_count_handshake(d->handshake_us, (done - c->start_ns) / 1000) < 0 ? -2 : 1;
}

/* One step of opening: 1 up, 0 under way, -1 failed (a connection error; closed),
 * -2 a Python error. */
static int conn_advance(Conn *c) {
    DohEngine *d = c->d;
    if (c->phase == CONNECTING) {
        if (!fastconn_connected(c->fd)) goto failed;
        c->ssl = fastconn_tls(d->ctx, c->fd, d->server_name, d->resume ? c->session : NULL);
        if (c->ssl == NULL) goto failed;
        c->phase = HANDSHAKE;
    }
    int r = fastconn_handshake(c->ssl, &c->hs_events);
    if (r == -1) goto failed;
    if (r == 0) {
        conn_rearm(c);
        return 0;
    }
    r = conn_opened(c);
    if (r == -1) goto failed;
    if (r == -2) return -2;
    conn_rearm(c);
    return 1;
failed:
    ERR_clear_error();
    d->errors++;
    conn_close(c);
    return -1;
}

/* Writes what is buffered (once up): 0, or -1 when the connection broke. */
static int conn_flush(Conn *c) {
    if (c->phase != UP) return 0;
    while (c->wlen) {
        int r = SSL_write(c->ssl, c->wbuf, c->wlen > INT32_MAX ? INT32_MAX : (int)c->wlen);
        if (r <= 0) {
            int e = SSL_get_error(c->ssl, r);
            ERR_clear_error();
            if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return -1;
            break;
        }
        c->d->writes++;
        c->wlen -= (size_t)r;
        memmove(c->wbuf, c->wbuf + r, c->wlen);
    }
    if (c->wlen == 0) { /* every query in it taken whole */
        c->d->e.sock_sent += c->pending;
        c->pending = 0;
    }
    conn_rearm(c);
    return 0;
}

/* What the session has for c (its frames into the write buffer, h2_pump) written as far as
 * the socket takes it: the load's batch and the replay's step each end with it, once per
 * connection. 0, or -1 when the connection broke (its owner closes it). */
static int conn_push(Conn *c) {
    return h2_pump(c) < 0 || conn_flush(c) < 0 ? -1 : 0;
}

/* Reads what is there into the session, then writes what it answers (window updates,
 * SETTINGS acks): 1, 0 when the connection ended, -2 a Python error. It stops once
 * OpenSSL holds nothing more (it reads ahead, _fastconn.h): level-triggered epoll
 * brings it back for the rest, and the recv that would only say EAGAIN is saved. */
static int conn_read(Conn *c) {
    unsigned char buf[READ_CHUNK];
    for (;;) {
        int n = SSL_read(c->ssl, buf, sizeof buf);
        if (n <= 0) {
            int e = SSL_get_error(c->ssl, n);
            ERR_clear_error();
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
            return 0;
        }
        if (nghttp2_session_mem_recv(c->h2, buf, (size_t)n) < 0) {
            if (PyErr_Occurred()) return -2;
            c->d->errors++; /* unusable: its queries end as lost, a new one replaces it */
            return 0;
        }
        if (!SSL_has_pending(c->ssl)) break;
    }
    return conn_push(c) < 0 ? 0 : 1;
}
