/* Part of soak.load.replay's compiled stream loops (_fastreplay_stream.c and
 * _fastreplay_doh.c): a query's send offset counted in its window's {us: n}, in the
 * values OffsetTotals keeps. Included once by each, after Python.h. */

/* _result.three_digits: exact below 1 ms, three significant digits above. */
static long long three_digits(long long us) {
    long long scale = 1;
    while (us >= 1000) us /= 10, scale *= 10;
    return us * scale;
}

/* One query that left `us` after its time, counted in *d (made on first use). 0, or -1
 * with an exception set. */
static int offsets_count(PyObject **d, long long us) {
    if (*d == NULL && (*d = PyDict_New()) == NULL) return -1;
    PyObject *key = PyLong_FromLongLong(three_digits(us));
    if (key == NULL) return -1;
    PyObject *had = PyDict_GetItemWithError(*d, key);
    PyObject *val = PyErr_Occurred() ? NULL : PyLong_FromLongLong(had ? PyLong_AsLongLong(had) + 1 : 1);
    int bad = val == NULL || PyDict_SetItem(*d, key, val) < 0;
    Py_DECREF(key);
    Py_XDECREF(val);
    return bad ? -1 : 0;
}
