/* Part of soak.load.replay._fastreplay_stream and _fastreplay_doh: Replay.send (and the
 * backlog rule of Replay.run) for a query of the capture, written once. The engine that
 * includes it defines first its Replay (cloop, rename, woff, ring_k, csent), its
 * retire_client(r, client), and:
 *   SEND_ENGINE(r)  its load Engine (the windows, the id ring)
 *   write_query(r, i, slot, v, q, t)  query i put on its stream's connection (or
 *                   counted send_failed: no connection could take it); -1 with an
 *                   exception set
 * v: due (after the origin), client, loop, class, flags. send_one: -1 with an exception
 * set. */
static int send_one(Replay *r, Py_ssize_t i, const long long *v, PyObject *q, long long origin,
                    long long now) {
    Engine *e = SEND_ENGINE(r);
    long long due = v[0], loop = v[2], second = due / 1000000000LL;
    int client = (int)v[1], cls = (int)v[3];
    long long base = window_base(e, second);
    if (base < 0) return -1;
    long long *n = e->cnt + (base + cls) * NCOUNT;
    if (now - (origin + due) > BACKLOG_NS) { /* too far behind: due, never sent */
        n[SKIPPED]++;
        return 0;
    }
    if (r->cloop[client] != loop) {
        if (r->rename && r->cloop[client] >= 0) retire_client(r, client);
        r->cloop[client] = loop;
    }
    int slot = take_slot(e, now);
    if (slot < 0) { /* 65,536 in flight: this one cannot leave */
        n[SKIPPED]++;
        return 0;
    }
    long long t = mono_ns();
    if (write_query(r, i, slot, v, q, t) < 0) return -1;
    long long us = (t - origin - due) / 1000;
    if (offsets_count(&r->woff[second & e->wmask], us < 0 ? 0 : us) < 0) return -1;
    Py_INCREF(q);
    ring_put(e, slot, cls, second, base, q, t);
    r->ring_k[slot] = client;
    e->sent_total++;
    e->outstanding++;
    r->csent[client]++;
    return 0;
}
