package resultsdb

import (
	"database/sql"
	"errors"
)

// Facets are the distinct values of the runs' filterable columns, for a
// browser's filter menus.
type Facets struct {
	Experiments []string
	Backends    []string
	Statuses    []string
}

// RunFacets lists the distinct experiments, backends and statuses of
// every run, each sorted.
func (d *DB) RunFacets() (Facets, error) {
	var f Facets
	for _, c := range []struct {
		col string
		to  *[]string
	}{{"experiment", &f.Experiments}, {"backend", &f.Backends}, {"status", &f.Statuses}} {
		// col is one of the three literals above, never input.
		rows, err := d.db.Query(`SELECT DISTINCT ` + c.col + ` FROM runs WHERE ` + c.col + ` != '' ORDER BY 1`)
		if err != nil {
			return f, err
		}
		if *c.to, err = collect(rows, func(s interface{ Scan(...any) error }) (string, error) {
			var v string
			return v, s.Scan(&v)
		}); err != nil {
			return f, err
		}
	}
	return f, nil
}

// PreviousRun is the ID of the run before r of the same job (in a
// campaign) or, outside campaigns, of the same experiment and backend:
// the run to compare it with. "" when there is none.
func (d *DB) PreviousRun(r Run) (string, error) {
	q := `SELECT id FROM runs WHERE experiment = ? AND backend = ? AND campaign = '' AND (started < ? OR (started = ? AND id < ?))
		ORDER BY started DESC, id DESC LIMIT 1`
	args := []any{r.Experiment, r.Backend}
	if r.Job != "" {
		q = `SELECT id FROM runs WHERE job = ? AND (started < ? OR (started = ? AND id < ?))
		ORDER BY started DESC, id DESC LIMIT 1`
		args = []any{r.Job}
	}
	t := timeText(r.Started)
	args = append(args, t, t, r.ID)
	var id string
	err := d.db.QueryRow(q, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}
