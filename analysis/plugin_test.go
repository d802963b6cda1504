package analysis_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/protocols"
)

// A toy protocol, registered from this test file alone, as a new
// protocol's packages register it: its declaration (protocols.Register:
// name, experiment schema, paper-clock basis) and its analysis half
// (analysis.Register: one checker). Nothing in the core lists it. Its
// workers enter and leave one room; the checker finds two inside at once
// from the declaration's basis, looked up by the run's protocol name as
// a real analysis looks it up.
const toyName = "toyroom"

const (
	toyEnter eventlog.Kind = "toy_enter"
	toyLeave eventlog.Kind = "toy_leave"
)

type toyDecl struct{}

var _ protocols.Declaration = toyDecl{}

func (toyDecl) Name() string { return toyName }

func (toyDecl) Role(role string) (string, error) {
	switch role {
	case "":
		return "worker", nil
	case "worker":
		return role, nil
	}
	return "", fmt.Errorf("%q: the only role is worker", role)
}

func (toyDecl) CheckConfig(a experiments.Agent) error {
	var s struct {
		Stay time.Duration `yaml:"stay"`
	}
	if err := a.Config.Decode(&s); err != nil {
		return err
	}
	if s.Stay < 0 {
		a.Config.Errorf("stay", "must not be negative")
	}
	return nil
}

func (toyDecl) Targets() []string { return []string{"inside"} }

func (toyDecl) CheckAgents(agents []experiments.Agent) []experiments.Problem { return nil }

func (toyDecl) Basis(e eventlog.Event) (results.ClockOp, string) {
	switch e.Kind {
	case toyEnter:
		return results.ClockBegin, "room"
	case toyLeave:
		return results.ClockEnd, "room"
	}
	return results.ClockNone, ""
}

func init() {
	protocols.Register(toyDecl{})
	analysis.Register(analysis.Plugin{Protocol: toyName, Checkers: []analysis.NamedChecker{{Name: "alone", Checker: analysis.CheckerFunc(checkAlone)}}})
}

// checkAlone judges that nobody enters while another is inside, by the
// run's protocol's declared basis. It reads the events in the order they
// come, which for the literal histories below is time order; a run's
// Context.Events gives each process's log in turn, so a checker of runs
// orders them by time first (harness/sim/toyprotocol_test.go).
func checkAlone(c *analysis.Context) analysis.Requirement {
	d, err := protocols.Lookup(c.Info().Protocol)
	if err != nil {
		return analysis.Unjudged(err.Error())
	}
	inside, entries := "", 0
	err = c.Events(func(e eventlog.Event) error {
		switch op, _ := d.Basis(e); op {
		case results.ClockBegin:
			if inside != "" {
				return fmt.Errorf("%s entered while %s was inside", e.Agent, inside)
			}
			inside = e.Agent
			entries++
		case results.ClockEnd:
			inside = ""
		}
		return nil
	})
	if err != nil {
		r := analysis.VerdictOf(false)
		r.Value = err.Error()
		return r
	}
	if entries == 0 {
		return analysis.Unjudged("nobody entered")
	}
	return analysis.VerdictOf(true)
}

// TestToyProtocol runs the toy protocol through the registries: its
// experiment parses with its roles, section and target word, and a bad
// section fails at its line; its declaration is found by name; its
// checker judges its runs, and fails one where two were inside at once.
func TestToyProtocol(t *testing.T) {
	e, err := experiments.Parse("toy.yaml", []byte(`name: toy
protocol: toyroom
duration: 10s
defaults: {agent: {stay: 1s}}
agents:
  - {name: A}
  - {name: B, config: {stay: 2s}}
schedule:
  - {action: crash, agent: inside, at: 5s}
`))
	if err != nil {
		t.Fatalf("the toy protocol's experiment: %v", err)
	}
	if a, _ := e.Agent("A"); a.Role != "worker" || !slices.Equal(e.Targets, []string{"inside"}) {
		t.Errorf("role %q, targets %v: want the toy schema's worker and inside", a.Role, e.Targets)
	}
	_, err = experiments.Parse("bad.yaml", []byte(`name: toy
protocol: toyroom
duration: 10s
agents:
  - {name: A}
  - {name: B, config: {stay: -1s}}
`))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:6") || !strings.Contains(err.Error(), "stay") {
		t.Errorf("a negative stay: error %v, want one at bad.yaml:6 naming stay", err)
	}
	if !slices.Contains(protocols.Names(), toyName) {
		t.Errorf("protocols.Names() = %v, without %s", protocols.Names(), toyName)
	}

	ev := func(agent string, k eventlog.Kind, at int64) eventlog.Event {
		return eventlog.Event{Agent: agent, Kind: k, MonoNS: at, WallNS: at}
	}
	for _, c := range []struct {
		name string
		evs  []eventlog.Event
		want analysis.Verdict
	}{
		{"one at a time", []eventlog.Event{ev("A", toyEnter, 1), ev("A", toyLeave, 2), ev("B", toyEnter, 3), ev("B", toyLeave, 4)}, analysis.VerdictPass},
		{"two inside", []eventlog.Event{ev("A", toyEnter, 1), ev("B", toyEnter, 2), ev("B", toyLeave, 3), ev("A", toyLeave, 4)}, analysis.VerdictFail},
		{"nobody", nil, analysis.VerdictNotJudged},
	} {
		ctx := analysis.NewContext(results.RunInfo{RunID: "toy", Protocol: toyName}, results.Topology{}, e, nil,
			func(f func(eventlog.Event) error) error {
				for _, e := range c.evs {
					if err := f(e); err != nil {
						return err
					}
				}
				return nil
			})
		got, err := analysis.Compose(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(got.Names, []string{"alone"}) || got.Verdict() != c.want {
			t.Errorf("%s: checks %v verdict %s (%+v), want alone %s", c.name, got.Names, got.Verdict(), got.Results, c.want)
		}
	}
}
