package main

// The query log: the DNS path hands each event to a bounded queue without
// waiting; one writer drains it into SQLite in batches. When the writer falls
// behind and the queue is full, events are shed and counted
// (refdns_querylog_dropped_total{stage="queue"}), so DNS is never slowed by the
// disk. A trimmer keeps the database under its row and size caps.

import (
	"database/sql"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/miekg/dns"
)

type logEvent struct {
	at       time.Time
	name     string
	qtype    uint16
	rcode    int
	action   string
	duration time.Duration
}

type queryLog struct {
	st    *store
	opts  *options
	m     *metrics
	queue chan logEvent
	done  chan struct{}
	wg    sync.WaitGroup
}

func newQueryLog(st *store, o *options, m *metrics) *queryLog {
	q := &queryLog{st: st, opts: o, m: m, queue: make(chan logEvent, o.queueLen), done: make(chan struct{})}
	m.queueCapacity.Set(float64(o.queueLen))
	// One connection, so the PRAGMAs below hold for every statement: the writer,
	// the trimmer and the API's reads take turns, as SQLite has one writer anyway.
	st.qdb.SetMaxOpenConns(1)
	st.qdb.SetMaxIdleConns(1)
	if o.fsync {
		if _, err := st.qdb.Exec("PRAGMA synchronous=FULL"); err != nil {
			log.Printf("refdns: querylog synchronous=FULL: %v", err)
		}
	} else if _, err := st.qdb.Exec("PRAGMA synchronous=NORMAL"); err != nil {
		log.Printf("refdns: querylog synchronous=NORMAL: %v", err)
	}
	if o.mmapBytes > 0 {
		if _, err := st.qdb.Exec(fmt.Sprintf("PRAGMA mmap_size=%d", o.mmapBytes)); err != nil {
			log.Printf("refdns: querylog mmap_size: %v", err)
		}
	}
	return q
}

// add never blocks: a full queue sheds the event.
func (q *queryLog) add(ev logEvent) {
	select {
	case q.queue <- ev:
	default:
		q.m.dropped.Inc()
	}
}

// start runs the writer until stop.
func (q *queryLog) start() {
	q.wg.Add(1)
	go q.run()
}

func (q *queryLog) run() {
	defer q.wg.Done()
	trim := time.NewTicker(q.opts.trimInterval)
	defer trim.Stop()
	batch := make([]logEvent, 0, q.opts.batchRows)
	for {
		select {
		case ev := <-q.queue:
			batch = append(batch[:0], ev)
			batch = q.fill(batch)
			q.write(batch)
		case <-trim.C:
			q.trim()
		case <-q.done:
			batch = q.fill(batch[:0])
			if len(batch) > 0 {
				q.write(batch)
			}
			return
		}
		q.m.queueLength.Set(float64(len(q.queue)))
	}
}

// fill takes what is already queued, up to a batch.
func (q *queryLog) fill(batch []logEvent) []logEvent {
	for len(batch) < q.opts.batchRows {
		select {
		case ev := <-q.queue:
			batch = append(batch, ev)
		default:
			return batch
		}
	}
	return batch
}

func (q *queryLog) stop() {
	close(q.done)
	q.wg.Wait()
}

func (q *queryLog) write(batch []logEvent) {
	if q.opts.slowDisk > 0 {
		time.Sleep(q.opts.slowDisk)
	}
	tx, err := q.st.qdb.Begin()
	if err != nil {
		q.writeFailed(len(batch), err)
		return
	}
	var ins *sql.Stmt
	if q.st.format == 1 {
		ins, err = tx.Prepare("INSERT INTO query_log (ts, name, qtype, rcode, blocked) VALUES (?, ?, ?, ?, ?)")
	} else {
		ins, err = tx.Prepare(`INSERT INTO queries (ts_ms, name, qtype, rcode, action, duration_us)
			VALUES (?, ?, ?, ?, ?, ?)`)
	}
	if err != nil {
		tx.Rollback() //nolint:errcheck
		q.writeFailed(len(batch), err)
		return
	}
	defer ins.Close()
	for _, ev := range batch {
		if q.st.format == 1 {
			blocked := 0
			if ev.action == "blocked" {
				blocked = 1
			}
			_, err = ins.Exec(ev.at.Unix(), ev.name, ev.qtype, ev.rcode, blocked)
		} else {
			_, err = ins.Exec(ev.at.UnixMilli(), ev.name, dns.TypeToString[ev.qtype],
				dns.RcodeToString[ev.rcode], ev.action, ev.duration.Microseconds())
		}
		if err != nil {
			tx.Rollback() //nolint:errcheck
			q.writeFailed(len(batch), err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		q.writeFailed(len(batch), err)
		return
	}
	q.m.written.Add(float64(len(batch)))
}

func (q *queryLog) writeFailed(n int, err error) {
	q.m.writeDropped.Add(float64(n))
	log.Printf("refdns: ERROR query log write of %d rows: %v", n, err)
}

func (q *queryLog) table() string {
	if q.st.format == 1 {
		return "query_log"
	}
	return "queries"
}

// trim deletes the oldest rows down to 90% of the row cap, or in proportion
// when the file is over its size cap. Freed pages are reused, so the file
// stops growing instead of shrinking (no VACUUM on the hot path).
func (q *queryLog) trim() {
	var rows int64
	if err := q.st.qdb.QueryRow("SELECT count(*) FROM " + q.table()).Scan(&rows); err != nil {
		log.Printf("refdns: ERROR query log count: %v", err)
		return
	}
	q.m.rows.Set(float64(rows))
	size := q.st.dbBytes()
	q.m.dbBytes.Set(float64(size))
	keep := rows
	if rows > int64(q.opts.maxRows) {
		keep = int64(q.opts.maxRows) * 9 / 10
	}
	if size > q.opts.maxBytes && size > 0 {
		bySize := int64(float64(rows) * 0.9 * float64(q.opts.maxBytes) / float64(size))
		if bySize < keep {
			keep = bySize
		}
	}
	if keep >= rows {
		return
	}
	res, err := q.st.qdb.Exec("DELETE FROM "+q.table()+" WHERE rowid IN (SELECT rowid FROM "+
		q.table()+" ORDER BY rowid LIMIT ?)", rows-keep)
	if err != nil {
		log.Printf("refdns: ERROR query log trim: %v", err)
		return
	}
	n, _ := res.RowsAffected()
	q.m.trimmed.Add(float64(n))
	if _, err := q.st.qdb.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		log.Printf("refdns: query log checkpoint: %v", err)
	}
}

type queryRow struct {
	ID         int64  `json:"id"`
	TimeMs     int64  `json:"ts_ms"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Rcode      string `json:"rcode"`
	Action     string `json:"action"`
	DurationUs int64  `json:"duration_us"`
}

func (q *queryLog) recent(limit int) ([]queryRow, error) {
	var rows *sql.Rows
	var err error
	if q.st.format == 1 {
		rows, err = q.st.qdb.Query(`SELECT rowid, ts * 1000, name, qtype, rcode,
			CASE blocked WHEN 1 THEN 'blocked' ELSE 'answered' END, 0
			FROM query_log ORDER BY rowid DESC LIMIT ?`, limit)
	} else {
		rows, err = q.st.qdb.Query(`SELECT id, ts_ms, name, qtype, rcode, action, duration_us
			FROM queries ORDER BY id DESC LIMIT ?`, limit)
	}
	return scanRows(rows, err, func(rows *sql.Rows, r *queryRow) error {
		if q.st.format == 1 {
			var qt, rc int
			err := rows.Scan(&r.ID, &r.TimeMs, &r.Name, &qt, &rc, &r.Action, &r.DurationUs)
			r.Type, r.Rcode = dns.TypeToString[uint16(qt)], dns.RcodeToString[rc]
			return err
		}
		return rows.Scan(&r.ID, &r.TimeMs, &r.Name, &r.Type, &r.Rcode, &r.Action, &r.DurationUs)
	})
}

type topName struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// top counts names over the last `window` of the log (a full scan of that
// part: it gets slower as the log fills, as real stats endpoints do).
func (q *queryLog) top(window time.Duration, limit int) ([]topName, error) {
	var rows *sql.Rows
	var err error
	since := time.Now().Add(-window)
	if q.st.format == 1 {
		rows, err = q.st.qdb.Query(`SELECT name, count(*) FROM query_log WHERE ts >= ?
			GROUP BY name ORDER BY 2 DESC LIMIT ?`, since.Unix(), limit)
	} else {
		rows, err = q.st.qdb.Query(`SELECT name, count(*) FROM queries WHERE ts_ms >= ?
			GROUP BY name ORDER BY 2 DESC LIMIT ?`, since.UnixMilli(), limit)
	}
	return scanRows(rows, err, func(rows *sql.Rows, t *topName) error {
		return rows.Scan(&t.Name, &t.Count)
	})
}

func (q *queryLog) rowCount() (int64, error) {
	var n int64
	err := q.st.qdb.QueryRow("SELECT count(*) FROM " + q.table()).Scan(&n)
	return n, err
}
