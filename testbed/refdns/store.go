package main

// The data directory and its two on-disk formats.
//
// Format 1 (the old release, -format 1):
//   querylog.db  PRAGMA user_version=1, table query_log(ts, name, qtype, rcode, blocked)
//   token        the API token, plain text
//   allow.txt    the allow list, one exact name a line
// Format 2 (current):
//   querylog.db  PRAGMA user_version=2, table queries(id, ts_ms, name, qtype, rcode, action, duration_us)
//   state.db     settings(key, value) holding the API token; allow_entries(kind, value, source)
//
// The current binary migrates format 1 at start (unless -migrate=false, which
// leaves the old tables and files alone and starts as on an empty directory).

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/miekg/dns"
)

type allowEntry struct {
	Kind   string `json:"kind"` // exact or suffix
	Value  string `json:"value"`
	Source string `json:"source"`
}

type store struct {
	dir    string
	format int
	qdb    *sql.DB // querylog.db
	sdb    *sql.DB // state.db (format 2 only)
	mu     sync.Mutex
}

func openDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&_journal_mode=WAL")
	if err != nil {
		return nil, err
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

func userVersion(db *sql.DB) (int, error) {
	var v int
	err := db.QueryRow("PRAGMA user_version").Scan(&v)
	return v, err
}

func openStore(dir string, format int, migrate bool) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	qdb, err := openDB(filepath.Join(dir, "querylog.db"))
	if err != nil {
		return nil, err
	}
	s := &store{dir: dir, format: format, qdb: qdb}
	found, err := userVersion(qdb)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("querylog.db: %w", err)
	}
	if format == 1 {
		err = s.initV1(found)
	} else {
		err = s.initV2(found, migrate)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *store) close() {
	if s.qdb != nil {
		s.qdb.Close()
	}
	if s.sdb != nil {
		s.sdb.Close()
	}
}

func (s *store) initV1(found int) error {
	if found > 1 {
		return fmt.Errorf("data directory %s is format %d; this binary reads format 1", s.dir, found)
	}
	_, err := s.qdb.Exec(`CREATE TABLE IF NOT EXISTS query_log (
		ts INTEGER NOT NULL, name TEXT NOT NULL, qtype INTEGER NOT NULL,
		rcode INTEGER NOT NULL, blocked INTEGER NOT NULL);
		PRAGMA user_version=1`)
	return err
}

const schemaV2 = `CREATE TABLE IF NOT EXISTS queries (
	id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, name TEXT NOT NULL,
	qtype TEXT NOT NULL, rcode TEXT NOT NULL, action TEXT NOT NULL, duration_us INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS queries_ts ON queries (ts_ms);
PRAGMA user_version=2`

const stateSchema = `CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS allow_entries (
	id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, value TEXT NOT NULL,
	source TEXT NOT NULL, UNIQUE (kind, value))`

func (s *store) initV2(found int, migrate bool) error {
	sdb, err := openDB(filepath.Join(s.dir, "state.db"))
	if err != nil {
		return err
	}
	s.sdb = sdb
	if _, err := sdb.Exec(stateSchema); err != nil {
		return fmt.Errorf("state.db: %w", err)
	}
	if found == 1 && !migrate {
		log.Printf("refdns: WARNING data directory is format 1; -migrate=false leaves it as it is")
	}
	if found == 1 && migrate {
		if err := s.migrateV1(); err != nil {
			return fmt.Errorf("migrating format 1 to 2: %w", err)
		}
	}
	if _, err := s.qdb.Exec(schemaV2); err != nil {
		return fmt.Errorf("querylog.db: %w", err)
	}
	return nil
}

// migrateV1 moves the query log rows, the token file and the plain-text allow
// list into format 2, in one transaction per database; the old files are
// renamed, not deleted, so a failed upgrade can be rolled back by hand.
func (s *store) migrateV1() error {
	tx, err := s.qdb.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(schemaV2); err != nil {
		return err
	}
	if err := copyV1Rows(tx); err != nil {
		return err
	}
	if _, err := tx.Exec("DROP TABLE query_log"); err != nil {
		return err
	}
	var rows int
	if err := tx.QueryRow("SELECT count(*) FROM queries").Scan(&rows); err != nil {
		return err
	}
	token, err := readTrimmed(filepath.Join(s.dir, "token"))
	if err != nil {
		return err
	}
	names, err := readAllowTxt(filepath.Join(s.dir, "allow.txt"))
	if err != nil {
		return err
	}
	if err := s.importState(token, names); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, f := range []string{"token", "allow.txt"} {
		p := filepath.Join(s.dir, f)
		if _, err := os.Stat(p); err == nil {
			if err := os.Rename(p, p+".v1"); err != nil {
				return err
			}
		}
	}
	log.Printf("refdns: migrated data directory from format 1 to 2: query log rows=%d token=%v allow list migrated to structured entries entries=%d",
		rows, token != "", len(names))
	return nil
}

// copyV1Rows maps format 1's numeric qtype and rcode and its blocked flag to
// format 2's names and action.
func copyV1Rows(tx *sql.Tx) error {
	rows, err := tx.Query("SELECT ts, name, qtype, rcode, blocked FROM query_log ORDER BY rowid")
	if err != nil {
		return err
	}
	type v1row struct {
		ts           int64
		name         string
		qtype, rcode int
		blocked      int
	}
	var all []v1row
	for rows.Next() {
		var r v1row
		if err := rows.Scan(&r.ts, &r.name, &r.qtype, &r.rcode, &r.blocked); err != nil {
			rows.Close()
			return err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	ins, err := tx.Prepare(`INSERT INTO queries (ts_ms, name, qtype, rcode, action, duration_us)
		VALUES (?, ?, ?, ?, ?, 0)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, r := range all {
		action := "answered"
		if r.blocked == 1 {
			action = "blocked"
		}
		if _, err := ins.Exec(r.ts*1000, r.name, dns.TypeToString[uint16(r.qtype)],
			dns.RcodeToString[r.rcode], action); err != nil {
			return err
		}
	}
	return nil
}

func (s *store) importState(token string, names []string) error {
	tx, err := s.sdb.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	if token != "" {
		if _, err := tx.Exec("INSERT OR REPLACE INTO settings (key, value) VALUES ('api_token', ?)", token); err != nil {
			return err
		}
	}
	for _, n := range names {
		if _, err := tx.Exec("INSERT OR IGNORE INTO allow_entries (kind, value, source) VALUES ('exact', ?, 'allow.txt')", n); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

func readAllowTxt(path string) ([]string, error) {
	text, err := readTrimmed(path)
	if err != nil || text == "" {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(text, "\n") {
		if n := normName(line); n != "" && !strings.HasPrefix(n, "#") {
			names = append(names, n)
		}
	}
	return names, nil
}

func normName(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// apiToken is the stored token; on first start the one from the environment
// (or a random one, logged) is stored. A stored token wins over the environment.
func (s *store) apiToken(fromEnv string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := s.storedToken()
	if err != nil {
		return "", err
	}
	if stored != "" {
		if fromEnv != "" && fromEnv != stored {
			log.Printf("refdns: REFDNS_TOKEN differs from the stored API token; the stored one is used")
		}
		return stored, nil
	}
	token := fromEnv
	if token == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		token = hex.EncodeToString(b)
		log.Printf("refdns: no REFDNS_TOKEN; generated API token %s", token)
	}
	if s.format == 1 {
		return token, os.WriteFile(filepath.Join(s.dir, "token"), []byte(token+"\n"), 0o600)
	}
	_, err = s.sdb.Exec("INSERT INTO settings (key, value) VALUES ('api_token', ?)", token)
	return token, err
}

func (s *store) storedToken() (string, error) {
	if s.format == 1 {
		return readTrimmed(filepath.Join(s.dir, "token"))
	}
	var v string
	err := s.sdb.QueryRow("SELECT value FROM settings WHERE key = 'api_token'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func (s *store) allowEntries() ([]allowEntry, error) {
	if s.format == 1 {
		names, err := readAllowTxt(filepath.Join(s.dir, "allow.txt"))
		entries := make([]allowEntry, 0, len(names))
		for _, n := range names {
			entries = append(entries, allowEntry{Kind: "exact", Value: n, Source: "allow.txt"})
		}
		return entries, err
	}
	rows, err := s.sdb.Query("SELECT kind, value, source FROM allow_entries ORDER BY id")
	return scanRows(rows, err, func(rows *sql.Rows, e *allowEntry) error {
		return rows.Scan(&e.Kind, &e.Value, &e.Source)
	})
}

// scanRows reads every row of a query (rows, err as Query gives them) with scan:
// an empty result is an empty slice, the first error ends the read.
func scanRows[T any](rows *sql.Rows, err error, scan func(*sql.Rows, *T) error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *store) addAllow(e allowEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.format == 1 {
		if e.Kind != "exact" {
			return fmt.Errorf("format 1 keeps exact names only")
		}
		f, err := os.OpenFile(filepath.Join(s.dir, "allow.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintln(f, e.Value)
		return err
	}
	_, err := s.sdb.Exec("INSERT OR IGNORE INTO allow_entries (kind, value, source) VALUES (?, ?, 'api')", e.Kind, e.Value)
	return err
}

// dbBytes is the query log's size on disk: the database and its WAL.
func (s *store) dbBytes() int64 {
	var total int64
	for _, f := range []string{"querylog.db", "querylog.db-wal"} {
		if st, err := os.Stat(filepath.Join(s.dir, f)); err == nil {
			total += st.Size()
		}
	}
	return total
}

func nowMs() int64 { return time.Now().UnixMilli() }
