package sim_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/harness/sim"
	"tokenbed/internal/results"
	"tokenbed/protocols"
)

// A whole protocol plug-in, declared, run and judged from this test file
// alone, as a new protocol's own packages would register it: its
// declaration (protocols.Register), its run half with simulated processes
// (protocol.Register) and its analysis half (analysis.Register). Nothing
// in the core lists it; the run and the analysis find it by the
// experiment's protocol name. Its processes pass one baton round a ring:
// the holder stays inside for its configured stay, leaves and hands the
// baton to the next; its checker judges that one at a time is inside and
// that everyone had a turn.
const relayName = "toyrelay"

const (
	relayEnter eventlog.Kind = "relay_enter"
	relayLeave eventlog.Kind = "relay_leave"
)

type relayDecl struct{}

var _ protocols.Declaration = relayDecl{}

func (relayDecl) Name() string { return relayName }

func (relayDecl) Role(role string) (string, error) {
	if role == "" || role == "runner" {
		return "runner", nil
	}
	return "", fmt.Errorf("%q: the only role is runner", role)
}

// relaySection is an agent's config section in the experiment file.
type relaySection struct {
	Stay time.Duration `yaml:"stay"`
}

func (relayDecl) CheckConfig(a experiments.Agent) error {
	var s relaySection
	if err := a.Config.Decode(&s); err != nil {
		return err
	}
	if s.Stay <= 0 {
		a.Config.Errorf("stay", "must be positive")
	}
	return nil
}

func (relayDecl) Targets() []string { return nil }

func (relayDecl) CheckAgents([]experiments.Agent) []experiments.Problem { return nil }

func (relayDecl) Basis(e eventlog.Event) (results.ClockOp, string) {
	switch e.Kind {
	case relayEnter:
		return results.ClockBegin, "baton"
	case relayLeave:
		return results.ClockEnd, "baton"
	}
	return results.ClockNone, ""
}

// relay is the run half.
type relay struct{ relayDecl }

var (
	_ protocol.Protocol  = relay{}
	_ protocol.Simulated = relay{}
)

// relayConfig is a process's configuration file.
type relayConfig struct {
	Stay  time.Duration  `json:"stay"`
	First bool           `json:"first"`
	Next  netip.AddrPort `json:"next"`
	Log   string         `json:"log"`
}

// Config makes a ring in instance order: the first instance starts with
// the baton and hands it to the next.
func (relay) Config(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) ([]byte, error) {
	var s relaySection
	if err := p.Spec.Config.Decode(&s); err != nil {
		return nil, err
	}
	ring := append([]protocol.Process{p}, peers...)
	slices.SortFunc(ring, func(a, b protocol.Process) int { return strings.Compare(a.Instance, b.Instance) })
	i := slices.IndexFunc(ring, func(q protocol.Process) bool { return q.Instance == p.Instance })
	return json.Marshal(relayConfig{Stay: s.Stay, First: i == 0, Next: ring[(i+1)%len(ring)].Addr, Log: f.Log})
}

func (relay) Args(cfg string, o protocol.Start) []string { return []string{"relay", "--config", cfg} }

func (relay) NominalNS(*experiments.Experiment, experiments.Agent) int64 { return 0 }

func (relay) NewObserver() protocol.Observer { return &relayObserver{} }

func (relay) SimProcess(cfg string, o protocol.Start, now time.Time) (sim.Process, string, error) {
	b, err := os.ReadFile(cfg)
	if err != nil {
		return nil, "", err
	}
	var c relayConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, "", fmt.Errorf("%s: %w", cfg, err)
	}
	return &relayProc{c: c}, c.Log, nil
}

// relayObserver counts the batons handed on.
type relayObserver struct{ passes int }

func (o *relayObserver) Observe(inst string, e eventlog.Event) {
	if e.Kind == relayLeave {
		o.passes++
	}
}
func (o *relayObserver) Down(string)                            {}
func (o *relayObserver) Target(string, []string) (string, bool) { return "", false }
func (o *relayObserver) Holds(string) string                    { return "" }
func (o *relayObserver) Progress() (int, string)                { return o.passes, "passes" }

// relayProc is one runner: a pure machine, as the simulator drives it.
type relayProc struct {
	c      relayConfig
	inside bool
	until  time.Time
}

var _ sim.Process = (*relayProc)(nil)

func (p *relayProc) enter(now time.Time) sim.Output {
	p.inside, p.until = true, now.Add(p.c.Stay)
	return sim.Output{Events: []eventlog.Event{{Kind: relayEnter}}}
}

// Start logs agent_started first: the runner waits for it from every
// process, of any protocol.
func (p *relayProc) Start(now time.Time) sim.Output {
	out := sim.Output{Events: []eventlog.Event{{Kind: eventlog.AgentStarted, Role: "runner"}}}
	if p.c.First {
		out.Events = append(out.Events, p.enter(now).Events...)
	}
	return out
}

func (p *relayProc) Receive(now time.Time, _ netip.AddrPort, data []byte) sim.Output {
	if string(data) != "baton" || p.inside {
		return sim.Output{}
	}
	return p.enter(now)
}

func (p *relayProc) Tick(now time.Time) sim.Output {
	if !p.inside || now.Before(p.until) {
		return sim.Output{}
	}
	p.inside = false
	return sim.Output{Events: []eventlog.Event{{Kind: relayLeave}}, Packets: []sim.Packet{{To: p.c.Next, Data: []byte("baton")}}}
}

func (p *relayProc) Deadline() (time.Time, bool) { return p.until, p.inside }

func (p *relayProc) Stop(now time.Time, reason string) sim.Output {
	var out sim.Output
	if p.inside {
		p.inside = false
		out.Events = append(out.Events, eventlog.Event{Kind: relayLeave})
	}
	out.Events = append(out.Events, eventlog.Event{Kind: eventlog.AgentStopping, Reason: reason})
	return out
}

func init() {
	protocols.Register(relayDecl{})
	protocol.Register(relay{})
	analysis.Register(analysis.Plugin{Protocol: relayName, Checkers: []analysis.NamedChecker{
		{Name: "one-inside", Checker: analysis.CheckerFunc(checkOneInside)},
	}})
}

// checkOneInside judges that nobody enters while another is inside and
// that every runner had a turn. Context.Events gives each process's log
// in turn, so the stays are gathered first and compared in time order.
func checkOneInside(c *analysis.Context) analysis.Requirement {
	type stay struct {
		who         string
		enter, left int64
	}
	var stays []stay
	open := map[string]int{} // runner → its stay not yet left
	err := c.Events(func(e eventlog.Event) error {
		switch e.Kind {
		case relayEnter:
			open[e.Agent] = len(stays)
			stays = append(stays, stay{e.Agent, e.WallNS, 1<<63 - 1})
		case relayLeave:
			if i, ok := open[e.Agent]; ok {
				stays[i].left = e.WallNS
				delete(open, e.Agent)
			}
		}
		return nil
	})
	if err != nil {
		return analysis.Unjudged(err.Error())
	}
	slices.SortFunc(stays, func(a, b stay) int { return cmp.Compare(a.enter, b.enter) })
	turns := map[string]bool{}
	for i, s := range stays {
		turns[s.who] = true
		if i > 0 && s.enter < stays[i-1].left {
			r := analysis.VerdictOf(false)
			r.Value = fmt.Sprintf("%s entered while %s was inside", s.who, stays[i-1].who)
			return r
		}
	}
	r := analysis.VerdictOf(len(turns) == len(c.Topology().Agents))
	r.Value = fmt.Sprintf("%d runners had turns", len(turns))
	return r
}

// TestToyProtocolRunsAndIsJudged: the toy protocol's experiment loads, its
// processes run in the simulator through the runner, and harness analyze
// judges the run with its checker, with no core edit.
func TestToyProtocolRunsAndIsJudged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(path, []byte(`name: relay
protocol: toyrelay
duration: 2s
defaults: {agent: {stay: 100ms}}
agents:
  - {name: A}
  - {name: B}
  - {name: C, config: {stay: 200ms}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := simRun(t, path, "tb7e1a01", 0)
	s, err := analysis.Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.Requirements["one-inside"]
	if !slices.Equal(s.CheckNames, []string{"one-inside"}) || !ok || r.Verdict != analysis.VerdictPass || r.Value != "3 runners had turns" {
		t.Fatalf("checks %v, one-inside %+v: want it alone, passed, 3 runners", s.CheckNames, r)
	}
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	if info.Protocol != relayName {
		t.Errorf("run.json protocol %q, want %s", info.Protocol, relayName)
	}
	// Every 400 ms of the 2 s run the baton goes round (100+100+200 ms):
	// A enters at 0, 400, 800, 1200, 1600 ms.
	b, err := os.ReadFile(filepath.Join(dir, results.LogsDir, "A.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"kind":"relay_enter"`); n < 4 || n > 5 {
		t.Errorf("A entered %d times in 2 s, want about 5 (a round is 400 ms)", n)
	}
}
