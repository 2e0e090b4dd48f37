/* The opening of one client connection over TCP or TLS, shared by the compiled stream
 * loops: _faststream.c (TCP and DoT) and _fastdoh.c (DoH). One owner for: the server's
 * address, the non-blocking TCP connect, the OpenSSL client context (conn.tls_context's
 * rules), a TLS object for a connected socket (SNI, the name checked, the previous
 * session offered), one step of the handshake, the handshake-time histogram, and how a
 * connection's buffers grow and are given back. What a connection carries (framed
 * queries, HTTP/2) stays each engine's own.
 *
 * Included after Python.h (the errors it sets and the histogram are Python objects). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define RECONNECT_NS 100000000LL        /* conn.RECONNECT_NS: at most this often while refused */
#define CONNECT_TIMEOUT_NS 1000000000LL /* conn.CONNECT_TIMEOUT_NS: connect plus handshake */
enum { DOWN, CONNECTING, HANDSHAKE, UP }; /* conn.py's phases */

/* host (an IP literal: the engines never resolve names; a name is resolved in Python,
 * target.py) and port into addr. NULL host: no address (the name does not resolve), *alen
 * 0, and every connect fails as the Python loop's connect to such a name does. 0, or -1
 * with a ValueError set. */
static int fastconn_addr(const char *host, int port, struct sockaddr_storage *addr,
                         socklen_t *alen) {
    memset(addr, 0, sizeof *addr);
    *alen = 0;
    if (host == NULL) return 0;
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *alen = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *alen = sizeof *a6;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "Engine: %s is not an IP address", host);
    return -1;
}

/* A non-blocking TCP connect under way (Nagle off: a query leaves when written). The
 * socket, or -1 when it could not even start (the caller counts the error). */
static int fastconn_open(const struct sockaddr *addr, socklen_t alen) {
    if (alen == 0) return -1; /* no address: the name did not resolve */
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, addr, alen) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Engine.set_address(host or None, port): the address later connects go to (those under
 * way keep theirs), as the driver resolved the server's name again (target.py). None,
 * or NULL with an exception set. */
static PyObject *fastconn_set_address(PyObject *args, struct sockaddr_storage *addr,
                                      socklen_t *alen) {
    const char *host;
    int port;
    struct sockaddr_storage next;
    socklen_t next_len;
    if (!PyArg_ParseTuple(args, "zi", &host, &port)) return NULL;
    if (fastconn_addr(host, port, &next, &next_len) < 0) return NULL;
    *addr = next;
    *alen = next_len;
    Py_RETURN_NONE;
}

/* Whether the connect epoll announced succeeded (SO_ERROR). */
static int fastconn_connected(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

/* The client context of conn.tls_context, the same for DoT and DoH: the CA file verifies
 * the server (and its name, when one is given: fastconn_tls); without one, a load
 * generator measures the server, it does not authenticate it. No tickets when
 * resumption is off. ALPN as given, in wire format (conn.alpn_wire), none when empty.
 *
 * Read-ahead on, for both: without it OpenSSL reads each record's 5-byte header and its
 * body in two recv calls, and a server writes about one record per answer (DoT) or per
 * HTTP/2 frame (DoH). Each engine's reader stops once OpenSSL holds nothing more
 * (SSL_has_pending) and level-triggered epoll brings it back for the rest. Measured with
 * strace -c on `soak load --protocol doh --flows 1 --rate 2000` against unbound, 6,000
 * answers: 5.0 read calls per answer without read-ahead, 0.78 with it (docs/benchmarks.md).
 *
 * No session cache, for both: each engine keeps its connection's last session itself and
 * offers it to the next (SSL_set_session); SSL_SESS_CACHE_CLIENT (DoH had it) only filled
 * a cache of up to 20,480 sessions that nothing read. NULL with an OSError set. */
static SSL_CTX *fastconn_ctx(const char *ca_file, const unsigned char *alpn, size_t alpn_len,
                             int resume) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) goto fail;
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_read_ahead(ctx, 1);
    if (ca_file != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) goto fail;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    if (!resume) SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    if (alpn_len > 0 && SSL_CTX_set_alpn_protos(ctx, alpn, (unsigned)alpn_len) != 0) goto fail;
    return ctx;
fail:;
    unsigned long err = ERR_get_error();
    PyErr_Format(PyExc_OSError, "TLS context: %s", err ? ERR_reason_error_string(err) : "failed");
    if (ctx != NULL) SSL_CTX_free(ctx);
    return NULL;
}

/* A TLS client on a connected socket: the server name sent (SNI) and, when the context
 * verifies, checked; the previous session offered (NULL: none). NULL when it failed. */
static SSL *fastconn_tls(SSL_CTX *ctx, int fd, const char *server_name, SSL_SESSION *session) {
    SSL *ssl = SSL_new(ctx);
    if (ssl == NULL) return NULL;
    int ok = SSL_set_fd(ssl, fd) == 1;
    if (ok && server_name != NULL) {
        SSL_set_tlsext_host_name(ssl, server_name);
        if (SSL_CTX_get_verify_mode(ctx) != SSL_VERIFY_NONE)
            ok = SSL_set1_host(ssl, server_name) == 1;
    }
    if (ok && session != NULL) SSL_set_session(ssl, session);
    if (!ok) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/* One step of the handshake: 1 done, 0 under way (*events: what epoll waits for
 * next), -1 failed. */
static int fastconn_handshake(SSL *ssl, int *events) {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl);
    if (r == 1) return 1;
    int why = SSL_get_error(ssl, r);
    ERR_clear_error();
    if (why == SSL_ERROR_WANT_READ) *events = EPOLLIN;
    else if (why == SSL_ERROR_WANT_WRITE) *events = EPOLLOUT;
    else return -1;
    return 0;
}

/* The session to offer the next connection of this slot: this connection's newest one
 * (TLS 1.3 tickets arrive after the handshake), replacing *kept, if it can be resumed.
 * A connection that closes (or retires) before its ticket was read has none: *kept, the
 * one it was offered, stays. Taking the unresumable one instead made each replacement
 * a full handshake, slower, so more of them spent their quota still opening: DoT at
 * 4,000 q/s, 20 queries a connection on a busy machine resumed 37 of 1,569.
 *
 * A copy, not the connection's own object: SSL_free of a connection closed without a
 * close_notify marks its session unresumable, and a retired connection is freed while
 * its successor may still be opening (with `idle_s: 0` the compiled loop resumed 68
 * of 73 where the Python loop resumed 72). */
static void fastconn_keep_session(SSL *ssl, SSL_SESSION **kept) {
    SSL_SESSION *own = SSL_get1_session(ssl);
    if (own == NULL) return;
    SSL_SESSION *s = SSL_SESSION_is_resumable(own) ? SSL_SESSION_dup(own) : NULL;
    SSL_SESSION_free(own);
    if (s == NULL) return;
    if (*kept != NULL) SSL_SESSION_free(*kept);
    *kept = s;
}

/* One opening more in {handshake us: n} (Book.handshake_us). 0, or -1 with an
 * exception set. */
static int fastconn_count_handshake(PyObject *hist, long long us) {
    PyObject *key = PyLong_FromLongLong(us);
    if (key == NULL) return -1;
    PyObject *old = PyDict_GetItemWithError(hist, key);
    PyObject *v = PyErr_Occurred() ? NULL : PyLong_FromLongLong(old ? PyLong_AsLongLong(old) + 1 : 1);
    int r = v ? PyDict_SetItem(hist, key, v) : -1;
    Py_DECREF(key);
    Py_XDECREF(v);
    return r;
}

/* A connection's buffer (*buf, *cap items of `item` bytes) grown to hold `need` items:
 * doubled from 4 KiB. 0, or -1 on no memory (the buffer as it was). */
static int fastconn_grow(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 4096 / item;
    while (cap2 < need) cap2 *= 2;
    void *p = PyMem_Realloc(*buf, cap2 * item);
    if (p == NULL) return -1;
    *buf = p;
    *cap = cap2;
    return 0;
}

/* A buffer fastconn_grow made, given back: a closed connection holds none, and the next
 * connection of its pool entry or slot grows one afresh. */
static void fastconn_give_back(void **buf, size_t *cap) {
    PyMem_Free(*buf);
    *buf = NULL;
    *cap = 0;
}
