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
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/config"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	decl "tokenbed/protocols/tokenpassing"
)

// Protocol is the run half of the token passing plug-in; its
// declaration (name, schema, paper-clock basis) is protocols/tokenpassing.
type Protocol struct{ decl.Declaration }

var _ protocol.Protocol = Protocol{}

func init() { protocol.Register(Protocol{}) }

// Config implements protocol.Protocol: the agent's configuration file.
func (Protocol) Config(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) ([]byte, error) {
	c, err := agentConfig(e, p, peers, f, seed)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(c)
}

// agentConfig is the configuration Config writes.
func agentConfig(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) (*config.Config, error) {
	// The experiment's settings for the agent (passing, the policies'
	// sections, ...), decoded by the agent's own configuration types.
	c, err := config.Decode(p.Spec.Config)
	if err != nil {
		return nil, err
	}
	c.Name, c.Listen, c.CA, c.Credentials, c.Log = p.Instance, p.Addr.String(), f.CACert, f.Credentials, f.Log
	c.Role, c.Seed, c.TimeScale, c.NetworkTimeScale = p.Spec.Role, seed, e.TimeScale, e.NetworkTimeScale
	c.Generate = p.Spec.Generate
	c.Clock = p.Spec.Clock
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
	return c, nil
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

// NominalNS implements protocol.Protocol: the hold of a policy with a
// fixed one (the random walk's, as the agent resolves it) in wall time;
// the Wandering Token's holds vary.
func (Protocol) NominalNS(e *experiments.Experiment, a experiments.Agent) int64 {
	r, err := decl.Resolve(a, e.TimeScale)
	if err != nil {
		return 0
	}
	if h, ok := r.Policy.(interface{ NominalHold() time.Duration }); ok {
		return int64(h.NominalHold())
	}
	return 0
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
	if word != decl.TargetHolder {
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
