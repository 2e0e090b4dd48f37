/* Connection policies (conn.Policy in numbers) and which slots carry which class
 * (conn.slot_plan), shared by the compiled TCP/DoT loop (_faststream_churn.h) and the
 * compiled DoH loop (_fastdoh_loop.h): one copy of when a connection is spent, when a
 * retired one closes and which connections hang up. Needs Python.h (included first). */

/* A slot's connection policy: -1 for none; the share of its class's connections that
 * hang up, and the class whose policy it is. */
typedef struct {
    long long quota, idle_ns, age_ns;
    double hangup_fraction;
    int cls;
} ConnPolicy;

/* A worker's slots: per slot its policy, per class the slots it sends on, where its
 * round robin stands and how many connections it made (which of them hang up). */
typedef struct {
    int nslots, nc;
    ConnPolicy *policy;              /* per slot */
    int **pools, *pool_len, *cursor; /* per class */
    long long *made;                 /* per class */
    int hangups;                     /* some policy hangs up */
} ChurnPlan;

/* Whether a class's connection number n (from 0) hangs up (tcp.hangs_up: the same
 * floating-point sums, so the same connections). */
static int hangs_up(long long n, double fraction) {
    return floor((double)(n + 1) * fraction) > floor((double)n * fraction);
}

/* Slot i gets a new connection: whether it hangs up (tcp.Flows.new_flow). */
static int plan_new_hangs_up(ChurnPlan *pl, int i) {
    const ConnPolicy *p = &pl->policy[i];
    return hangs_up(pl->made[p->cls]++, p->hangup_fraction);
}

/* Whether a connection is done under its slot's policy: its quota carried, or its age
 * (counted from the end of its opening) reached (StreamFlow.spent). */
static int policy_spent(const ConnPolicy *p, long long carried, int up, long long born_ns,
                        long long now) {
    if (p->quota >= 0 && carried >= p->quota) return 1;
    return p->age_ns >= 0 && up && now - born_ns >= p->age_ns;
}

/* Whether a retired connection closes now: once its answers are in (or the last one's
 * timeout passed), its idle time starts (*close_at_ns); over, it closes
 * (StreamFlow.due_to_close). */
static int policy_close_due(const ConnPolicy *p, long long *close_at_ns, long long carried,
                            long long answered, long long last_send_ns, long long timeout_ns,
                            long long now) {
    if (*close_at_ns == 0) {
        if (answered < carried && now - last_send_ns < timeout_ns) return 0;
        *close_at_ns = now + p->idle_ns;
    }
    return now >= *close_at_ns;
}

/* churn: None (every class on every one of `flows` slots, connections that last), or
 * (pools, policies): per class the slots it sends on (conn.slot_plan), per slot (quota or
 * -1, idle_ns, age_ns or -1, hangup_fraction, its class). 0, or -1 with an exception. */
static int churn_plan_setup(ChurnPlan *pl, int nc, int flows, PyObject *churn) {
    PyObject *pools = NULL, *policies = NULL;
    if (churn != Py_None) {
        if (!PyArg_ParseTuple(churn, "O!O!", &PyList_Type, &pools, &PyList_Type, &policies))
            return -1;
        if (PyList_GET_SIZE(pools) != nc || PyList_GET_SIZE(policies) < 1) {
            PyErr_SetString(PyExc_ValueError, "Engine: one pool per class, one policy per slot");
            return -1;
        }
        flows = (int)PyList_GET_SIZE(policies);
    }
    pl->nslots = flows;
    pl->nc = nc;
    pl->policy = PyMem_Calloc((size_t)flows, sizeof(ConnPolicy));
    pl->pools = PyMem_Calloc((size_t)nc, sizeof(int *));
    pl->pool_len = PyMem_Calloc((size_t)nc, sizeof(int));
    pl->cursor = PyMem_Calloc((size_t)nc, sizeof(int));
    pl->made = PyMem_Calloc((size_t)nc, sizeof(long long));
    if (!pl->policy || !pl->pools || !pl->pool_len || !pl->cursor || !pl->made) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < flows; i++) {
        ConnPolicy *p = &pl->policy[i];
        p->quota = p->age_ns = -1;
        if (policies != NULL &&
            !PyArg_ParseTuple(PyList_GET_ITEM(policies, i), "LLLdi", &p->quota, &p->idle_ns,
                              &p->age_ns, &p->hangup_fraction, &p->cls))
            return -1;
        if (p->cls < 0 || p->cls >= nc) {
            PyErr_SetString(PyExc_ValueError, "Engine: a slot's class is out of range");
            return -1;
        }
        if (p->hangup_fraction > 0) pl->hangups = 1;
    }
    for (int c = 0; c < nc; c++) {
        PyObject *pool = pools ? PyList_GET_ITEM(pools, c) : NULL;
        Py_ssize_t n = pool ? (PyList_Check(pool) ? PyList_GET_SIZE(pool) : -1) : flows;
        if (n < 1) {
            PyErr_SetString(PyExc_ValueError, "Engine: each class's pool is a list of slots");
            return -1;
        }
        pl->pools[c] = PyMem_Calloc((size_t)n, sizeof(int));
        if (pl->pools[c] == NULL) { PyErr_NoMemory(); return -1; }
        pl->pool_len[c] = (int)n;
        for (Py_ssize_t k = 0; k < n; k++) {
            long i = pool ? PyLong_AsLong(PyList_GET_ITEM(pool, k)) : (long)k;
            if (i < 0 || i >= flows) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Engine: no such slot");
                return -1;
            }
            pl->pools[c][k] = (int)i;
        }
    }
    return 0;
}

static void churn_plan_free(ChurnPlan *pl) {
    for (int c = 0; pl->pools != NULL && c < pl->nc; c++) PyMem_Free(pl->pools[c]);
    PyMem_Free(pl->pools);
    PyMem_Free(pl->pool_len);
    PyMem_Free(pl->cursor);
    PyMem_Free(pl->made);
    PyMem_Free(pl->policy);
}
