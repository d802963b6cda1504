package index

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tokenbed/internal/results"
	"tokenbed/internal/resultsdb"
)

// ReadRun reads the run in root/rel into what the database holds of it.
// It never fails: what cannot be read is said in Run.Damaged, and the
// rest is kept.
func ReadRun(root, rel string) resultsdb.Indexed {
	dir := filepath.Join(root, rel)
	x := resultsdb.Indexed{Run: resultsdb.Run{ID: filepath.Base(rel), Dir: filepath.ToSlash(rel)}}
	var damage []string
	note := func(format string, a ...any) { damage = append(damage, fmt.Sprintf(format, a...)) }

	var info results.RunInfo
	if err := readJSON(dir, results.RunFile, &info); err != nil {
		note("%s: %v", results.RunFile, err)
	} else {
		fromInfo(&x.Run, info)
	}
	var sum map[string]json.RawMessage
	switch err := readJSON(dir, results.SummaryFile, &sum); {
	case errors.Is(err, fs.ErrNotExist) && (x.Run.Status == resultsdb.RunRunning || x.Run.Status == resultsdb.RunError || x.Run.Status == resultsdb.RunInterrupted):
		// A run that did not finish has no analysis: not damage.
	case err != nil:
		note("%s: %v", results.SummaryFile, err)
	default:
		if err := fromSummary(&x, sum); err != nil {
			note("%s: %v", results.SummaryFile, err)
		}
	}
	var samples map[string][]float64
	switch err := readJSON(dir, results.SamplesFile, &samples); {
	case errors.Is(err, fs.ErrNotExist):
		// Older runs, and protocols without a samples reader, have none.
	case err != nil:
		note("%s: %v", results.SamplesFile, err)
	default:
		for _, name := range sortedKeys(samples) {
			x.Samples = append(x.Samples, resultsdb.Sample{Name: name, Vals: samples[name]})
		}
	}
	if x.Run.Status == "" {
		// Neither run.json nor summary.json: killed before it started.
		x.Run.Status = resultsdb.RunError
	}
	x.Run.Damaged = strings.Join(damage, "; ")
	return x
}

// readJSON reads dir/name into v, saying where a syntax error is.
func readJSON(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("line %d: %w", 1+strings.Count(string(b[:min(int(se.Offset), len(b))]), "\n"), err)
		}
		return err
	}
	return nil
}

// fromInfo fills r from run.json. Its status (ok | error | interrupted |
// killed | running) becomes the run's until the summary's verdicts say
// pass or fail.
func fromInfo(r *resultsdb.Run, info results.RunInfo) {
	if info.RunID != "" {
		r.ID = info.RunID
	}
	r.Campaign, r.Job = info.Campaign, info.Job
	r.Experiment, r.Protocol, r.Backend = info.Experiment, info.Protocol, info.Backend
	if r.Protocol == "" {
		r.Protocol = "tokenpassing" // runs before the protocol was recorded
	}
	r.Revision, r.Dirty = strings.CutSuffix(info.GitRevision, "-dirty")
	r.Seed, r.Host, r.Cores, r.Kernel = info.Seed, info.Host, info.Cores, info.Kernel
	r.Started, r.Ended = info.Started, info.Finished
	if len(info.Overrides) > 0 {
		b, _ := json.Marshal(info.Overrides) // map[string]string: sorted keys, cannot fail
		r.Overrides = string(b)
	}
	r.Status = statusOf(info.Status)
}

// statusOf is run.json's status (ok | error | interrupted | killed |
// running) as the database's: ok is pass until a check fails.
func statusOf(st string) string {
	switch st {
	case "ok":
		return resultsdb.RunPass
	case "interrupted":
		return resultsdb.RunInterrupted
	case "running":
		return resultsdb.RunRunning
	}
	return resultsdb.RunError
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
