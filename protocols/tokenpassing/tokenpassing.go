// Package tokenpassing declares the token passing protocol of seed 002 to
// both halves of its plug-in: its name, its processes (agents of the agent
// binary whose roles are the circulation policies: the random walk, 002
// §3.2, or the Wandering Token, seeds 003 and 004), their configuration
// section (agent/config, decoded and validated strictly at its lines), the
// schedule word "holder", and the paper clock's basis (holds are
// application time). Its events are package eventlog's (TokenAcquired,
// PassStarted, ...). The run half is harness/protocol/tokenpassing; the
// analysis half is analysis/tokenpassing.
package tokenpassing

import (
	"maps"
	"slices"

	"tokenbed/agent/circulation"
	_ "tokenbed/agent/circulation/policies" // the roles agents take
	"tokenbed/agent/config"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/protocols"
)

// Name of the protocol in experiment files.
const Name = "tokenpassing"

// TargetHolder is the schedule target meaning whoever holds a token now
// (crash), or the agent the last crash of "holder" killed (restart).
const TargetHolder = "holder"

// Declaration is token passing as both halves know it.
type Declaration struct{}

var _ protocols.Declaration = Declaration{}

func init() { protocols.Register(Declaration{}) }

// Name implements protocols.Declaration.
func (Declaration) Name() string { return Name }

// Role implements experiments.Schema: the roles are the registered
// circulation policies; none means the random walk (002 §3.2).
func (Declaration) Role(role string) (string, error) {
	if role == "" {
		return circulation.DefaultRole, nil
	}
	if err := circulation.UnknownRole(role); err != nil {
		return "", err
	}
	return role, nil
}

// Targets implements experiments.Schema.
func (Declaration) Targets() []string { return []string{TargetHolder} }

// CheckAgents implements experiments.Schema: some agent generates a
// token at start; with none, no token would exist until one regenerates
// it (002 §3.2).
func (Declaration) CheckAgents(agents []experiments.Agent) []experiments.Problem {
	for _, a := range agents {
		if a.Generate {
			return nil
		}
	}
	return []experiments.Problem{{Path: "$.agents", Msg: "no agent has generate: true, so no token would exist until a regeneration"}}
}

// harnessFields are the agent configuration's fields that the run sets for
// every agent from the run itself: an experiment's config section cannot
// set them.
var harnessFields = map[string]string{
	"name": "the agent's instance name", "listen": "its address", "ca": "the run's CA",
	"credentials": "the run's keys", "log": "the results directory", "role": "role:",
	"seed": "the experiment's seed", "time_scale": "time_scale:", "network_time_scale": "network_time_scale:",
	"peers": "the topology", "join": "join steps", "generate": "generate:",
}

// CheckConfig implements experiments.Schema: the agent's own
// configuration types (agent/config and each policy's section) decode the
// section strictly and validate it, every error at its line.
func (Declaration) CheckConfig(a experiments.Agent) error {
	_, owned := a.Config.Split(func(k string) bool { return harnessFields[k] != "" })
	for _, k := range slices.Sorted(maps.Keys(owned)) {
		owned[k].Errorf("", "set by the harness from %s, not in an agent's configuration", harnessFields[k])
	}
	c, err := Decode(a, 1)
	if err != nil {
		return err
	}
	c.Validate() // records its errors in the experiment's file
	return nil
}

// Resolve resolves an experiment's agent as the agent would, with
// durations divided by timeScale.
func Resolve(a experiments.Agent, timeScale float64) (*config.Resolved, error) {
	c, err := Decode(a, timeScale)
	if err != nil {
		return nil, err
	}
	return c.Validate()
}

// Decode is an experiment's agent as an agent configuration, with
// placeholders for what the run sets.
func Decode(a experiments.Agent, timeScale float64) (*config.Config, error) {
	c, err := config.Decode(a.Config)
	if err != nil {
		return nil, err
	}
	c.Name, c.Listen, c.CA, c.Credentials, c.Role, c.TimeScale = "x", "10.0.0.1:1", "x", "x", a.Role, timeScale
	return c, nil
}

// Basis implements protocols.Declaration: a hold runs from a
// token_acquired to the pass_started, release or discard that ends it.
func (Declaration) Basis(e eventlog.Event) (results.ClockOp, string) {
	switch e.Kind {
	case eventlog.TokenAcquired:
		return results.ClockBegin, e.Token
	case eventlog.PassStarted, eventlog.TokenReleased, eventlog.TokenDiscarded:
		return results.ClockEnd, e.Token
	}
	return results.ClockNone, ""
}
