package tokenpassing

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/wire"
	"tokenbed/analysis"
	"tokenbed/experiments"
	_ "tokenbed/harness/protocol/tokenpassing" // the run half the runner starts
	"tokenbed/harness/runner"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
)

// These tests run real agents on real namespaces (no impairment, so any
// kernel), then check that the analysis passes a sound run and catches
// deliberately broken agents, each with a failure bundle that points at
// the guilty token and session.

var agentBin string

func TestMain(m *testing.M) { testenv.MainWithAgent(m, &agentBin) }

const base = `
name: analysis-test
seed: 9
duration: 120s
time_scale: 20
defaults:
  agent:
    randomwalk: {hold: 1s, regenerate_after: 10}
    passing: {move_timeout: 50ms, ack_timeout: 50ms, commit_timeout: 50ms}
agents:
  - {name: A, generate: true%s}
  - {name: B}
  - {name: C}
schedule:
  - {action: crash, agent: holder, at: 100s}
checks:
  latency:
    - {link: "A>B", mean: %s, p99: %s, tolerance: 0.15}
`

func run(t *testing.T, agentA, mean, p99 string) string {
	t.Helper()
	testenv.RequireRoot(t, "creates network namespaces")
	src := strings.Replace(strings.Replace(strings.Replace(base, "%s", agentA, 1), "%s", mean, 1), "%s", p99, 1)
	path := filepath.Join(t.TempDir(), "exp.yaml")
	os.WriteFile(path, []byte(src), 0o644)
	e, err := experiments.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
		Impair: runner.ImpairNone, AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func analyze(t *testing.T, dir string) *summary {
	t.Helper()
	s, err := analyzed(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSoundRunPassesEverything(t *testing.T) {
	dir := run(t, "", "1s", "1s") // latency: far off on purpose, see below
	s := analyze(t, dir)
	for _, k := range []string{"duplication", "loss", "validation", "liveness", "agents"} {
		if !s.Requirements[k].Pass {
			t.Errorf("%s failed on a sound run: %+v", k, s.Requirements[k])
		}
	}
	t.Logf("liveness: %s", s.Requirements["liveness"].Detail)
	if s.Passes < 50 || len(s.Losses) != 1 || s.Losses[0].Cause != "holder-crashed" {
		t.Errorf("passes %d, losses %+v: want many passes and one loss, the crashed holder", s.Passes, s.Losses)
	}
	// The latency check compares with the experiment's figures: 1 s is
	// nowhere near loopback latency, so it fails, with a bundle.
	lr := s.Requirements["latency"]
	if lr.Pass || lr.Bundle == "" || !strings.Contains(lr.Detail, "A>B mean") {
		t.Errorf("latency against a 1 s expectation: %+v, want a failure with a bundle", lr)
	}
	for _, f := range []string{results.ReportFile, results.SummaryFile, results.JUnitFile, "plots/latency_cdf.png", "plots/return_time_hist.png", "plots/overview.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", f, err)
		}
	}
	// summary.json and junit.xml parse and agree.
	var js map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err := json.Unmarshal(b, &js); err != nil || js["schema_version"].(float64) != analysis.SchemaVersion {
		t.Errorf("summary.json: %v", err)
	}
	var ju struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	b, _ = os.ReadFile(filepath.Join(dir, results.JUnitFile))
	if err := xml.Unmarshal(b, &ju); err != nil || ju.Tests != len(s.Order()) || ju.Failures != 1 {
		t.Errorf("junit.xml: %+v %v, want one case per check and the latency failure", ju, err)
	}
}

// An agent that takes the token on the Move: two holders, caught by (ii)
// with a bundle naming the token and session.
func TestCatchesAcquireOnMove(t *testing.T) {
	dir := run(t, ", config: {fault: acquire_on_move}", "10ms", "20ms")
	s := analyze(t, dir)
	// A's fault matters when A receives: the sender then still holds it.
	d := s.Requirements["duplication"]
	if d.Pass || len(s.Duplications) == 0 {
		t.Fatalf("duplication not caught: %+v", d)
	}
	v := s.Duplications[0]
	if v.Agents[1] != "A" {
		t.Errorf("guilty agent %v, want A (the broken one) second", v.Agents)
	}
	checkBundle(t, dir, d.Bundle, v.Token)
}

// An agent that commits without waiting for a valid Ack loses the token
// whenever its Move is lost: caught by (i), a loss no crash explains.
func TestCatchesSkipAckCheck(t *testing.T) {
	dir := run(t, ", config: {fault: skip_ack_check, drop_rate: 0.2}", "10ms", "20ms")
	s := analyze(t, dir)
	l := s.Requirements["loss"]
	if l.Pass {
		t.Fatalf("loss not caught: %+v; losses %+v", l, s.Losses)
	}
	// The receiver never took the lost (or refused) Move, so it rejects
	// the Commit that the broken sender sent anyway: delivered and rejected
	// (no-session, or unknown-key before the certificates went round), not
	// a Commit lost.
	var bad *LossOut
	for i := range s.Losses {
		if !s.Losses[i].Explain {
			bad = &s.Losses[i]
			break
		}
	}
	if bad == nil || bad.Cause != "commit-rejected" {
		t.Fatalf("losses %+v: want an unexplained one, its Commit delivered and rejected", s.Losses)
	}
	checkBundle(t, dir, l.Bundle, bad.Token)
}

// A capture without the Commit of one acquisition: caught by (iv).
func TestCatchesAcquisitionWithoutCommit(t *testing.T) {
	dir := run(t, "", "10ms", "20ms")
	// Remove every Commit of session 3 from the capture.
	capPath := filepath.Join(dir, results.CaptureFile)
	if err := dropCommits(capPath, 3); err != nil {
		t.Fatal(err)
	}
	s := analyze(t, dir)
	v := s.Requirements["validation"]
	if v.Pass || len(s.Unvalidated) == 0 {
		t.Fatalf("validation: %+v, want a failure", v)
	}
	for _, u := range s.Unvalidated {
		if !strings.Contains(u, "session 3 ") || !strings.Contains(u, "no Commit in the capture") {
			t.Errorf("unvalidated %q: only session 3's acquisitions lost their Commit", u)
		}
	}
	checkBundle(t, dir, v.Bundle, "")
}

// When the capture itself reported drops, a missing Commit is still a
// failure, but the detail says the capture may be what lost it.
func TestValidationNamesCaptureDrops(t *testing.T) {
	dir := run(t, "", "10ms", "20ms")
	capPath := filepath.Join(dir, results.CaptureFile)
	if err := dropCommits(capPath, 3); err != nil {
		t.Fatal(err)
	}
	if s := analyze(t, dir); strings.Contains(s.Requirements["validation"].Detail, "capture itself dropped") {
		t.Fatalf("no drops recorded, yet the detail blames the capture: %s", s.Requirements["validation"].Detail)
	}
	if err := addCaptureDrops(capPath, 0, 7); err != nil {
		t.Fatal(err)
	}
	v := analyze(t, dir).Requirements["validation"]
	if v.Pass || !strings.Contains(v.Detail, "the capture itself dropped 7 packets") {
		t.Fatalf("validation %+v: want a failure naming the capture's 7 drops", v)
	}
}

// addCaptureDrops rewrites a capture with an interface statistics block
// saying interface iface dropped n packets, as capture.Stop writes one.
func addCaptureDrops(path string, iface int, n uint64) error {
	var received uint64
	all := func(p *pcapread.Packet) bool {
		if p.Iface == iface {
			received++
		}
		return true
	}
	_, err := copyPcap(path, path, all, func(w *pcapgo.NgWriter) error {
		return w.WriteInterfaceStats(iface, pcapgo.NgInterfaceStatistics{LastUpdate: time.Now(), PacketsReceived: received, PacketsDropped: n})
	})
	return err
}

func checkBundle(t *testing.T, dir, bundle, token string) {
	t.Helper()
	if bundle == "" {
		t.Fatal("no failure bundle")
	}
	readme, err := os.ReadFile(filepath.Join(dir, bundle, "README.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "harness pcap") || !strings.Contains(string(readme), "tshark -X lua_script:") || (token != "" && !strings.Contains(string(readme), token)) {
		t.Errorf("bundle README does not give the commands for token %s:\n%s", token, readme)
	}
	tl, _ := os.ReadFile(filepath.Join(dir, bundle, "timeline.txt"))
	if token != "" && !strings.Contains(string(tl), token) {
		t.Errorf("bundle timeline does not show token %s", token)
	}
	if st, err := os.Stat(filepath.Join(dir, bundle, "slice.pcapng")); err != nil || st.Size() == 0 {
		t.Errorf("bundle pcap slice: %v", err)
	}
}

// dropCommits rewrites a capture without the Commits of one session.
func dropCommits(path string, session uint64) error {
	_, err := filterPcap(path, path, func(p *pcapread.Packet) bool {
		if p.UDP != nil {
			if d, err := wire.Decode(p.UDP.Payload); err == nil && d.Type == wire.Commit && d.Session == session {
				return false
			}
		}
		return true
	})
	return err
}
