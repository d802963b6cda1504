// Package ftn is the FTN lock service's plug-in (seed 001, issue 14):
// the run half of protocol "ftn". Its processes take roles "server" and
// "client"; Config writes each one's agent/ftn/ftnconfig file (every
// server of the experiment in the shared list, 001 "Configuration"),
// Args starts `agent ftn run --config F`, the observer resolves the
// schedule word "leader" from the servers' logs, and the clients'
// holds are the application time. The analysis half is analysis/ftn.
package ftn

import (
	"fmt"
	"slices"
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/harness/results"
)

// Name is the protocol's name in experiment files.
const Name = "ftn"

// TargetLeader is the schedule word for the current leader.
const TargetLeader = "leader"

// Tick is the machines' tick in paper time. The server and client
// timeouts are counted in ticks (agent/ftn/server, agent/ftn/client).
const Tick = 50 * time.Millisecond

// DefaultWorkload is a client's workload when its section names none: 8
// names, 30% shared, one acquisition per second, held 200 ms, with data.
var DefaultWorkload = ftnconfig.Workload{Names: 8, Shared: 0.3, Rate: 1, Hold: 200 * time.Millisecond, Data: true}

// Section is an agent's configuration section in an experiment file
// (defaults.agent, an agent's config): the process's timing and a
// client's workload. The rest of its file (name, addresses, keys, log,
// seed, the server list) the run sets.
//
//	defaults:
//	  agent:
//	    tick: 50ms
//	    server: {election_ticks: 10, server_down_ticks: 10}
//	    workload: {names: 8, shared: 0.3, rate: 1, hold: 200ms, data: true}
type Section struct {
	Tick     time.Duration       `yaml:"tick"`
	Server   ftnconfig.Server    `yaml:"server"`
	Client   ftnconfig.Client    `yaml:"client"`
	Workload *ftnconfig.Workload `yaml:"workload"`
}

// Role implements experiments.Schema: server or client (the default).
func (Protocol) Role(role string) (string, error) {
	switch role {
	case "":
		return ftnconfig.RoleClient, nil
	case ftnconfig.RoleServer, ftnconfig.RoleClient:
		return role, nil
	}
	return "", fmt.Errorf("%q: roles are %s, %s", role, ftnconfig.RoleClient, ftnconfig.RoleServer)
}

// Targets implements experiments.Schema: "leader", the server leading
// when the step runs.
func (Protocol) Targets() []string { return []string{TargetLeader} }

// CheckAgents implements experiments.Schema: at least one server (the
// clients register through one, 001 "The Client List"), and no
// generate: servers create a token's entry when it is first asked for,
// so there is nothing to generate and the field would only mislead.
func (Protocol) CheckAgents(agents []experiments.Agent) []experiments.Problem {
	var ps []experiments.Problem
	servers := 0
	for i, a := range agents {
		if a.Role == ftnconfig.RoleServer {
			servers++
		}
		if a.Generate {
			ps = append(ps, experiments.Problem{Path: fmt.Sprintf("$.agents[%d].generate", i),
				Msg: "protocol ftn generates no token: a server creates a token when a client first asks for it"})
		}
	}
	if servers == 0 {
		ps = append(ps, experiments.Problem{Path: "$.agents", Msg: "protocol ftn needs at least one agent with role server"})
	}
	return ps
}

// CheckConfig implements experiments.Schema.
func (Protocol) CheckConfig(a experiments.Agent) error {
	_, err := section(a)
	return err
}

// section decodes and checks an agent's section, recording each problem
// at its line.
func section(a experiments.Agent) (Section, error) {
	var s Section
	if err := a.Config.Decode(&s); err != nil {
		return s, err
	}
	if s.Tick < 0 {
		a.Config.Errorf("tick", "must be positive")
	}
	if w := s.Workload; w != nil {
		if a.Role != ftnconfig.RoleClient {
			a.Config.Errorf("workload", "only a client runs a workload (role %s)", a.Role)
		}
		if w.Names <= 0 {
			a.Config.Errorf("workload.names", "must be positive")
		}
		if w.Shared < 0 || w.Shared > 1 {
			a.Config.Errorf("workload.shared", "%v: want 0..1", w.Shared)
		}
		if w.Rate <= 0 {
			a.Config.Errorf("workload.rate", "must be positive")
		}
		if w.Hold < 0 {
			a.Config.Errorf("workload.hold", "must not be negative")
		}
	}
	return s, nil
}

// Protocol is the plug-in.
type Protocol struct{}

var _ protocol.Protocol = Protocol{}

func init() { protocol.Register(Protocol{}) }

// Name implements protocol.Protocol.
func (Protocol) Name() string { return Name }

// Config implements protocol.Protocol.
func (Protocol) Config(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) ([]byte, error) {
	role := p.Spec.Role
	if role != ftnconfig.RoleServer && role != ftnconfig.RoleClient {
		return nil, fmt.Errorf("%s: role %q: protocol ftn has roles %s and %s", p.Name, role, ftnconfig.RoleServer, ftnconfig.RoleClient)
	}
	all := append([]protocol.Process{p}, peers...)
	var servers []ftnconfig.Peer
	for _, q := range all {
		if q.Spec.Role == ftnconfig.RoleServer && !slices.ContainsFunc(servers, func(s ftnconfig.Peer) bool { return s.Name == q.Instance }) {
			servers = append(servers, ftnconfig.Peer{Name: q.Instance, Addr: q.Addr.String()})
		}
	}
	slices.SortFunc(servers, func(a, b ftnconfig.Peer) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	if len(servers) == 0 {
		return nil, fmt.Errorf("%s: protocol ftn needs at least one process with role server", p.Name)
	}
	ts := e.TimeScale
	if ts == 0 {
		ts = 1
	}
	sec, err := section(p.Spec)
	if err != nil {
		return nil, err
	}
	if sec.Tick == 0 {
		sec.Tick = Tick
	}
	c := ftnconfig.Config{Name: p.Instance, Role: role, Listen: p.Addr.String(), CA: f.CACert, Credentials: f.Credentials,
		Log: f.Log, Seed: seed, Tick: sec.Tick, TimeScale: ts, Servers: servers, Server: sec.Server, Client: sec.Client}
	if role == ftnconfig.RoleClient {
		w := DefaultWorkload
		if sec.Workload != nil {
			w = *sec.Workload
		}
		c.Workload = &w
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	// Check it as the process will.
	if _, err := ftnconfig.Decode(p.Instance+".yaml", b); err != nil {
		return nil, err
	}
	return b, nil
}

// Args implements protocol.Protocol: the role is in the file.
func (Protocol) Args(cfg string, o protocol.Start) []string {
	return []string{"ftn", "run", "--config", cfg}
}

// NominalNS implements protocol.Protocol: a client's hold, scaled.
func (Protocol) NominalNS(e *experiments.Experiment, a experiments.Agent) int64 {
	if a.Role != ftnconfig.RoleClient {
		return 0
	}
	ts := e.TimeScale
	if ts == 0 {
		ts = 1
	}
	hold := DefaultWorkload.Hold
	if s, err := section(a); err == nil && s.Workload != nil {
		hold = s.Workload.Hold
	}
	return int64(float64(hold) / ts)
}

// Basis implements protocol.Protocol: a client's hold of a name runs
// from its acquire's completion to its release's invocation (the time
// it may act on the token).
func (Protocol) Basis(e eventlog.Event) (results.ClockOp, string) {
	r, ok, err := ftnlog.Parse(e)
	if !ok || err != nil {
		return results.ClockNone, ""
	}
	switch {
	case e.Kind == ftnlog.Complete && r.Op == "acquire" && r.Result == ftnlog.OK:
		return results.ClockBegin, r.Name
	case e.Kind == ftnlog.Invoke && r.Op == "release":
		return results.ClockEnd, r.Name
	}
	return results.ClockNone, ""
}

// NewObserver implements protocol.Protocol.
func (Protocol) NewObserver() protocol.Observer { return &observer{holds: map[string][]string{}} }

// observer follows the leader and the clients' holds.
type observer struct {
	leader   string
	holds    map[string][]string // client instance → names held
	acquired int
}

func (o *observer) Observe(inst string, e eventlog.Event) {
	switch e.Kind {
	case "ftn_leader":
		o.leader = inst
	case "ftn_step_down", "ftn_reinit":
		if o.leader == inst {
			o.leader = ""
		}
	case ftnlog.Invoke, ftnlog.Complete:
		r, _, err := ftnlog.Parse(e)
		if err != nil {
			return
		}
		switch {
		case e.Kind == ftnlog.Complete && r.Op == "acquire" && r.Result == ftnlog.OK:
			o.holds[inst] = append(o.holds[inst], r.Name)
			o.acquired++
		case e.Kind == ftnlog.Invoke && r.Op == "release":
			o.holds[inst] = slices.DeleteFunc(o.holds[inst], func(n string) bool { return n == r.Name })
		}
	case "ftn_invalid":
		delete(o.holds, inst)
	}
}

func (o *observer) Down(inst string) {
	if o.leader == inst {
		o.leader = ""
	}
	delete(o.holds, inst)
}

// Target resolves "leader": the server that last logged becoming leader
// and has not stepped down or stopped since.
func (o *observer) Target(word string, among []string) (string, bool) {
	if word != TargetLeader || o.leader == "" || !slices.Contains(among, o.leader) {
		return "", false
	}
	return o.leader, true
}

// Holds names the tokens a client holds, sorted.
func (o *observer) Holds(inst string) string {
	hs := slices.Clone(o.holds[inst])
	slices.Sort(hs)
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += ","
		}
		s += h
	}
	return s
}

func (o *observer) Progress() (int, string) { return o.acquired, "acquisitions" }
