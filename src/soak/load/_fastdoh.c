/* The DoH loop of a load worker in C: soak.load._fastdoh.Engine.
 *
 * doh.py's loop (HTTP/2 through the pure-Python h2, the TLS through Python's ssl)
 * costs several times dnsperf's CPU per answer (docs/benchmarks.md). Here the same
 * connections are OpenSSL objects (non-blocking, ALPN h2, the previous session resumed)
 * carrying nghttp2 sessions (nghttp2_session_mem_recv / mem_send over SSL_read /
 * SSL_write), many streams in flight each, driven by epoll. A query is one request (POST
 * with an application/dns-message body, or GET with ?dns= base64url), its DNS id 0 on the
 * wire; the answer gets its ring slot as id and is matched and counted by the UDP engine's
 * own code (_fastudp_loop.h: on_reply), into the same windows, the same latency buckets
 * and the same socket counters, handed back by the same take(). Python keeps the pacing,
 * the control pipe and the per-second reports (doh_fast.py), as for the UDP engine.
 *
 * One translation unit in six files (each under the module-size cap): the definitions,
 * HTTP/2, a connection, the loop and the Python face; here, the headers it needs, a
 * missing one said in one line that names its package and nothing after it (the
 * extension is optional, pyproject.toml: the others still build).
 */
#if !__has_include(<nghttp2/nghttp2.h>)
#error "soak.load._fastdoh needs nghttp2's headers: apt-get install libnghttp2-dev (DoH runs on the pure-Python loop without it)"
#elif !__has_include(<openssl/ssl.h>)
#error "soak.load._fastdoh needs OpenSSL's headers: apt-get install libssl-dev (DoH runs on the pure-Python loop without it)"
#else
#include "_fastdoh_defs.h"
#include "_fastdoh_h2.h"
#include "_fastdoh_conn.h"
#include "_fastdoh_loop.h"
#include "_fastdoh_face.h"
#endif
