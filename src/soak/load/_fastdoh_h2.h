/* Part of soak.load._fastdoh (see the top of _fastdoh.c): HTTP/2 through nghttp2, a
 * request per query (doh.DohFlow's method, path and headers) and what its answer
 * becomes. Included once, by _fastdoh.c, after _fastdoh_defs.h. */

/* s taken off its connection's list (stream_link puts it on another's). */
static void stream_unlink(Stream *s) {
    Conn *c = s->conn;
    if (s->prev) s->prev->next = s->next;
    else c->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    c->nstreams--;
}

static void stream_link(Conn *c, Stream *s) {
    s->conn = c;
    s->prev = NULL;
    s->next = c->streams;
    if (c->streams) c->streams->prev = s;
    c->streams = s;
    c->nstreams++;
}

static void stream_free(Stream *s) {
    stream_unlink(s);
    free(s->body);
    free(s);
}

/* RFC 4648 base64url without padding (RFC 8484, section 4.1), as doh.py sends it. */
static size_t base64url(const unsigned char *in, size_t n, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[o++] = A[v >> 18];
        out[o++] = A[(v >> 12) & 63];
        out[o++] = A[(v >> 6) & 63];
        out[o++] = A[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0);
        out[o++] = A[v >> 18];
        out[o++] = A[(v >> 12) & 63];
        if (i + 1 < n) out[o++] = A[(v >> 6) & 63];
    }
    return o;
}

static ssize_t post_body(nghttp2_session *h2, int32_t sid, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user) {
    (void)h2, (void)sid, (void)user;
    Stream *s = src->ptr;
    size_t n = s->msg_len - s->sent_len;
    if (n > len) n = len;
    memcpy(buf, s->msg + s->sent_len, n);
    s->sent_len += n;
    if (s->sent_len == s->msg_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user) {
    (void)flags, (void)user;
    if (f->hd.type != NGHTTP2_HEADERS) return 0;
    Stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (s && nlen == 7 && memcmp(name, ":status", 7) == 0)
        s->status_ok = vlen == 3 && memcmp(value, "200", 3) == 0;
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t sid, const uint8_t *data,
                   size_t len, void *user) {
    (void)flags, (void)user;
    Stream *s = nghttp2_session_get_stream_user_data(h2, sid);
    if (s == NULL) return 0;
    if (s->body_len + len > s->body_cap) {
        size_t cap = s->body_len + len < 512 ? 512 : (s->body_len + len) * 2;
        if (cap > MAX_BODY) cap = MAX_BODY;
        if (s->body_len + len > cap) len = cap - s->body_len; /* beyond a DNS message */
        unsigned char *b = realloc(s->body, cap);
        if (b == NULL) return NGHTTP2_ERR_CALLBACK_FAILURE;
        s->body = b;
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, data, len);
    s->body_len += len;
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
    Conn *c = user;
    if (f->hd.type == NGHTTP2_GOAWAY) {
        c->d->goaways++;
        c->goaway = 1; /* takes no more queries: retired and replaced */
        if (f->goaway.error_code != NGHTTP2_NO_ERROR) c->d->errors++;
    } else if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
               (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        Stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
        if (s) s->ended = 1;
    }
    return 0;
}

/* A request's last frame is in the output: it counts at the socket once that is taken
 * (once a query: a refused request sent again is not counted twice). A request nghttp2
 * still holds (the server's streams all in flight) has not left: it is counted failed if
 * it never does (on_stream_close, conn_close). */
static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        Stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
        if (s != NULL && s->left) return 0;
        if (s != NULL) s->left = 1;
        ((Conn *)user)->pending++;
    }
    return 0;
}

/* A request nghttp2 held (the server's streams all in flight) and whose query has timed
 * out meanwhile (lost in the ring, or past its timeout: its slot's time is no longer
 * its own, or too old) is not sent: a real client would have given up on it, and an
 * overloaded server would only be handed work nobody waits for. Cancelled here, its
 * HEADERS never leave; on_stream_close counts it send_failed (lost at its timeout). */
static int before_frame_send(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (s == NULL || s->left || s->sent_ns <= 0) return 0; /* sent_ns 0: handed over now */
    Engine *e = &((Conn *)user)->d->e;
    if (e->ring_t[s->slot] == s->sent_ns && mono_ns() - s->sent_ns <= e->timeout_ns) return 0;
    s->stale = 1;
    return NGHTTP2_ERR_CANCEL;
}

static int32_t h2_request(Conn *c, Stream *s);

/* A stream the server refused (REFUSED_STREAM: it did not process it, RFC 9113 8.7) is
 * sent again once on its connection, unless that is going away: a server that allows
 * fewer streams at once than a client sent before its SETTINGS arrived refuses the rest
 * (nghttp2 assumes 100 until then), and nghttp2 holds the retry until a stream is free.
 * Its latency still counts from its first send. 1 sent again, 0 not. */
static int retry_refused(Conn *c, Stream *s) {
    if (s->retried || c->goaway) return 0;
    s->retried = 1;
    s->sent_len = s->body_len = 0;
    s->status_ok = s->ended = 0;
    if (h2_request(c, s) < 0) return 0;
    c->d->streams_retried++;
    return 1; /* written by the read's conn_push: no mem_send inside a callback */
}

/* A stream refused because its connection goes away (RFC 9113 6.8: the server did not
 * process it, it may be sent again on a new connection): sent once on its client's next
 * connection where the engine has one rule for that (the replay's elsewhere), its
 * latency still from its first send. 1 moved, 0 not (lost). */
static int move_refused(Conn *c, Stream *s) {
    DohEngine *d = c->d;
    if (s->moved || !c->goaway || d->elsewhere == NULL) return 0;
    s->moved = 1;
    s->sent_len = s->body_len = 0;
    s->status_ok = s->ended = 0;
    if (!d->elsewhere(c, s)) return 0;
    d->streams_retried++;
    c->answered++; /* nothing more of it on c */
    return 1;
}

/* The answer (doh.DohFlow.messages): a whole 200 answer is matched as a UDP reply is, with
 * its ring slot as id; a reset stream or another status is a connection error and the
 * query ends as lost at its timeout. A stream ended with an error code is counted as
 * such too (streams_reset, streams_refused), so that a server's refusals are told from
 * answers that never came. */
static int on_stream_close(nghttp2_session *h2, int32_t sid, uint32_t code, void *user) {
    Conn *c = user;
    DohEngine *d = c->d;
    Stream *s = nghttp2_session_get_stream_user_data(h2, sid);
    if (s == NULL) return 0;
    nghttp2_session_set_stream_user_data(h2, sid, NULL);
    if (s->stale) { /* dropped unsent (before_frame_send): neither the server's reset nor
                     * a connection error; its query was lost at its timeout already */
        c->answered++;
        d->e.send_failed++;
        stream_free(s);
        return 0;
    }
    if (code != NGHTTP2_NO_ERROR) {
        d->streams_reset++;
        if (code == NGHTTP2_REFUSED_STREAM) d->streams_refused++;
        if (code == NGHTTP2_REFUSED_STREAM && (retry_refused(c, s) || move_refused(c, s)))
            return 0;
    }
    c->answered++;
    if (!s->left) d->e.send_failed++; /* held by nghttp2 and never sent (a GOAWAY came) */
    int r = 0;
    if (s->ended) {
        d->e.sock_received++; /* an answer read whole, good or not */
        if (s->status_ok && s->body_len >= HEADER_LEN) {
            set_id(s->body, s->slot);
            long long done = d->e.completed_total, stray = d->e.unexpected;
            r = on_reply(&d->e, s->body, s->body_len, mono_ns());
            if (d->e.completed_total == done && d->e.unexpected == stray) d->late++;
        } else {
            d->errors++;
        }
    } else {
        d->errors++;
    }
    stream_free(s);
    return r < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static nghttp2_session_callbacks *make_callbacks(void) {
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0) return NULL;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_before_frame_send_callback(cbs, before_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    return cbs;
}

/* A new connection's session and its SETTINGS (doh.DohFlow.started). */
static int h2_start(Conn *c) {
    if (nghttp2_session_client_new(&c->h2, c->d->cbs, c) != 0) return -1;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
    };
    return nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 2) == 0 ? 0 : -1;
}

/* The session's output into the write buffer; -1 when it broke. */
static int h2_pump(Conn *c) {
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0) return -1;
        if (n == 0) return 0;
        if (fastconn_grow((void **)&c->wbuf, &c->wcap, c->wlen + (size_t)n, 1) < 0) return -1;
        memcpy(c->wbuf + c->wlen, data, (size_t)n);
        c->wlen += (size_t)n;
    }
}

static int h2_accepting(Conn *c) {
    /* The server's SETTINGS bound the streams in flight; beyond them, another connection. */
    return c->fd >= 0 && !c->goaway &&
           (uint32_t)c->nstreams <
               nghttp2_session_get_remote_settings(c->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

#define NV(n, v, vlen) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen), NGHTTP2_NV_FLAG_NONE}

/* Stream s's request submitted (its query in s->msg, the engine's method, path and
 * headers): its stream id, or < 0 when the session refused it. */
static int32_t h2_request(Conn *c, Stream *s) {
    DohEngine *d = c->d;
    char path[1024], clen[16];
    size_t plen = strlen(d->path);
    nghttp2_nv nv[7] = {
        NV(":method", d->get ? "GET" : "POST", d->get ? 3 : 4),
        NV(":scheme", "https", 5),
        NV(":authority", d->authority, strlen(d->authority)),
        NV(":path", path, 0),
        NV("accept", "application/dns-message", 23),
        NV("content-type", "application/dns-message", 23),
        NV("content-length", clen, 0),
    };
    memcpy(path, d->path, plen);
    if (d->get) {
        memcpy(path + plen, "?dns=", 5);
        plen += 5 + base64url(s->msg, s->msg_len, path + plen + 5);
    }
    nv[3].valuelen = plen;
    nv[6].valuelen = (size_t)snprintf(clen, sizeof clen, "%zu", s->msg_len);
    nghttp2_data_provider body = {.source.ptr = s, .read_callback = post_body};
    return nghttp2_submit_request(c->h2, NULL, nv, d->get ? 5 : 7, d->get ? NULL : &body, s);
}

/* One query as one request (id 0 on the wire, RFC 8484): 1 submitted, 0 refused by the
 * session's state (the query is lost and the connection retired, as doh.py does), -1 out
 * of memory for its stream. */
static int h2_submit(Conn *c, int slot, const char *q, size_t qlen) {
    DohEngine *d = c->d;
    if (qlen > MSG_MAX - HEADER_LEN) qlen = MSG_MAX - HEADER_LEN;
    Stream *s = calloc(1, sizeof *s);
    if (s == NULL) return -1;
    s->slot = slot;
    s->conn = c;
    memcpy(s->msg + 2, QUERY_AFTER_ID, sizeof QUERY_AFTER_ID);
    memcpy(s->msg + HEADER_LEN, q, qlen);
    s->msg_len = HEADER_LEN + qlen;
    if (h2_request(c, s) < 0) {
        free(s);
        d->errors++;
        d->e.send_failed++; /* none of its bytes will reach the socket */
        c->answered++;
        c->goaway = 1;
        return 0;
    }
    stream_link(c, s);
    /* Into the output now: nghttp2 would put every queued HEADERS before any DATA, and a
     * server that takes one incomplete request at a time (knot-resolver) refuses a stream
     * whose HEADERS come while another's body is still due. h2 in doh.py writes them so.
     * A session that broke is found again by the batch's flush, which closes it. */
    h2_pump(c);
    return 1;
}
