package experiments_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
)

// A second protocol plugs into the experiment schema without a change to
// package experiments: its roles, its configuration sections (decoded
// into its own types, errors at their lines) and its schedule target
// words are its own.
type lockSchema struct{}

type lockConfig struct {
	Lease   time.Duration `yaml:"lease"`
	Servers int           `yaml:"servers"`
}

func (lockSchema) Role(role string) (string, error) {
	if role == "" {
		return "client", nil
	}
	if role != "server" && role != "client" {
		return "", fmt.Errorf("%q: roles are client, server", role)
	}
	return role, nil
}

func (lockSchema) CheckConfig(a experiments.Agent) error {
	var c lockConfig
	if err := a.Config.Decode(&c); err != nil {
		return err
	}
	if c.Lease < 0 {
		a.Config.Errorf("lease", "must not be negative")
	}
	return nil
}

func (lockSchema) Targets() []string { return []string{"leader"} }

// CheckAgents: a lock service generates no token; it needs a server.
func (lockSchema) CheckAgents(agents []experiments.Agent) []experiments.Problem {
	if !slices.ContainsFunc(agents, func(a experiments.Agent) bool { return a.Role == "server" }) {
		return []experiments.Problem{{Path: "$.agents", Msg: "no server"}}
	}
	return nil
}

func init() { experiments.RegisterSchema("locks", lockSchema{}) }

func TestSecondProtocolSchema(t *testing.T) {
	e, err := experiments.Parse("x.yaml", []byte(`name: x
protocol: locks
duration: 10s
defaults: {role: server, agent: {lease: 2s}}
agents:
  - {name: S1}
  - {name: S2, config: {servers: 2}}
  - {name: C, role: client}
schedule:
  - {action: crash, agent: leader, at: 1s}
  - {action: restart, agent: leader, at: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := e.Agent("C"); c.Role != "client" || !slices.Equal(e.Targets, []string{"leader"}) {
		t.Errorf("role %q targets %v", c.Role, e.Targets)
	}
	var s2 lockConfig
	if a, _ := e.Agent("S2"); a.Config.Decode(&s2) != nil || s2 != (lockConfig{Lease: 2 * time.Second, Servers: 2}) {
		t.Errorf("S2's section %+v: want its own over the defaults", s2)
	}
	expectErrors(t, `name: x
protocol: locks
duration: 10s
agents:
  - {name: S1, role: randomwalk}
  - {name: holder, config: {lease: -1s}}
  - {name: leader, config: {leese: 1s}}
schedule:
  - {action: restart, agent: leader, at: 2s}
`, map[string]int{
		`agents[0].role: "randomwalk": roles are client, server`: 5,
		`agents[1].config.lease: must not be negative`:           6,
		`agents[2].name: "leader": reserved`:                     7,
		`unknown field "leese"`:                                  7,
	})
	// "holder" is token passing's word, not this protocol's.
	expectErrors(t, `name: x
protocol: locks
duration: 10s
agents:
  - {name: A, role: server}
  - {name: B}
schedule:
  - {action: crash, agent: holder, at: 1s}
`, map[string]int{`schedule[0].agent: unknown agent "holder"`: 8})
	// The lifecycle rules apply to the protocol's words.
	expectErrors(t, `name: x
protocol: locks
duration: 10s
agents:
  - {name: A, role: server}
  - {name: B}
schedule:
  - {action: restart, agent: leader, at: 2s}
`, map[string]int{`restart of leader at 2s: no crash of leader`: 8})
	expectErrors(t, "name: x\nprotocol: paxos\nduration: 10s\nagents: [{name: A, generate: true}, {name: B}]\n",
		map[string]int{`protocol: "paxos": no such protocol; known: ftn, locks, tokenpassing`: 2})
}

// What the agents as a whole need is the protocol's rule, through
// Schema.CheckAgents: token passing needs a generator (002 §3.2), a lock
// service a server and no generator.
func TestAgentsRuleIsTheProtocols(t *testing.T) {
	ftn := `name: x
protocol: ftn
duration: 10s
agents:
  - {name: s0, role: server}
  - {name: c0}
`
	if _, err := experiments.Parse("x.yaml", []byte(ftn)); err != nil {
		t.Errorf("an FTN experiment without generate: %v", err)
	}
	expectErrors(t, strings.Replace(ftn, "role: server}", "role: server, generate: true}", 1),
		map[string]int{`agents[0].generate: protocol ftn generates no token`: 5})
	expectErrors(t, strings.Replace(ftn, "role: server", "role: client", 1),
		map[string]int{`agents: protocol ftn needs at least one agent with role server`: 5})
	expectErrors(t, "name: x\nduration: 10s\nagents:\n  - {name: A}\n  - {name: B}\n",
		map[string]int{`agents: no agent has generate: true`: 4})
	expectErrors(t, "name: x\nprotocol: locks\nduration: 10s\nagents:\n  - {name: A, generate: true}\n  - {name: B}\n",
		map[string]int{`agents: no server`: 5})
}
