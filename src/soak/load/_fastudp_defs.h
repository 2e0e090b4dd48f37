/* Part of soak.load._fastudp (see the top of _fastudp.c): the constants, the Engine,
 * the wire format, the clock, the latency buckets and the pacing. Included once, by
 * _fastudp.c: one translation unit, so the compiler inlines across the parts. */
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
 * abandoned (in flight on a connection the client hung up: the stream loop's), then 16
 * rcodes. */
enum { SENT, COMPLETED, LOST, LATE, WRONG, SKIPPED, ABANDONED, RCODES, NCOUNT = RCODES + 16 };

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
    /* What the sockets took and gave (the audit's witness, kept apart from the windows):
     * datagrams sendmmsg took, datagrams recvmmsg read, queries counted sent after the
     * socket refused them twice. */
    long long sock_sent, sock_received, send_failed;
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
