package index

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"tokenbed/internal/results"
	"tokenbed/internal/resultsdb"
)

// DBFile is the database's default name under the results root.
const DBFile = "results.db"

// runID is the harness's run ID (harness run --run-id): tb and six hex
// digits.
var runID = regexp.MustCompile(`^tb[0-9a-f]{6}$`)

// isRun reports whether dir is a results directory: it has run.json or
// summary.json, or it is named as a run and has its experiment (a run
// whose run.json was lost). A study's directories of generated
// experiments and logs, named by scenario, are not runs.
func isRun(dir string) bool {
	has := func(f string) bool { _, err := os.Stat(filepath.Join(dir, f)); return err == nil }
	return has(results.RunFile) || has(results.SummaryFile) ||
		runID.MatchString(filepath.Base(dir)) && has(results.ExperimentFile)
}

// FindRuns lists the runs under root, relative to it, sorted: its
// subdirectories that are runs, and the runs one level below those that
// are not (a swarm's kept seeds). The campaigns' records are not runs.
func FindRuns(root string) ([]string, error) {
	var out []string
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		ents, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || (rel == "" && e.Name() == results.CampaignsDir) {
				continue
			}
			sub := filepath.Join(rel, e.Name())
			if isRun(filepath.Join(root, sub)) {
				out = append(out, sub)
			} else if depth < 1 {
				if err := walk(sub, depth+1); err != nil && !errors.Is(err, fs.ErrPermission) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", 0); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// Stats counts what an index pass did.
type Stats struct {
	Runs, Damaged, Campaigns, Removed int
}

func (s Stats) String() string {
	return fmt.Sprintf("%d runs (%d damaged), %d campaigns, %d removed", s.Runs, s.Damaged, s.Campaigns, s.Removed)
}

// batch is how many runs go in one transaction.
const batch = 200

// Rebuild indexes every run and campaign under root into db, and removes
// from db the runs whose directory is gone. A run ID seen twice (a copy
// of a directory) keeps the first by path, and the second is noted as
// damaged under its own path.
func Rebuild(root string, db *resultsdb.DB) (Stats, error) {
	var st Stats
	rels, err := FindRuns(root)
	if err != nil {
		return st, err
	}
	seen := map[string]string{}
	var xs []resultsdb.Indexed
	for _, rel := range rels {
		x := ReadRun(root, rel)
		if first, dup := seen[x.Run.ID]; dup {
			x.Run.Damaged = strings.TrimPrefix(x.Run.Damaged+"; run ID "+x.Run.ID+" is also "+first, "; ")
			x.Run.ID = filepath.ToSlash(rel)
		}
		seen[x.Run.ID] = rel
		if x.Run.Damaged != "" {
			st.Damaged++
		}
		xs = append(xs, x)
		if len(xs) == batch {
			if err := db.PutRuns(xs); err != nil {
				return st, err
			}
			st.Runs += len(xs)
			xs = xs[:0]
		}
	}
	if err := db.PutRuns(xs); err != nil {
		return st, err
	}
	st.Runs += len(xs)
	old, err := db.Runs(resultsdb.RunFilter{})
	if err != nil {
		return st, err
	}
	for _, r := range old {
		if _, ok := seen[r.ID]; !ok {
			if err := db.DeleteRun(r.ID); err != nil {
				return st, err
			}
			st.Removed++
		}
	}
	cs, err := IndexCampaigns(root, db)
	st.Campaigns = cs
	return st, err
}

// IndexRun indexes the one run in root/rel.
func IndexRun(root, rel string, db *resultsdb.DB) (resultsdb.Indexed, error) {
	x := ReadRun(root, rel)
	return x, db.PutRun(x)
}

// IndexCampaigns indexes every campaign record under root and returns
// how many it read. A record that cannot be read is skipped with its
// directory's name kept as a campaign whose status says why.
func IndexCampaigns(root string, db *resultsdb.DB) (int, error) {
	ents, err := os.ReadDir(filepath.Join(root, results.CampaignsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if err := IndexCampaign(root, e.Name(), db); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// killed reports whether a campaign recorded as running was killed: it
// ran on this host and its process is gone. (A PID reused since reads as
// alive: the campaign stays running until that process ends.)
func killed(c results.CampaignInfo) bool {
	host, _ := os.Hostname()
	if c.PID <= 0 || c.Host != host {
		return false
	}
	return errors.Is(syscall.Kill(c.PID, 0), syscall.ESRCH)
}

// IndexCampaign indexes the record of campaign id and its jobs.
func IndexCampaign(root, id string, db *resultsdb.DB) error {
	var c results.CampaignInfo
	dir := filepath.Join(root, results.CampaignsDir, id)
	tasks, terr := taskJobs(dir)
	err := readJSON(dir, results.CampaignFile, &c)
	switch {
	case terr != nil:
		return db.UpsertCampaign(resultsdb.Campaign{ID: id, Status: "damaged: " + terr.Error()})
	case errors.Is(err, fs.ErrNotExist) && len(tasks) > 0:
		c = fromTasks(id, tasks) // a Slurm submission: its jobs' records only
	case err != nil:
		return db.UpsertCampaign(resultsdb.Campaign{ID: id, Status: "damaged: " + err.Error()})
	default:
		c.Jobs = append(c.Jobs, tasks...)
	}
	if c.ID == "" {
		c.ID = id
	}
	if c.Status == resultsdb.CampaignRunning && killed(c) {
		c.Status = resultsdb.CampaignInterrupted
		for i := range c.Jobs {
			if c.Jobs[i].Status == "running" {
				c.Jobs[i].Status = "interrupted"
			}
		}
	}
	if err := db.UpsertCampaign(resultsdb.Campaign{ID: c.ID, File: c.File, Started: c.Started, Ended: c.Ended,
		Status: c.Status, Revision: c.Revision, Host: c.Host}); err != nil {
		return err
	}
	for _, j := range c.Jobs {
		if err := db.UpsertJob(resultsdb.Job{Campaign: c.ID, Name: j.Name, Kind: j.Kind, Status: j.Status,
			Started: j.Started, Ended: j.Ended, Seconds: j.Seconds, Detail: j.Detail}); err != nil {
			return err
		}
	}
	return nil
}

// taskJobs are the records of the campaign's jobs run one by one as
// Slurm tasks (results.JobsDir), in name order.
func taskJobs(dir string) ([]results.JobInfo, error) {
	ents, err := os.ReadDir(filepath.Join(dir, results.JobsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []results.JobInfo
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var j results.JobInfo
		if err := readJSON(filepath.Join(dir, results.JobsDir), e.Name(), &j); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(results.JobsDir, e.Name()), err)
		}
		out = append(out, j)
	}
	return out, nil
}

// fromTasks is the record of a campaign that has only its tasks' job
// records: from the first start to the last end, failed if a job did not
// pass, running while one runs.
func fromTasks(id string, jobs []results.JobInfo) results.CampaignInfo {
	c := results.CampaignInfo{ID: id, Status: resultsdb.CampaignPassed, Jobs: jobs}
	for _, j := range jobs {
		if c.Started.IsZero() || j.Started.Before(c.Started) {
			c.Started = j.Started
		}
		if j.Ended.After(c.Ended) {
			c.Ended = j.Ended
		}
		switch {
		case j.Status == "running":
			c.Status = resultsdb.CampaignRunning
		case j.Status != "passed" && c.Status != resultsdb.CampaignRunning:
			c.Status = resultsdb.CampaignFailed
		}
	}
	return c
}
