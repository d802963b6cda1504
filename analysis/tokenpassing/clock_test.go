package tokenpassing

import (
	"strings"
	"testing"

	"tokenbed/agent/node"
)

// analysis reads the agents' default S without importing their node.
func TestDefaultMaxClockSkewIsTheAgents(t *testing.T) {
	if defaultMaxClockSkew != node.DefaultMaxClockSkew {
		t.Errorf("defaultMaxClockSkew %v, the agent's %v", defaultMaxClockSkew, node.DefaultMaxClockSkew)
	}
}

func clockNotes(notes []string) []string {
	var out []string
	for _, n := range notes {
		if strings.HasPrefix(n, "warning: clocks:") {
			out = append(out, n)
		}
	}
	return out
}

// B's wall clock 200 ms behind A's, max_clock_skew the default 100 ms:
// the nonces of A's datagrams, 1.5 ms in flight, put B at least 198.5 ms
// behind A, and the report warns, naming both. B's datagrams to A prove
// nothing about A (A is ahead).
func TestClockBehindBeyondTheBoundWarns(t *testing.T) {
	s, _ := judgeFile(t, "clock-behind.jsonl", literal{exp: "experiment.yaml"})
	w := clockNotes(s.Notes)
	if len(w) != 1 || !strings.Contains(w[0], "B's wall clock was at least 198.5ms behind A's") || !strings.Contains(w[0], "beyond their max_clock_skew 100ms") {
		t.Fatalf("clock warnings %q, want one: B at least 198.5ms behind A, beyond 100ms", w)
	}
	if len(s.Clocks) != 1 {
		t.Fatalf("clock differences %+v, want B behind A only", s.Clocks)
	}
	if d := s.Clocks[0]; d.Behind != "B" || d.Sender != "A" || d.AtLeastS != 0.1985 || !d.Beyond || d.BoundS != 0.1 || d.Samples != 56 {
		t.Errorf("clock difference %+v, want B behind A by 0.1985 s over 56 datagrams, beyond 0.1 s", d)
	}
	if len(s.Failed()) != 0 {
		t.Errorf("a warning, not a failure: failed %v", s.Failed())
	}
}

// 50 ms behind, within the bound: measured and reported, no warning.
func TestClockBehindWithinTheBoundIsNoWarning(t *testing.T) {
	s, _ := judgeFile(t, "clock-within.jsonl", literal{exp: "experiment.yaml"})
	if w := clockNotes(s.Notes); len(w) != 0 {
		t.Errorf("clock warnings %q, want none", w)
	}
	if len(s.Clocks) != 1 || s.Clocks[0].Beyond || s.Clocks[0].AtLeastS != 0.0485 {
		t.Errorf("clock differences %+v, want B behind A by 0.0485 s, within the bound", s.Clocks)
	}
}
