package tokenpassing

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/config"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/internal/results"
	decl "tokenbed/protocols/tokenpassing"
)

// The configuration the plug-in writes is one the agent loads, with the
// experiment's settings and the start-up token where the experiment asks.
func TestConfigRoundTrip(t *testing.T) {
	e, err := experiments.Parse("x.yaml", []byte(`name: x
duration: 10s
time_scale: 100
defaults:
  agent: {passing: {exchange: 3way, ack_timeout: 250ms, commit_retries: 0}, randomwalk: {hold: 2s}}
agents:
  - name: A
    generate: true
    config: {randomwalk: {hold: 7s, regenerate_after: 3}, wandering: {op: 2s}, fault: skip_ack_check, directory_ttl: 1m}
  - {name: B}
`))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := e.Agent("A")
	a := protocol.Process{Instance: "A.r2", Name: "A", Replica: 2, Addr: netip.MustParseAddrPort("10.77.2.1:7400"), Spec: spec}
	b := protocol.Process{Instance: "B.r2", Name: "B", Replica: 2, Addr: netip.MustParseAddrPort("10.77.2.2:7400")}
	files := protocol.Files{CACert: "/k/ca.crt", Credentials: "/k", Log: "/r/logs/A.r2.jsonl",
		PeerCert: func(i string) string { return "/k/" + i + ".crt" }}
	var out []byte
	out, err = Protocol{}.Config(e, a, []protocol.Process{b}, files, 42)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(path, out, 0o600)
	c, err := config.Load(path)
	if err != nil {
		t.Fatalf("the agent cannot load what the plug-in wrote: %v\n%s", err, out)
	}
	r, err := c.Validate()
	if err != nil {
		t.Fatalf("invalid: %v\n%s", err, out)
	}
	if r.Name != "A.r2" || r.Listen != a.Addr || r.Seed != 42 || r.TimeScale != 100 || r.Role != config.RoleRandomWalk {
		t.Errorf("core fields: %+v", r)
	}
	if len(r.Peers) != 1 || r.Peers[0].Name != "B.r2" || r.Peers[0].Certificate != "/k/B.r2.crt" {
		t.Errorf("peers %+v: want B.r2 with its certificate (replica 2 starts warm)", r.Peers)
	}
	rw, ok := r.Policy.(randomwalk.Config)
	if !ok {
		t.Fatalf("policy configuration %T, want randomwalk.Config", r.Policy)
	}
	if !rw.GenerateAtStart {
		t.Errorf("generate_at_start not set for an agent with generate: true")
	}
	if rw.Hold != 70*time.Millisecond || rw.RegenerateAfter != 3 {
		t.Errorf("randomwalk %+v: want the agent's hold (scaled) over the default's, and regenerate_after", rw)
	}
	if _, ok := c.Policies["wandering"]; !ok {
		t.Errorf("the wandering section was not written:\n%s", out)
	}
	if r.Passing.Exchange != "3way" || r.Passing.AckTimeout != 250*time.Millisecond || r.Passing.CommitRetries != 0 || r.Passing.Fault == 0 {
		t.Errorf("passing %+v", r.Passing)
	}
	if r.DirectoryTTL != 600*time.Millisecond {
		t.Errorf("directory_ttl %v", r.DirectoryTTL)
	}
}

func TestObserverHolder(t *testing.T) {
	o := Protocol{}.NewObserver()
	o.Observe("B.r1", eventlog.Event{Kind: eventlog.TokenAcquired, Token: "t1"})
	o.Observe("A", eventlog.Event{Kind: eventlog.TokenAcquired, Token: "t0"})
	if got, ok := o.Target(decl.TargetHolder, []string{"A.r1", "B.r1"}); !ok || got != "B.r1" {
		t.Errorf("holder of replica 1 = %q %v, want B.r1", got, ok)
	}
	if o.Holds("A") != "t0" {
		t.Errorf("A holds %q", o.Holds("A"))
	}
	o.Down("B.r1")
	if got, ok := o.Target(decl.TargetHolder, []string{"A.r1", "B.r1"}); ok {
		t.Errorf("a crashed agent is still the holder: %q", got)
	}
	o.Observe("A", eventlog.Event{Kind: eventlog.PassCompleted, Token: "t0"})
	if n, what := o.Progress(); n != 1 || what != "passes" {
		t.Errorf("progress %d %s", n, what)
	}
}

func TestBasisAndNominal(t *testing.T) {
	p := Protocol{}
	if op, k := p.Basis(eventlog.Event{Kind: eventlog.TokenAcquired, Token: "x"}); op != results.ClockBegin || k != "x" {
		t.Errorf("acquired: %v %q", op, k)
	}
	if op, _ := p.Basis(eventlog.Event{Kind: eventlog.PassStarted, Token: "x"}); op != results.ClockEnd {
		t.Errorf("pass_started: %v", op)
	}
	e := &experiments.Experiment{TimeScale: 1000}
	if n := p.NominalNS(e, experiments.Agent{}); n != int64(10*time.Millisecond) {
		t.Errorf("default hold at scale 1000: %d ns", n)
	}
	if n := p.NominalNS(e, experiments.Agent{Role: "wandering"}); n != 0 {
		t.Errorf("wandering has no fixed hold: %d", n)
	}
}

// An agent holding several tokens (after a regeneration) is recorded as
// holding the smallest, whatever the map's order: the crash record of a
// simulated run must replay byte for byte.
func TestHoldsIsDeterministic(t *testing.T) {
	for range 50 {
		o := Protocol{}.NewObserver()
		for _, tok := range []string{"30@A", "10@C", "20@B", "15@A", "40@B"} {
			o.Observe("A", eventlog.Event{Kind: eventlog.TokenAcquired, Token: tok})
		}
		if got := o.Holds("A"); got != "10@C" {
			t.Fatalf("A holds %q, want the smallest, 10@C", got)
		}
	}
}

// The plug-in validates an experiment's agent sections: the agent's own
// types decode them (errors at their lines), and the fields the run sets
// for every agent are refused where they are written.
func TestSchemaChecksAgentSections(t *testing.T) {
	_, err := experiments.Parse("x.yaml", []byte(`name: x
duration: 10s
agents:
  - {name: A, generate: true, config: {listen: "10.0.0.9:1", passing: {ack_retries: -1}}}
  - {name: B, role: ring}
`))
	for _, want := range []string{
		`x.yaml:4:48: agents[0].config.listen: set by the harness`,
		`x.yaml:4:85: agents[0].config.passing.ack_retries: must be in 0..1000`,
		`x.yaml:5:21: agents[1].role: "ring": no such role; known: baseline, randomwalk, wandering, wandering-004`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
