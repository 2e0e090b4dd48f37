/* Part of soak.load._fastdoh (see the top of _fastdoh.c): the headers, the DoH engine's
 * state and its connections. Included once, by _fastdoh.c. */
/* The UDP engine's windows, id ring, pacing, matching and Python face (take, skip,
 * sweep, begin, silence_until) are the ones used here: one copy of the ledger's rules
 * in C. Its transport (sendmmsg/recvmmsg) and module init stay unused. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "_fastudp.c"
#include "_fastchurn.h" /* the policies and slots: shared with the TCP/DoT loop */
#pragma GCC diagnostic pop

#include "_fastconn.h" /* the connect, the TLS context and handshake: shared with TCP/DoT */
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#define READ_CHUNK 16384
#define MAX_BODY 65535                 /* a DNS message's largest size */
#define MSG_MAX (HEADER_LEN + 300)     /* a query: the header and one question */

struct Conn;

/* One request: its ring slot, the query (the POST body, or GET's ?dns=), the answer. */
typedef struct Stream {
    struct Stream *prev, *next; /* the connection's open streams (freed with it) */
    struct Conn *conn;
    int slot, status_ok, ended;
    int retried; /* sent again once after the server refused it (_fastdoh_h2.h) */
    int left;    /* its last frame went to the output: counted at the socket from then */
    int moved;   /* sent once on its client's next connection after a GOAWAY (the replay) */
    int stale;   /* held until after its query's timeout: dropped unsent (_fastdoh_h2.h) */
    long long sent_ns; /* the ring's time of it (a hang-up abandons it: _fastudp_loop.h;
                        * a held request past its timeout is dropped); 0 until set */
    size_t msg_len, sent_len, body_len, body_cap;
    unsigned char msg[MSG_MAX];
    unsigned char *body;
} Stream;

/* One DoH connection (conn.StreamFlow with doh.DohFlow): TCP, TLS, an HTTP/2 session. */
typedef struct Conn {
    struct DohEngine *d;
    int fd, phase, goaway, events, hs_events;
    SSL *ssl;
    SSL_SESSION *session; /* the last session, resumed by the next connection */
    nghttp2_session *h2;
    Stream *streams;
    int nstreams;
    long long start_ns, retry_ns, last_send_ns, carried, answered;
    long long born_ns, close_at_ns; /* up since (an age counts from here); retired: closes at */
    int slot;                       /* the load's slot it serves or served (its policy's) */
    int hangup;                     /* resets once spent and its last request has left */
    unsigned char *wbuf; /* bytes the session produced that the socket has not taken yet */
    size_t wlen, wcap;
    long long pending; /* queries whose last frame is in wbuf (socket_sent once taken) */
    int tag;           /* its owner's index for it (the replay's pool entry; the load's: 0) */
} Conn;

typedef struct DohEngine {
    Engine e; /* first: a DohEngine is an Engine to the UDP engine's functions */
    SSL_CTX *ctx;
    nghttp2_session_callbacks *cbs;
    int get, resume;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char *path, *authority, *server_name;
    int nflows, nretiring, retiring_cap;
    ChurnPlan plan;  /* per slot its policy, per class its slots (_fastchurn.h) */
    Conn **flows;    /* the slots */
    Conn **retiring; /* told to go away: closed once their answers are in */
    /* the connections of the interval (stats.Connections) */
    long long opened, errors, resumed, hung_up;
    long long late; /* answers matched after their timeout (already lost) */
    long long writes; /* SSL_write calls that took bytes (the replay's writes()) */
    /* What the server's HTTP/2 layer said (from the start; _fastdoh_h2.h): streams it ended
     * with an error code (RST_STREAM, or above a GOAWAY's last stream id: nghttp2 closes
     * those with REFUSED_STREAM), of them REFUSED_STREAM (not processed: RFC 9113 8.7),
     * of those the ones sent again on their connection, and GOAWAY frames. A reset query
     * not sent again is lost at its timeout. */
    long long streams_reset, streams_refused, streams_retried, goaways;
    /* The replay's: a request the server did not process because its connection goes away
     * (above the GOAWAY's last stream id, or held by nghttp2 when it came) put on its
     * client's next connection: 1, or 0 when it could not be (it is lost). NULL in the
     * load, whose such requests are lost. */
    int (*elsewhere)(struct Conn *c, struct Stream *s);
    PyObject *handshake_us; /* {us: n} */
} DohEngine;

static void conn_close(Conn *c);
static int conn_flush(Conn *c);
static int conn_connect(Conn *c, long long now);
