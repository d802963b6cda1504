package analysis

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tokenbed/internal/results"
)

// lockRun writes a results directory of a lock service's run (protocol
// locktest, protocol_test.go) from a literal history: each client's log,
// the harness's, run.json and topology.json.
func lockRun(t *testing.T, history, proto string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "histories", history))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, results.LogsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := map[string]*bytes.Buffer{}
	var topo results.Topology
	for _, line := range strings.SplitAfter(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Agent string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		name := e.Agent
		if name == "harness" {
			name = strings.TrimSuffix(results.HarnessLog, ".jsonl")
		}
		if logs[name] == nil {
			logs[name] = &bytes.Buffer{}
			if e.Agent != "harness" {
				topo.Agents = append(topo.Agents, results.AgentInfo{Name: name, Instance: name, Log: filepath.Join(results.LogsDir, name+".jsonl")})
			}
		}
		logs[name].WriteString(strings.TrimSpace(line) + "\n")
	}
	for name, buf := range logs {
		if err := os.WriteFile(filepath.Join(dir, results.LogsDir, name+".jsonl"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := results.WriteJSON(dir, results.RunFile, results.RunInfo{RunID: "tb000001", Protocol: proto, Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteJSON(dir, results.TopologyFile, topo); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A protocol that registers checkers and no analysis of its own gets the
// frame: its verdicts in summary.json, junit.xml and report.md's table
// under its checks' names, nothing of token passing's.
func TestAnalyzeProtocolWithCheckersOnly(t *testing.T) {
	for _, c := range []struct {
		history string
		want    Verdict
		failed  int
	}{{"locks-ok.jsonl", VerdictPass, 0}, {"locks-overlap.jsonl", VerdictFail, 1}} {
		dir := lockRun(t, c.history, lockProtocol)
		s, err := Analyze(dir)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.Requirements["exclusion"]; r.Verdict != c.want || len(s.Requirements) != 1 || len(s.Failed()) != c.failed {
			t.Errorf("%s: requirements %+v, failed %v: want exclusion %s alone", c.history, s.Requirements, s.Failed(), c.want)
		}
		var js map[string]any
		b, _ := os.ReadFile(filepath.Join(dir, results.SummaryFile))
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatalf("summary.json: %v\n%s", err, b)
		}
		if _, ok := js["passes"]; ok || js["check_names"].([]any)[0] != "exclusion" {
			t.Errorf("summary.json has token passing's figures or lacks the check's name:\n%s", b)
		}
		report, _ := os.ReadFile(filepath.Join(dir, results.ReportFile))
		if !strings.Contains(string(report), "| exclusion | ") || strings.Contains(string(report), "paper") {
			t.Errorf("report.md:\n%s", report)
		}
		junit, _ := os.ReadFile(filepath.Join(dir, results.JUnitFile))
		if !strings.Contains(string(junit), `name="requirement exclusion"`) {
			t.Errorf("junit.xml:\n%s", junit)
		}
	}
}

// A run of a protocol whose analysis is not linked in is an error naming
// the protocol, not a run in which nothing failed.
func TestAnalyzeProtocolNotLinkedIn(t *testing.T) {
	dir := lockRun(t, "locks-ok.jsonl", "nosuchprotocol")
	if _, err := Analyze(dir); err == nil || !strings.Contains(err.Error(), `"nosuchprotocol"`) {
		t.Fatalf("err %v, want one naming the protocol", err)
	}
	// Token passing's analysis lives in its own package, not linked
	// into this test: the default protocol is no exception.
	dir = lockRun(t, "locks-ok.jsonl", "")
	if _, err := Analyze(dir); err == nil || !strings.Contains(err.Error(), `"tokenpassing"`) {
		t.Fatalf("err %v, want one naming tokenpassing", err)
	}
}

// A protocol's figures are written flat beside the envelope, before the
// notes; a value that is not a JSON object is an error.
func TestSummaryFiguresFlat(t *testing.T) {
	s := &Summary{RunID: "tb000001", Requirements: map[string]Requirement{}, Notes: []string{"n"},
		Figures: struct {
			Grants int `json:"grants"`
		}{3}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"requirements":{},"grants":3,"notes":["n"]}`)) {
		t.Errorf("%s", b)
	}
	s.Figures = 3
	if _, err := json.Marshal(s); err == nil {
		t.Error("figures 3 written")
	}
}
