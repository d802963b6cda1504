// Package resultsdb is the results database: one SQLite file indexing
// every campaign, job and run under a results root, with each run's
// checks, figures and samples. The results directories stay the source
// of truth; the database is derived from them (`harness index` rebuilds
// it) and can be deleted at any time.
//
// Users query it with the sqlite3 shell; the schema is in schema.go and
// docs/reference/results-db.md. The driver is modernc.org/sqlite, pure
// Go, so the binaries stay static (CGO_ENABLED=0).
//
// Times are stored as RFC 3339 text in UTC with nanoseconds, which sorts
// as time does. The database is opened in WAL mode so that readers
// (harness trend, harness serve) see a consistent state while a
// campaign writes.
package resultsdb

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is an open results database.
type DB struct {
	db *sql.DB
}

// ErrNewer is returned by Open for a database whose schema version is
// newer than SchemaVersion.
var ErrNewer = errors.New("resultsdb: database written by a newer schema")

// Open opens the database at path, creating it if missing and migrating
// it to SchemaVersion.
func Open(path string) (*DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("resultsdb: open %s: %w", path, err)
	}
	d := &DB{db: db}
	if err := d.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("resultsdb: %s: %w", path, err)
	}
	return d, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// SQL is the underlying handle, for queries the typed helpers do not
// cover. Writers should use the helpers.
func (d *DB) SQL() *sql.DB { return d.db }

// Version is the database's `PRAGMA user_version`.
func (d *DB) Version() (int, error) {
	var v int
	err := d.db.QueryRow(`PRAGMA user_version`).Scan(&v)
	return v, err
}

func (d *DB) migrate() error {
	v, err := d.Version()
	if err != nil {
		return err
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: user_version %d, this harness reads %d", ErrNewer, v, SchemaVersion)
	}
	for ; v < SchemaVersion; v++ {
		tx, err := d.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d→%d: %w", v, v+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// timeText is t as stored: RFC 3339 in UTC with nanoseconds, "" for the
// zero time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseTime reads what timeText wrote; "" and unreadable text give the
// zero time (a hand-edited row must not make a whole listing fail).
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
