package main

// The HTTP API: /healthz/ready and /metrics without a token; /stats/summary,
// /stats/top, /queries and /allow with `Authorization: Bearer TOKEN` (or
// X-API-Key). /metrics comes from its own registry: the Go runtime and process
// collectors plus the server's counters, nothing from a global default.
// /debug/pprof/ (net/http/pprof: heap, goroutine, profile, ...) needs the token too.

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	reg              *prometheus.Registry
	queries          *prometheus.CounterVec
	dropped          prometheus.Counter
	writeDropped     prometheus.Counter
	written          prometheus.Counter
	trimmed          prometheus.Counter
	queueLength      prometheus.Gauge
	queueCapacity    prometheus.Gauge
	rows             prometheus.Gauge
	dbBytes          prometheus.Gauge
	blocklistEntries prometheus.Gauge
	allowEntries     prometheus.Gauge
	upstreamErrors   prometheus.Counter
	cacheEvictions   prometheus.Counter
	cacheEntries     func() int
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	g := func(name, help string) prometheus.Gauge {
		c := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "refdns_querylog_dropped_total",
		Help: "Query-log events not written: stage=queue when the queue was full (shed), stage=write when SQLite failed.",
	}, []string{"stage"})
	queries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "refdns_queries_total", Help: "DNS queries answered, by how.",
	}, []string{"result"})
	reg.MustRegister(dropped, queries)
	m := &metrics{
		reg:              reg,
		queries:          queries,
		dropped:          dropped.WithLabelValues("queue"),
		writeDropped:     dropped.WithLabelValues("write"),
		written:          f("refdns_querylog_written_total", "Query-log rows written."),
		trimmed:          f("refdns_querylog_trimmed_total", "Query-log rows deleted by the row and size caps."),
		queueLength:      g("refdns_querylog_queue_length", "Events waiting in the query-log queue."),
		queueCapacity:    g("refdns_querylog_queue_capacity", "The query-log queue's capacity."),
		rows:             g("refdns_querylog_rows", "Rows in the query log (at the last trim check)."),
		dbBytes:          g("refdns_querylog_db_bytes", "Query-log database and WAL size (at the last trim check)."),
		blocklistEntries: g("refdns_blocklist_entries", "Names in the block list."),
		allowEntries:     g("refdns_allow_entries", "Entries in the allow list."),
		upstreamErrors:   f("refdns_upstream_errors_total", "Upstream queries that failed (answered SERVFAIL)."),
		cacheEvictions:   f("refdns_cache_evictions_total", "Answer-cache entries evicted by capacity."),
		cacheEntries:     func() int { return 0 },
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "refdns_cache_entries", Help: "Entries in the answer cache.",
	}, func() float64 { return float64(m.cacheEntries()) }))
	return m
}

type api struct {
	srv   *server
	st    *store
	qlog  *queryLog
	m     *metrics
	token string
}

func newAPI(srv *server, st *store, ql *queryLog, m *metrics, token string) http.Handler {
	a := &api{srv: srv, st: st, qlog: ql, m: m, token: token}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz/ready", a.ready)
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/stats/summary", a.auth(a.summary))
	mux.HandleFunc("/stats/top", a.auth(a.top))
	mux.HandleFunc("/queries", a.auth(a.queries))
	mux.HandleFunc("/allow", a.auth(a.allow))
	mux.HandleFunc("/debug/pprof/", a.auth(pprof.Index)) // heap, goroutine, allocs, ... by name
	mux.HandleFunc("/debug/pprof/cmdline", a.auth(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", a.auth(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", a.auth(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", a.auth(pprof.Trace))
	return mux
}

func (a *api) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("X-API-Key")
		if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
			got = strings.TrimPrefix(h, "Bearer ")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.token)) != 1 {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid API token is required"})
			return
		}
		next(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}

func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	if !a.srv.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) summary(w http.ResponseWriter, r *http.Request) {
	rows, err := a.qlog.rowCount()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	byResult := map[string]float64{}
	for _, res := range []string{"local", "blocked", "cached", "forwarded", "refused", "servfail"} {
		byResult[res] = counterValue(a.m.queries.WithLabelValues(res))
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{
		"format":            a.st.format,
		"queries":           byResult,
		"querylog_rows":     rows,
		"querylog_dropped":  counterValue(a.m.dropped),
		"cache_entries":     a.srv.cache.len(),
		"blocklist_entries": len(a.srv.block.Load().(map[string]struct{})),
	})
}

func counterValue(c prometheus.Counter) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil || out.Counter == nil {
		return 0
	}
	return out.Counter.GetValue()
}

func (a *api) top(w http.ResponseWriter, r *http.Request) {
	top, err := a.qlog.top(time.Hour, 10)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, top)
}

func (a *api) queries(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit: 1 to 10000"})
			return
		}
		limit = n
	}
	rows, err := a.qlog.recent(limit)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

func (a *api) allow(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		entries, err := a.st.allowEntries()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, entries)
	case http.MethodPost:
		var e allowEntry
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil || normName(e.Value) == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `body: {"kind": "exact"|"suffix", "value": "name"}`})
			return
		}
		e.Value = normName(e.Value)
		if e.Kind == "" {
			e.Kind = "exact"
		}
		if e.Kind != "exact" && e.Kind != "suffix" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "kind: exact or suffix"})
			return
		}
		e.Source = "api"
		if err := a.st.addAllow(e); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		if err := a.srv.reloadAllow(); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusCreated, e)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "GET or POST"})
	}
}
