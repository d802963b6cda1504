package resultsdb

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
)

// UpsertCampaign inserts c or replaces the row with its ID.
func (d *DB) UpsertCampaign(c Campaign) error {
	_, err := d.db.Exec(`INSERT INTO campaigns (id, file, started, ended, status, revision, host)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET file = excluded.file, started = excluded.started,
			ended = excluded.ended, status = excluded.status, revision = excluded.revision, host = excluded.host`,
		c.ID, c.File, timeText(c.Started), timeText(c.Ended), c.Status, c.Revision, c.Host)
	if err != nil {
		return fmt.Errorf("resultsdb: campaign %s: %w", c.ID, err)
	}
	return nil
}

// UpsertJob inserts j or replaces the row with its campaign and name.
func (d *DB) UpsertJob(j Job) error {
	_, err := d.db.Exec(`INSERT INTO jobs (campaign, name, kind, status, started, ended, seconds, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (campaign, name) DO UPDATE SET kind = excluded.kind, status = excluded.status,
			started = excluded.started, ended = excluded.ended, seconds = excluded.seconds, detail = excluded.detail`,
		j.Campaign, j.Name, j.Kind, j.Status, timeText(j.Started), timeText(j.Ended), j.Seconds, j.Detail)
	if err != nil {
		return fmt.Errorf("resultsdb: job %s/%s: %w", j.Campaign, j.Name, err)
	}
	return nil
}

// PutRun writes one run with its checks, figures and samples in one
// transaction, replacing whatever the database held for that run ID.
func (d *DB) PutRun(x Indexed) error { return d.PutRuns([]Indexed{x}) }

// PutRuns writes many runs as PutRun does, in one transaction (indexing
// a thousand runs one transaction each spends its time in fsync).
func (d *DB) PutRuns(xs []Indexed) error {
	tx, err := d.db.Begin()
	if err != nil {
		return fmt.Errorf("resultsdb: %w", err)
	}
	for _, x := range xs {
		if err := putRun(tx, x); err != nil {
			tx.Rollback()
			return fmt.Errorf("resultsdb: run %s: %w", x.Run.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("resultsdb: %w", err)
	}
	return nil
}

func putRun(tx *sql.Tx, x Indexed) error {
	r := x.Run
	if r.ID == "" {
		return fmt.Errorf("no run ID")
	}
	for _, t := range []string{"checks", "figures", "samples"} {
		if _, err := tx.Exec(`DELETE FROM `+t+` WHERE run = ?`, r.ID); err != nil {
			return err
		}
	}
	// The seed is stored as its int64 bit pattern: SQLite integers are
	// signed, and a seed is any uint64. Read back through Seed it is the
	// same number.
	_, err := tx.Exec(`INSERT OR REPLACE INTO runs (id, campaign, job, experiment, protocol, backend, revision, dirty,
			seed, host, cores, kernel, started, ended, status, overrides, dir, damaged)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Campaign, r.Job, r.Experiment, r.Protocol, r.Backend, r.Revision, r.Dirty,
		int64(r.Seed), r.Host, r.Cores, r.Kernel, timeText(r.Started), timeText(r.Ended), r.Status, r.Overrides, r.Dir, r.Damaged)
	if err != nil {
		return err
	}
	for _, c := range x.Checks {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO checks (run, name, verdict, value, detail) VALUES (?, ?, ?, ?, ?)`,
			r.ID, c.Name, c.Verdict, c.Value, c.Detail); err != nil {
			return fmt.Errorf("check %s: %w", c.Name, err)
		}
	}
	for _, f := range x.Figures {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO figures (run, name, value, unit, n, lo, hi, paper) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, f.Name, finite(f.Value), f.Unit, f.N, finite(f.Lo), finite(f.Hi), finite(f.Paper)); err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
	}
	for _, s := range x.Samples {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO samples (run, name, vals) VALUES (?, ?, ?)`,
			r.ID, s.Name, EncodeSamples(s.Vals)); err != nil {
			return fmt.Errorf("samples %s: %w", s.Name, err)
		}
	}
	return nil
}

// finite stores NaN and ±Inf as NULL: SQLite has no NaN (it would store
// NULL anyway, but silently), and an infinite figure is no figure.
func finite(v sql.Null[float64]) sql.Null[float64] {
	if v.Valid && (math.IsNaN(v.V) || math.IsInf(v.V, 0)) {
		return sql.Null[float64]{}
	}
	return v
}

// DeleteRun removes a run with its checks, figures and samples (index
// drops runs whose directory is gone).
func (d *DB) DeleteRun(id string) error {
	tx, err := d.db.Begin()
	if err != nil {
		return err
	}
	for _, t := range []string{"checks", "figures", "samples"} {
		if _, err := tx.Exec(`DELETE FROM `+t+` WHERE run = ?`, id); err != nil {
			tx.Rollback()
			return err
		}
	}
	if _, err := tx.Exec(`DELETE FROM runs WHERE id = ?`, id); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// EncodeSamples is the samples column's encoding: little-endian
// float64s, 8 bytes each, no header.
func EncodeSamples(vs []float64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

// DecodeSamples reads EncodeSamples' encoding; a length not a multiple of
// 8 is an error.
func DecodeSamples(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("resultsdb: samples of %d bytes, not a multiple of 8", len(b))
	}
	vs := make([]float64, len(b)/8)
	for i := range vs {
		vs[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return vs, nil
}
