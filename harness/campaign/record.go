package campaign

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tokenbed/analysis/index"
	"tokenbed/internal/results"
	"tokenbed/internal/resultsdb"
)

// recorder keeps the campaign's record on disk (the source of truth) and
// in the database. A failure to update the database is reported in the
// record's job detail, never fatal: harness index rebuilds it.
type recorder struct {
	root, dir string
	db        *resultsdb.DB
	info      *results.CampaignInfo
	dbErr     error
	// only: one job of a Slurm submission (runOne). The record is the
	// job's own file, jobs/JOB.json, and there is no database (db nil):
	// the submission's index job builds it.
	only bool
	err  error // the first failure to write the job's record (only)
}

// save writes campaign.json (atomically) and the campaign's row.
func (r *recorder) save() error {
	if r.only {
		return nil // saveJob writes the job's own record
	}
	if err := results.WriteJSON(r.dir, results.CampaignFile, r.info); err != nil {
		return err
	}
	c := r.info
	r.note(r.db.UpsertCampaign(resultsdb.Campaign{ID: c.ID, File: c.File, Started: c.Started, Ended: c.Ended,
		Status: c.Status, Revision: c.Revision, Host: c.Host}))
	return nil
}

// saveJob saves the record and the job's row.
func (r *recorder) saveJob(j *results.JobInfo) {
	if r.only {
		if err := results.WriteJSON(filepath.Join(r.dir, results.JobsDir), j.Name+".json", j); err != nil && r.err == nil {
			r.err = err
		}
		return
	}
	if err := r.save(); err != nil {
		fmt.Fprintf(os.Stderr, "campaign %s: %v\n", r.info.ID, err)
	}
	r.note(r.db.UpsertJob(resultsdb.Job{Campaign: r.info.ID, Name: j.Name, Kind: j.Kind, Status: j.Status,
		Started: j.Started, Ended: j.Ended, Seconds: j.Seconds, Detail: j.Detail}))
}

func (r *recorder) note(err error) {
	if err != nil && r.dbErr == nil {
		r.dbErr = err
		fmt.Fprintf(os.Stderr, "campaign %s: results database: %v (harness index rebuilds it)\n", r.info.ID, err)
	}
}

// indexNew indexes the runs under the root that were not there before
// and carry this campaign's tag.
func (r *recorder) indexNew(before []string) {
	if r.db == nil {
		return
	}
	after, err := index.FindRuns(r.root)
	if err != nil {
		r.note(err)
		return
	}
	var xs []resultsdb.Indexed
	for _, rel := range after {
		if _, found := slices.BinarySearch(before, rel); found {
			continue
		}
		x := index.ReadRun(r.root, rel)
		if x.Run.Campaign == r.info.ID {
			xs = append(xs, x)
		}
	}
	r.note(r.db.PutRuns(xs))
}

// shellQuote is argv as a shell line, to repeat a step by hand.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(c rune) bool {
			return !(c == '/' || c == '.' || c == '-' || c == '_' || c == '=' || c == ':' || c == ',' ||
				c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
		}) < 0 {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
