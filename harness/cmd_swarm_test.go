package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"tokenbed/internal/results"
)

// harness swarm prints each failing seed with the command that replays
// it, shrinks the first, exits 1; an experiment without a swarm section is
// a usage error naming it.
func TestSwarmCommand(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("swarm", "testdata", "three-agents-swarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bug := filepath.Join(dir, "bug.yaml")
	os.WriteFile(bug, bytes.Replace(b, []byte("\n  agent:\n"), []byte("\n  agent:\n    fault: skip_ack_check\n"), 1), 0o644)
	var out, errOut bytes.Buffer
	code := run([]string{"swarm", "--seeds", "2", "--workers", "2", "--duration", "60s", "--results", dir, bug}, &out, &errOut)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitFailed, out.String(), errOut.String())
	}
	for _, want := range []string{
		`(?m)^seed 1: FAIL .*loss: `,
		`(?m)^  replay: harness run --backend sim --duration 1m0s \S+/seed-1\.yaml$`,
		`(?m)^      or: harness swarm --replay 1 --duration 1m0s \S+/bug\.yaml$`,
		`(?m)^shrunk seed 1: \d+ of \d+ faults still fail`,
		`(?m)^(schedule:|# no drawn fault is needed: seed 1 fails on the experiment's own schedule .*)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	// The swarm is recorded as one run of its experiment, for the index.
	rec, _ := filepath.Glob(filepath.Join(dir, "swarm-*"))
	var sum struct {
		Experiment   string                              `json:"experiment"`
		Requirements map[string]struct{ Verdict string } `json:"requirements"`
		Failing      int                                 `json:"failing"`
		Seeds        int                                 `json:"seeds"`
		PerMinute    float64                             `json:"seeds_per_minute"`
	}
	if len(rec) != 1 || results.ReadJSON(rec[0], results.SummaryFile, &sum) != nil || results.ReadJSON(rec[0], results.RunFile, &results.RunInfo{}) != nil {
		t.Fatalf("swarm record: %v", rec)
	}
	if sum.Experiment != "three-agents-swarm" || sum.Seeds != 2 || sum.Failing < 1 || sum.PerMinute <= 0 ||
		sum.Requirements["seeds"].Verdict != "fail" {
		t.Errorf("swarm summary %+v", sum)
	}
	plain := filepath.Join(dir, "plain.yaml")
	os.WriteFile(plain, b[:bytes.Index(b, []byte("\nswarm:"))+1], 0o644)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"swarm", "--results", dir, plain}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "no swarm section") {
		t.Errorf("without a swarm section: exit %d, %q", code, errOut.String())
	}
}
