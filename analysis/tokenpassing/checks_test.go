package tokenpassing

import (
	"tokenbed/analysis"

	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
)

// These tests judge literal histories (testdata/histories: every agent's
// and the harness's events in one JSON-lines file) with no run and no
// root, each against the verdicts it must get.

type literal struct {
	exp  string // experiment file in testdata/histories ("" none)
	cf   *captureFacts
	info results.RunInfo
}

// judgeFile judges a literal history. Unless told otherwise, its capture
// is one in which every acquisition's Commit arrived and verifies.
func judgeFile(t *testing.T, name string, l literal) (*summary, *history) {
	t.Helper()
	h, err := readHistory(filepath.Join("..", "testdata", "histories", name))
	if err != nil {
		t.Fatal(err)
	}
	var exp *experiments.Experiment
	if l.exp != "" {
		if exp, err = experiments.Load(filepath.Join("..", "testdata", "histories", l.exp)); err != nil {
			t.Fatal(err)
		}
	}
	if l.cf == nil {
		l.cf = capturedCommits(h)
	}
	if l.info.Status == "" {
		l.info.Status = "ok"
	}
	return judge(input{info: l.info, exp: exp, h: h, cf: l.cf}).s, h
}

// capturedCommits is a capture holding a verified Commit for every
// acquisition by Commit in h.
func capturedCommits(h *history) *captureFacts {
	cf := &captureFacts{present: true, complete: true, verified: map[commitKey]bool{}, badSig: map[commitKey]bool{}, lostByLink: map[string]int{}}
	for _, e := range h.evs {
		if e.kind == eventlog.TokenAcquired && e.reason == "commit" {
			cf.verified[commitKey{e.token, e.session, e.peer, e.agent}] = true
		}
	}
	return cf
}

func wantVerdicts(t *testing.T, s *summary, want map[string]analysis.Verdict) {
	t.Helper()
	for k, v := range want {
		if r := s.Requirements[k]; r.Verdict != v || r.Pass != (v == analysis.VerdictPass) {
			t.Errorf("%s: %s (pass=%v), want %s: %s", k, r.Verdict, r.Pass, v, r.Detail)
		}
	}
}

var allPass = map[string]analysis.Verdict{"loss": analysis.VerdictPass, "duplication": analysis.VerdictPass, "latency": analysis.VerdictPass, "validation": analysis.VerdictPass,
	"liveness": analysis.VerdictPass, "agents": analysis.VerdictPass}

func TestLiteralCirculatingPassesEveryCheck(t *testing.T) {
	s, _ := judgeFile(t, "circulating.jsonl", literal{exp: "experiment.yaml"})
	wantVerdicts(t, s, allPass)
	if len(s.Failed()) != 0 || len(s.NotJudged()) != 0 {
		t.Errorf("failed %v, not judged %v", s.Failed(), s.NotJudged())
	}
}

// A circulation that stops while (i)–(iv) pass fails liveness: the
// requirements of 002 §2 say nothing of progress.
func TestLiteralStalledCirculationFailsLiveness(t *testing.T) {
	s, _ := judgeFile(t, "stalled.jsonl", literal{exp: "experiment.yaml"})
	want := map[string]analysis.Verdict{}
	for k, v := range allPass {
		want[k] = v
	}
	want["liveness"] = analysis.VerdictFail
	wantVerdicts(t, s, want)
	l := s.Requirements["liveness"]
	if s.LongestGapS < 49 || !strings.Contains(l.Detail, "longest time without an acquisition 5") || !strings.Contains(l.Detail, "two visits (2.600 s") {
		t.Errorf("longest gap %.3f s; detail %q: want the 50 s stall against the 2.6 s bound, and how the bound is derived", s.LongestGapS, l.Detail)
	}
}

// The members of a replica start before its token creator (the runner
// starts creators last; containers start one by one, seconds for a
// replica): the wait until the creator started is not a stall.
func TestLiteralLateCreatorIsNoStall(t *testing.T) {
	s, _ := judgeFile(t, "late-creator.jsonl", literal{exp: "experiment.yaml"})
	wantVerdicts(t, s, allPass)
	if s.LongestGapS > 2.6 {
		t.Errorf("longest gap %.3f s: the 4 s before the creator started counted as a stall", s.LongestGapS)
	}
}

// A circulation that goes on, each gap under the bound, at less than one
// acquisition per visit bound fails on its throughput.
func TestLiteralSlowCirculationFailsThroughput(t *testing.T) {
	s, _ := judgeFile(t, "slow.jsonl", literal{exp: "experiment.yaml"})
	l := s.Requirements["liveness"]
	if l.Verdict != analysis.VerdictFail || !strings.Contains(l.Detail, "too slow: replica 0") || s.LongestGapS > 2.6 {
		t.Errorf("liveness %+v, longest gap %.3f s: want a throughput failure with every gap under 2.6 s", l, s.LongestGapS)
	}
	if len(s.Phases) != 1 || !s.Phases[0].Judged || s.Phases[0].PerPaperS > 0.51 || s.Phases[0].PerPaperS < 0.49 {
		t.Errorf("phases %+v: want one judged phase at 0.5 acquisitions per paper s", s.Phases)
	}
}

// A check with nothing to judge says so and neither passes nor fails.
func TestLiteralNothingToJudgeIsNotJudged(t *testing.T) {
	s, _ := judgeFile(t, "idle.jsonl", literal{exp: "experiment.yaml", cf: &captureFacts{}})
	wantVerdicts(t, s, map[string]analysis.Verdict{"loss": analysis.VerdictNotJudged, "duplication": analysis.VerdictNotJudged, "validation": analysis.VerdictNotJudged})
	if !strings.Contains(s.Requirements["validation"].Detail, "no capture") {
		t.Errorf("validation: %+v", s.Requirements["validation"])
	}
	// No latency figures in the experiment, no experiment at all, no
	// capture: not judged, each saying why.
	src, _ := os.ReadFile(filepath.Join("..", "testdata", "histories", "experiment.yaml"))
	noFigures := strings.Split(string(src), "checks:")[0]
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "nofig.yaml"), []byte(noFigures), 0o644)
	exp, err := experiments.Load(filepath.Join(dir, "nofig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := readHistory(filepath.Join("..", "testdata", "histories", "circulating.jsonl"))
	s = judge(input{exp: exp, h: h, cf: &captureFacts{}}).s
	wantVerdicts(t, s, map[string]analysis.Verdict{"latency": analysis.VerdictNotJudged, "validation": analysis.VerdictNotJudged, "liveness": analysis.VerdictPass})
	if d := s.Requirements["latency"].Detail; !strings.Contains(d, "not judged: no latency figures in the experiment") {
		t.Errorf("latency detail %q", d)
	}
	s = judge(input{h: h, cf: capturedCommits(h)}).s
	wantVerdicts(t, s, map[string]analysis.Verdict{"latency": analysis.VerdictNotJudged, "liveness": analysis.VerdictNotJudged, "validation": analysis.VerdictPass})
	report := renderReport(s, nil, nil, "")
	if strings.Contains(report, "All four requirements") || !strings.Contains(report, "Not judged (nothing to judge): latency, liveness") ||
		!strings.Contains(report, "| (iii) latency | not judged |") {
		t.Errorf("report header and table:\n%s", report[:min(len(report), 1500)])
	}
}

// A Commit delivered and rejected is not a Commit lost: the receiver had
// it and refused it (002 §3.1).
func TestLiteralLossCausesTellRejectedFromNotDelivered(t *testing.T) {
	s, _ := judgeFile(t, "commit-rejected.jsonl", literal{exp: "experiment.yaml", cf: &captureFacts{}})
	if len(s.Losses) != 1 || s.Losses[0].Cause != "commit-rejected" || !strings.Contains(s.Losses[0].Detail, "bad-signature ×3") || s.Losses[0].Explain {
		t.Errorf("losses %+v: want one commit-rejected (bad-signature ×3), unexplained", s.Losses)
	}
	if s.Requirements["loss"].Verdict != analysis.VerdictFail {
		t.Errorf("loss %+v", s.Requirements["loss"])
	}
	s, _ = judgeFile(t, "commit-not-delivered.jsonl", literal{exp: "experiment.yaml", cf: &captureFacts{}})
	if len(s.Losses) != 1 || s.Losses[0].Cause != "commit-not-delivered" || !strings.Contains(s.Losses[0].Detail, "no capture to confirm") {
		t.Errorf("losses %+v: want one commit-not-delivered", s.Losses)
	}
	// A capture that saw the Commit arrive, and no rejection logged (a
	// flood's sample left it out): delivered, not acquired.
	h, _ := readHistory(filepath.Join("..", "testdata", "histories", "commit-not-delivered.jsonl"))
	cf := capturedCommits(h)
	cf.badSig[commitKey{"1@A", 9, "A", "B"}] = true
	s = judge(input{h: h, cf: cf}).s
	if len(s.Losses) != 1 || s.Losses[0].Cause != "commit-delivered-not-acquired" || !strings.Contains(s.Losses[0].Detail, "does not verify") {
		t.Errorf("losses %+v: want commit-delivered-not-acquired", s.Losses)
	}
}

// An insider minting a copy of the token is a duplication (requirement
// (ii), 002 §2); its crash afterwards does not explain it away.
func TestLiteralInsiderCopyIsADuplication(t *testing.T) {
	s, _ := judgeFile(t, "insider-copy.jsonl", literal{exp: "experiment.yaml"})
	d := s.Requirements["duplication"]
	if d.Verdict != analysis.VerdictFail || len(s.Duplications) != 1 || s.Duplications[0].Agents != [2]string{"B", "M"} || s.Duplications[0].Sessions[1] != 999 {
		t.Fatalf("duplication %+v, %+v: want B and M holding 1@A at once, M in session 999", d, s.Duplications)
	}
	if !slicesContains(s.Failed(), "duplication") {
		t.Errorf("failed checks %v", s.Failed())
	}
}

func slicesContains(l []string, x string) bool {
	for _, y := range l {
		if y == x {
			return true
		}
	}
	return false
}

// seq restarts at 1 in every process; a gap is one within a process
// lifetime.
func TestLiteralSeqGapKeyedByProcessLifetime(t *testing.T) {
	s, h := judgeFile(t, "restarted.jsonl", literal{exp: "experiment.yaml"})
	if h.agents["A"].lifetimes != 2 {
		t.Errorf("A: %d lifetimes, want 2", h.agents["A"].lifetimes)
	}
	var notes []string
	for _, n := range s.Notes {
		if strings.Contains(n, "gap in its sequence numbers") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "B:") || !strings.Contains(notes[0], "seq 10 after 7") {
		t.Errorf("sequence notes %q: want one, for B's lost lines 8 and 9, none for A's restart", notes)
	}
	wantVerdicts(t, s, map[string]analysis.Verdict{"agents": analysis.VerdictPass, "liveness": analysis.VerdictPass, "duplication": analysis.VerdictPass, "loss": analysis.VerdictPass})
}

// The report says exactly what was checked. The
// experiment compares only A>B's median: the latency line names it and no
// mean or p99, and the paper's table gives no verdict on figures the
// check did not compare.
func TestLiteralReportSaysWhatWasChecked(t *testing.T) {
	s, _ := judgeFile(t, "circulating.jsonl", literal{exp: "experiment.yaml"})
	exp, _ := experiments.Load(filepath.Join("..", "testdata", "histories", "experiment.yaml"))
	l := s.Requirements["latency"]
	if l.Verdict != analysis.VerdictPass || !strings.Contains(l.Detail, "A>B p50 0.0060 s vs 0.0060 s") || strings.Contains(l.Detail, "mean") || strings.Contains(l.Detail, "p99") {
		t.Errorf("latency detail %q: want the A>B median only", l.Detail)
	}
	report := renderReport(s, exp, nil, "")
	for _, line := range strings.Split(report, "\n") {
		if strings.HasPrefix(line, "| A>B latency, mean") || strings.HasPrefix(line, "| A>B latency, 99% below") {
			if strings.Contains(line, "FAIL") || strings.Contains(line, "PASS") || !strings.Contains(line, "not checked") {
				t.Errorf("paper table line %q: the check compared only the median", line)
			}
		}
		if strings.HasPrefix(line, "| A>B latency, median") && !strings.Contains(line, "PASS") {
			t.Errorf("paper table line %q: want the median's PASS", line)
		}
	}
}

// A flood is logged as a sample plus rejections_summary counts, so that a
// flood cannot fill the log: analysis counts both, exactly.
func TestLiteralRejectionSummariesCount(t *testing.T) {
	s, _ := judgeFile(t, "flooded.jsonl", literal{exp: "experiment.yaml"})
	if s.Rejections["bad-signature"] != 1000 || s.Rejections["malformed:type"] != 50 || len(s.Rejections) != 2 {
		t.Errorf("rejections %v, want bad-signature 1000 (3 logged, 997 summarised) and malformed:type 50", s.Rejections)
	}
	wantVerdicts(t, s, allPass)
}

// The failure split (studies/failuresplit): a receiver whose wait for the Commit is cut
// short by a newer session of the token logs its commit timeout then
// (agent/passing Receiver.Supersede), after the sender's ack timeout and
// the pass of the newer session. That failure counts as detected by the
// commit timeout (002 §3.3), one whose Move never got through by the ack
// timeout, and neither is a loss. Without B's pass_failed line (the old
// endpoint's log) both would count as ack timeouts.
func TestLiteralSupersededWaitCountsAsCommitTimeout(t *testing.T) {
	s, h := judgeFile(t, "superseded-wait.jsonl", literal{})
	f := s.Failures
	if f.Tolerated != 2 || f.AckTimeout != 1 || f.CommitTimeout != 1 {
		t.Errorf("failures %+v: want 2 tolerated, 1 by the ack timeout, 1 by the commit timeout", f)
	}
	if len(s.Losses) != 0 {
		t.Errorf("losses %+v: want none", s.Losses)
	}
	byCause := map[string]string{}
	for _, x := range h.failures() {
		byCause[fmt.Sprintf("%s>%s/%d", x.From, x.To, x.Session)] = x.DetectedBy
	}
	if want := map[string]string{"A>B/1": "commit_timeout", "B>A/3": "ack_timeout"}; !maps.Equal(byCause, want) {
		t.Errorf("failures by cause %v, want %v", byCause, want)
	}
	// The old endpoint's log of the same run: B's superseded wait unreported.
	h.evs = slices.DeleteFunc(h.evs, func(e ev) bool {
		return e.agent == "B" && e.kind == eventlog.PassFailed && e.reason == "commit_timeout"
	})
	s = judge(input{info: results.RunInfo{Status: "ok"}, h: h, cf: capturedCommits(h)}).s
	if f := s.Failures; f.Tolerated != 2 || f.AckTimeout != 2 || f.CommitTimeout != 0 {
		t.Errorf("without B's report, failures %+v: want 2 by the ack timeout", f)
	}
}
