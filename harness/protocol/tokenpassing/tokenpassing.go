// Package tokenpassing is the run half of the token passing protocol of
// seed 002 as a testbed plug-in: agents of the agent binary with a
// circulation policy (random walk, 002 §3.2, or the Wandering Token, seed
// 003) over the secure passing operation (002 §3). It writes each agent's
// configuration (agent/config) with a YAML encoder, starts agents with
// "agent run", follows who holds a token (the crash target "holder"), and
// counts holds as application time on the paper clock.
package tokenpassing

import (
	"strconv"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/config"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/harness/results"
)

// Name of the protocol in experiment files.
const Name = "tokenpassing"

// TargetHolder is the schedule target meaning whoever holds a token now
// (crash), or the agent the last crash of "holder" killed (restart).
const TargetHolder = "holder"

// Protocol is the token passing plug-in.
type Protocol struct{}

var _ protocol.Protocol = Protocol{}

func init() { protocol.Register(Protocol{}) }

// Name implements protocol.Protocol.
func (Protocol) Name() string { return Name }

// Config implements protocol.Protocol: the agent's configuration file.
func (Protocol) Config(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) ([]byte, error) {
	sc := p.Spec.Config
	c := config.Config{Name: p.Instance, Listen: p.Addr.String(), CA: f.CACert, Credentials: f.Credentials, Log: f.Log,
		Role: p.Spec.Role, Seed: seed, TimeScale: e.TimeScale, NetworkTimeScale: e.NetworkTimeScale,
		DirectoryTTL: sc.DirectoryTTL, Passing: sc.Passing, RandomWalk: sc.RandomWalk, Wandering: sc.Wandering,
		Fault: sc.Fault, DropRate: sc.DropRate, Operation: sc.Operation}
	c.RandomWalk.GenerateAtStart = p.Spec.Generate && p.Spec.Role == config.RoleRandomWalk
	c.Wandering.GenerateAtStart = p.Spec.Generate && p.Spec.Role == config.RoleWandering
	for _, o := range peers {
		peer := config.Peer{Name: o.Instance, Addr: o.Addr.String()}
		// Replicas after the first replay the middle of the paper's run,
		// where every agent cached its peers' keys long ago (002 §3):
		// they start warm. Cold, each would pay the first contact (a Move
		// dropped for an unknown key, one Move timeout) once per pair, and
		// 16 replicas would put 16 such passes into a latency mean where
		// the paper has one.
		// An experiment that asks for it (warm_start) starts every
		// replica so.
		if (p.Replica > 0 || e.WarmStart) && f.PeerCert != nil {
			peer.Certificate = f.PeerCert(o.Instance)
		}
		c.Peers = append(c.Peers, peer)
	}
	return yaml.Marshal(&c)
}

// Args implements protocol.Protocol.
func (Protocol) Args(cfg string, o protocol.Start) []string {
	args := []string{"run", "--config", cfg}
	if o.RTPriority != 0 {
		args = append(args, "--rt-priority", strconv.Itoa(o.RTPriority))
	}
	if o.Join != "" {
		args = append(args, "--join", o.Join)
	}
	return args
}

// NominalNS implements protocol.Protocol: the configured hold of a
// random-walk agent in wall time; the Wandering Token's holds vary.
func (Protocol) NominalNS(e *experiments.Experiment, a experiments.Agent) int64 {
	if a.Role != "" && a.Role != config.RoleRandomWalk {
		return 0
	}
	h := a.Config.RandomWalk.Hold
	if h == 0 {
		h = randomwalk.DefaultHold // the agent's default
	}
	return int64(float64(h) / e.TimeScale)
}

// Basis implements protocol.Protocol: a hold runs from a token_acquired to
// the pass_started, release or discard that ends it.
func (Protocol) Basis(e eventlog.Event) (results.ClockOp, string) {
	switch e.Kind {
	case eventlog.TokenAcquired:
		return results.ClockBegin, e.Token
	case eventlog.PassStarted, eventlog.TokenReleased, eventlog.TokenDiscarded:
		return results.ClockEnd, e.Token
	}
	return results.ClockNone, ""
}

// NewObserver implements protocol.Protocol.
func (Protocol) NewObserver() protocol.Observer { return &observer{holders: map[string]string{}} }

// observer tracks token holders from the agents' logs.
type observer struct {
	holders map[string]string // token → instance holding it
	passes  int
}

func (o *observer) Observe(inst string, e eventlog.Event) {
	switch e.Kind {
	case eventlog.TokenAcquired:
		o.holders[e.Token] = inst
	case eventlog.TokenReleased:
		if o.holders[e.Token] == inst {
			delete(o.holders, e.Token)
		}
	case eventlog.PassCompleted:
		o.passes++
	}
}

func (o *observer) Down(inst string) {
	for tok, h := range o.holders {
		if h == inst {
			delete(o.holders, tok)
		}
	}
}

// Target resolves "holder": of the instances among that hold a token, the
// first by name (deterministic when several tokens circulate).
func (o *observer) Target(word string, among []string) (string, bool) {
	if word != TargetHolder {
		return "", false
	}
	in := map[string]bool{}
	for _, a := range among {
		in[a] = true
	}
	holder := ""
	for _, inst := range o.holders {
		if in[inst] && (holder == "" || inst < holder) {
			holder = inst
		}
	}
	return holder, holder != ""
}

// Holds names a token inst holds: the smallest, so that the crash record
// does not depend on map order (a simulated run replays byte for byte).
func (o *observer) Holds(inst string) string {
	held := ""
	for tok, h := range o.holders {
		if h == inst && (held == "" || tok < held) {
			held = tok
		}
	}
	return held
}

func (o *observer) Progress() (int, string) { return o.passes, "passes" }
