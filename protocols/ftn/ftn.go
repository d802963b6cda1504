// Package ftn declares the FTN lock service of seed 001 to both halves
// of its plug-in: the protocol's name, its processes' roles ("server" and
// "client") and configuration section (timing, a client's workload),
// the schedule word "leader", the paper clock's basis (a client's holds
// are application time) and the event kinds the halves read beyond
// agent/ftn/ftnlog's history records. The run half is harness/protocol/ftn;
// the analysis half is analysis/ftn.
package ftn

import (
	"fmt"
	"time"

	"tokenbed/agent/clock"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/protocols"
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
func (Declaration) Role(role string) (string, error) {
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
func (Declaration) Targets() []string { return []string{TargetLeader} }

// CheckAgents implements experiments.Schema: at least one server (the
// clients register through one, 001 "The Client List"), and no
// generate: servers create a token's entry when it is first asked for,
// so there is nothing to generate and the field would only mislead.
func (Declaration) CheckAgents(agents []experiments.Agent) []experiments.Problem {
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
		if a.Clock != (clock.Skew{}) {
			ps = append(ps, experiments.Problem{Path: fmt.Sprintf("$.agents[%d].clock", i),
				Msg: "protocol ftn's processes run on the host's clock: clock offsets and drifts are for token passing agents"})
		}
	}
	if servers == 0 {
		ps = append(ps, experiments.Problem{Path: "$.agents", Msg: "protocol ftn needs at least one agent with role server"})
	}
	return ps
}

// CheckConfig implements experiments.Schema.
func (Declaration) CheckConfig(a experiments.Agent) error {
	_, err := DecodeSection(a)
	return err
}

// DecodeSection decodes and checks an agent's section, recording each
// problem at its line.
func DecodeSection(a experiments.Agent) (Section, error) {
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

// Declaration is protocol ftn as both halves know it.
type Declaration struct{}

var _ protocols.Declaration = Declaration{}

func init() { protocols.Register(Declaration{}) }

// Name implements protocols.Declaration.
func (Declaration) Name() string { return Name }

// Event kinds of the servers that the halves read beside the clients'
// history (ftnlog.Invoke, ftnlog.Complete): who leads and when a round of
// recovery ends (001 "Recovery"), a server declared down, a client
// dropped, and a token's grants, releases and frees as the servers saw
// them; a client's token it learned it no longer holds (invalid).
const (
	EventLeader      eventlog.Kind = ftnlog.Prefix + "leader"
	EventStepDown    eventlog.Kind = ftnlog.Prefix + "step_down"
	EventReinit      eventlog.Kind = ftnlog.Prefix + "reinit"
	EventRoundDone   eventlog.Kind = ftnlog.Prefix + "round_done"
	EventDeclareDown eventlog.Kind = ftnlog.Prefix + "declare_down"
	EventDropClient  eventlog.Kind = ftnlog.Prefix + "drop_client"
	EventGranted     eventlog.Kind = ftnlog.Prefix + "granted"
	EventReleased    eventlog.Kind = ftnlog.Prefix + "released"
	EventFreed       eventlog.Kind = ftnlog.Prefix + "freed"
	EventInvalid     eventlog.Kind = ftnlog.Prefix + "invalid"
)

// Basis implements protocols.Declaration: a client's hold of a name runs
// from its acquire's completion to its release's invocation (the time
// it may act on the token).
func (Declaration) Basis(e eventlog.Event) (results.ClockOp, string) {
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
