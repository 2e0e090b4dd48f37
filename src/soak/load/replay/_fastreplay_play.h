/* Part of soak.load.replay._fastreplay and _fastreplay_stream: the play loop both
 * replay engines run, written once. The engine that includes it defines first:
 *   PLAY_SELF            its type (Engine, Replay)
 *   PLAY_NAME            the function's name
 *   PLAY_SEND(self, i, v, q, origin, now)  send query i (v: due, client, loop, class,
 *                        flags; q its question) -> < 0 on a Python error
 *   PLAY_POLL(self, ns)  read replies for at most ns -> < 0 on a Python error
 *   PLAY_HOUSEKEEPING(self)  sweeps, idle sockets
 *   PLAY_HANDLED(self)   the lvalue of the last play's queries counted (sent or skipped)
 *   PLAY_FAILED(self)    after the loop: NULL with an exception set if the engine broke
 *                        a rule of its own (a window past its ring), else (PyObject *)1
 * and may define:
 *   PLAY_STEP_END(self)  after each step's sends, before replies are read (what the step
 *                        handed to its connections written out at once) -> < 0 on a
 *                        Python error; none: nothing to do
 *
 * play(columns, questions, origin_ns, base_ns, loop, first, end_ns, return_ns,
 *      worker, workers) -> (next, ended)
 * A loop of the plan from its query `first`: query i (columns: four int64 each, due in
 * the loop, client, class, flags; its question questions[i - first]) is sent at
 * origin_ns + base_ns + due, until the questions end, a query is due at or after end_ns
 * (ended; end_ns < 0: none), or, once what is due has left, return_ns (monotonic).
 * Only the clients `worker` of `workers` play here (client % workers == worker): the
 * others' queries are another process's, as are those whose client is -1 (a capture
 * that mixes UDP and TCP: Plan.columns marks the other transport's queries so). */
#ifndef PLAY_STEP_END
#define PLAY_STEP_END(self) 0
#endif
static PyObject *PLAY_NAME(PLAY_SELF *self, PyObject *args) {
    Py_buffer b;
    PyObject *qs;
    long long origin, base, loop, end, ret;
    Py_ssize_t first;
    int worker = 0, workers = 1;
    if (!PyArg_ParseTuple(args, "y*O!LLLnLL|ii", &b, &PyList_Type, &qs, &origin, &base, &loop,
                          &first, &end, &ret, &worker, &workers))
        return NULL;
    const long long *cols = b.buf;
    Py_ssize_t n = b.len / (4 * (Py_ssize_t)sizeof(long long));
    Py_ssize_t stop = first + PyList_GET_SIZE(qs), i = first;
    int ended = 0;
    if (first < 0 || stop > n) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "questions past the capture");
        return NULL;
    }
    PLAY_HANDLED(self) = 0;
    for (;;) {
        long long now = mono_ns();
        for (int here = 0; i < stop && here < SEND_STEP; here++, i++) {
            const long long *c = cols + 4 * i;
            long long v[5] = {base + c[0], c[1], loop, c[2], c[3]};
            if (end >= 0 && v[0] >= end) {
                ended = 1;
                break;
            }
            if (c[1] < 0 || (workers > 1 && c[1] % workers != worker)) continue; /* another's */
            if (origin + v[0] > now) break;
            PyObject *q = PyList_GET_ITEM(qs, i - first);
            if (!PyBytes_Check(q)) {
                PyErr_SetString(PyExc_TypeError, "a question is bytes");
                goto fail;
            }
            if (PLAY_SEND(self, i, v, q, origin, now) < 0) goto fail;
            PLAY_HANDLED(self) = i + 1 - first;
            now = mono_ns();
        }
        if (PLAY_STEP_END(self) < 0) goto fail;
        if (ended || i >= stop) break;
        long long due = origin + base + cols[4 * i];
        if (now >= ret && due > now) break;
        long long wait = due - mono_ns(), left = ret - now;
        wait = wait < 0 ? 0 : wait > left ? left : wait;
        if (PLAY_POLL(self, wait > SWEEP_NS ? SWEEP_NS : wait) < 0) goto fail;
        PLAY_HOUSEKEEPING(self);
        if (PyErr_CheckSignals() < 0) goto fail;
    }
    if (PLAY_POLL(self, 0) < 0) goto fail;
    PLAY_HOUSEKEEPING(self);
    PyBuffer_Release(&b);
    if (PLAY_FAILED(self) == NULL) return NULL;
    return Py_BuildValue("(nN)", i, PyBool_FromLong(ended));
fail:
    PyBuffer_Release(&b);
    return NULL;
}
