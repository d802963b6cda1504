package resultsdb

import (
	"database/sql"
	"fmt"
	"strings"
	"time"
)

const campaignCols = `id, file, started, ended, status, revision, host`

func scanCampaign(s interface{ Scan(...any) error }) (Campaign, error) {
	var c Campaign
	var started, ended string
	err := s.Scan(&c.ID, &c.File, &started, &ended, &c.Status, &c.Revision, &c.Host)
	c.Started, c.Ended = parseTime(started), parseTime(ended)
	return c, err
}

// Campaigns lists every campaign, newest first.
func (d *DB) Campaigns() ([]Campaign, error) {
	rows, err := d.db.Query(`SELECT ` + campaignCols + ` FROM campaigns ORDER BY started DESC, id DESC`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanCampaign)
}

// CampaignByID is one campaign; sql.ErrNoRows when there is none.
func (d *DB) CampaignByID(id string) (Campaign, error) {
	return scanCampaign(d.db.QueryRow(`SELECT `+campaignCols+` FROM campaigns WHERE id = ?`, id))
}

// Jobs lists a campaign's jobs in the order they started.
func (d *DB) Jobs(campaign string) ([]Job, error) {
	rows, err := d.db.Query(`SELECT campaign, name, kind, status, started, ended, seconds, detail
		FROM jobs WHERE campaign = ? ORDER BY started, name`, campaign)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(s interface{ Scan(...any) error }) (Job, error) {
		var j Job
		var started, ended string
		err := s.Scan(&j.Campaign, &j.Name, &j.Kind, &j.Status, &started, &ended, &j.Seconds, &j.Detail)
		j.Started, j.Ended = parseTime(started), parseTime(ended)
		return j, err
	})
}

const runCols = `id, campaign, job, experiment, protocol, backend, revision, dirty, seed, host, cores, kernel,
	started, ended, status, overrides, dir, damaged`

func scanRun(s interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var seed int64
	var started, ended string
	err := s.Scan(&r.ID, &r.Campaign, &r.Job, &r.Experiment, &r.Protocol, &r.Backend, &r.Revision, &r.Dirty,
		&seed, &r.Host, &r.Cores, &r.Kernel, &started, &ended, &r.Status, &r.Overrides, &r.Dir, &r.Damaged)
	r.Seed = uint64(seed)
	r.Started, r.Ended = parseTime(started), parseTime(ended)
	return r, err
}

// RunFilter selects runs; an empty field matches every run.
type RunFilter struct {
	Campaign   string
	Job        string
	Experiment string
	Backend    string
	Status     string
	Revision   string // a prefix of the revision
	Limit      int    // 0: no limit
}

// where is f's WHERE clause (with a leading space, or empty) and its
// arguments, its columns qualified by prefix ("" or "r.").
func (f RunFilter) where(prefix string) (string, []any) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, v string }{
		{"campaign", f.Campaign}, {"job", f.Job}, {"experiment", f.Experiment},
		{"backend", f.Backend}, {"status", f.Status},
	} {
		if c.v != "" {
			conds = append(conds, prefix+c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if f.Revision != "" {
		conds = append(conds, "substr("+prefix+"revision, 1, ?) = ?")
		args = append(args, len(f.Revision), f.Revision)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Runs lists the runs f selects, newest first.
func (d *DB) Runs(f RunFilter) ([]Run, error) {
	where, args := f.where("")
	q := `SELECT ` + runCols + ` FROM runs` + where + ` ORDER BY started DESC, id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := d.db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanRun)
}

// RunByID is one run; sql.ErrNoRows when there is none.
func (d *DB) RunByID(id string) (Run, error) {
	return scanRun(d.db.QueryRow(`SELECT `+runCols+` FROM runs WHERE id = ?`, id))
}

// Checks lists a run's checks by name.
func (d *DB) Checks(run string) ([]Check, error) {
	rows, err := d.db.Query(`SELECT run, name, verdict, value, detail FROM checks WHERE run = ? ORDER BY name`, run)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(s interface{ Scan(...any) error }) (Check, error) {
		var c Check
		err := s.Scan(&c.Run, &c.Name, &c.Verdict, &c.Value, &c.Detail)
		return c, err
	})
}

func scanFigure(s interface{ Scan(...any) error }) (Figure, error) {
	var f Figure
	err := s.Scan(&f.Run, &f.Name, &f.Value, &f.Unit, &f.N, &f.Lo, &f.Hi, &f.Paper)
	return f, err
}

// Figures lists a run's figures by name.
func (d *DB) Figures(run string) ([]Figure, error) {
	rows, err := d.db.Query(`SELECT run, name, value, unit, n, lo, hi, paper FROM figures WHERE run = ? ORDER BY name`, run)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanFigure)
}

// SampleNames lists the names of a run's samples.
func (d *DB) SampleNames(run string) ([]string, error) {
	rows, err := d.db.Query(`SELECT name FROM samples WHERE run = ? ORDER BY name`, run)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(s interface{ Scan(...any) error }) (string, error) {
		var n string
		return n, s.Scan(&n)
	})
}

// Samples is one named sample of a run; sql.ErrNoRows when there is none.
func (d *DB) Samples(run, name string) ([]float64, error) {
	var b []byte
	if err := d.db.QueryRow(`SELECT vals FROM samples WHERE run = ? AND name = ?`, run, name).Scan(&b); err != nil {
		return nil, err
	}
	return DecodeSamples(b)
}

// Point is one run's value of a figure, with what a trend needs to name
// the night and the revision.
type Point struct {
	Figure
	Campaign string
	Job      string
	Revision string
	Dirty    bool
	Started  time.Time
}

// Series is figure name's value in every run f selects, oldest first
// (the order a trend reads nights in). Runs without the figure are left
// out; a run whose figure is NULL is kept with Value.Valid false.
func (d *DB) Series(f RunFilter, name string) ([]Point, error) {
	where, args := f.where("r.")
	if where == "" {
		where = " WHERE "
	} else {
		where += " AND "
	}
	q := `SELECT f.run, f.name, f.value, f.unit, f.n, f.lo, f.hi, f.paper, r.campaign, r.job, r.revision, r.dirty, r.started
		FROM figures f JOIN runs r ON r.id = f.run` + where + `f.name = ? ORDER BY r.started, r.id`
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := d.db.Query(q, append(args, name)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(s interface{ Scan(...any) error }) (Point, error) {
		var p Point
		var started string
		err := s.Scan(&p.Run, &p.Name, &p.Value, &p.Unit, &p.N, &p.Lo, &p.Hi, &p.Paper,
			&p.Campaign, &p.Job, &p.Revision, &p.Dirty, &started)
		p.Started = parseTime(started)
		return p, err
	})
}

// FigureNames lists the distinct figure names of the runs f selects.
func (d *DB) FigureNames(f RunFilter) ([]string, error) {
	where, args := f.where("")
	rows, err := d.db.Query(`SELECT DISTINCT name FROM figures WHERE run IN (SELECT id FROM runs`+where+`) ORDER BY name`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(s interface{ Scan(...any) error }) (string, error) {
		var n string
		return n, s.Scan(&n)
	})
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
