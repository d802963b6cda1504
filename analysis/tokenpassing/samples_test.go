package tokenpassing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/internal/results"
)

// ReadSamples gives the raw figures behind the summary of a literal run:
// every acquisition, the return times of A and B, the latencies of both
// directions.
func TestReadSamples(t *testing.T) {
	dir := copyRun(t, "clean")
	s, err := analysis.ReadSamples(dir)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquisitionsBefore(t, dir, 1<<62)
	if s.Acquisitions != acq || len(s.Intervals) != acq-1 {
		t.Errorf("%d acquisitions, %d intervals; the logs hold %d acquisitions", s.Acquisitions, len(s.Intervals), acq)
	}
	if len(s.Return["A"]) == 0 || len(s.Return["B"]) == 0 || len(s.Latency["A>B"]) == 0 || len(s.Latency["B>A"]) == 0 {
		t.Errorf("samples: return times %v, latency directions %v", s.Return, keys(s.Latency))
	}
	sum, err := analyzed(copyRun(t, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range sum.Agents {
		if len(s.Return[a.Agent]) != a.Return.N {
			t.Errorf("%s: %d return times, summary says %d", a.Agent, len(s.Return[a.Agent]), a.Return.N)
		}
	}
	for _, d := range sum.Directions {
		if len(s.Latency[d.Link]) != d.Latency.N {
			t.Errorf("%s: %d latencies, summary says %d", d.Link, len(s.Latency[d.Link]), d.Latency.N)
		}
	}
}

// Only what falls inside the replica's shard of the paper timeline
// counts: a real replica runs a few visits past it before the harness
// stops it.
func TestReadSamplesKeepsTheShard(t *testing.T) {
	dir := copyRun(t, "clean")
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	info.ShardSeconds = 30
	if err := results.WriteJSON(dir, results.RunFile, info); err != nil {
		t.Fatal(err)
	}
	s, err := analysis.ReadSamples(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := acquisitionsBefore(t, dir, info.AgentsStartNS+30e9)
	if all := acquisitionsBefore(t, dir, 1<<62); want == all || want == 0 {
		t.Fatalf("the literal run has %d acquisitions, %d in its first 30 s: the test needs some after", all, want)
	}
	if s.Acquisitions != want {
		t.Errorf("%d acquisitions with a 30 s shard, want the %d before 30 s", s.Acquisitions, want)
	}
	for _, rs := range s.Return {
		for _, r := range rs {
			if r > 30 {
				t.Errorf("return time %v s in a 30 s shard", r)
			}
		}
	}
}

// acquisitionsBefore counts token_acquired events in dir's agent logs
// before wall time end.
func acquisitionsBefore(t *testing.T, dir string, end int64) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, results.LogsDir, "*.jsonl"))
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, results.HarnessLog) {
			continue
		}
		evs, err := eventlog.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == eventlog.TokenAcquired && e.WallNS < end {
				n++
			}
		}
	}
	return n
}

func keys(m map[string][]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
