/* Part of soak.load.replay._fastreplay_stream and _fastreplay_doh: a play step's
 * connections, each written once at the step's end (the play loop's PLAY_STEP_END).
 * The engine that includes it defines first its Replay (owner: per pool
 * entry its stream, -1 while free; stepped: per pool entry, in this step's list; step:
 * SEND_STEP pool entries; nstep) and flush_one(r, i): what pool entry i holds written
 * as far as its socket takes it (released there if it broke). */

/* The step's connections written out, each once: its queries leave together (one
 * write, one TLS record where they fit) as the load engine's batch does. */
static int flush_step(Replay *r) {
    for (int k = 0; k < r->nstep; k++) {
        int i = r->step[k];
        r->stepped[i] = 0;
        if (r->owner[i] >= 0) flush_one(r, i);
    }
    r->nstep = 0;
    return 0;
}

/* Pool entry i has a query to write: listed once for the step's end. */
static void step_add(Replay *r, int i) {
    if (r->stepped[i]) return;
    if (r->nstep == SEND_STEP) flush_step(r); /* never in a play step: one send each */
    r->stepped[i] = 1;
    r->step[r->nstep++] = i;
}
