// Package trace drives a circulation policy from a datadriven script
// (github.com/cockroachdb/datadriven, as etcd raft's testdata): each
// command calls the policy at a paper time and prints the actions it
// returns and its next deadline, so that a rule of seed 003 Fig. 1 or
// 004 Fig. 2 reads as a trace in testdata/*.txt. The tests of packages
// wandering, wandering004 and baseline use it; it is not part of the
// agent.
//
// Commands (times are offsets from virtual time 0, Go durations):
//
//	start at=0s                         Start; peers b, c; seed from the test
//	recv at=T token=GEN@ORIGIN          Acquired by pass
//	gen at=T token=GEN@ORIGIN [reason=R] Acquired by generation (the node made it)
//	passed at=T token=GEN@ORIGIN [peer=P] Passed
//	failed at=T token=GEN@ORIGIN peer=P PassFailed
//	tick at=T                           Tick
//	run until=T                         Tick at every deadline up to T, passing
//	                                    each token at once (Passed) and acquiring
//	                                    each generated token with id T@self
package trace

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

// T0 is virtual time 0.
var T0 = time.Unix(1_000_000, 0)

// Host is a fixed membership with a seeded random source.
type Host struct {
	Name    string
	Members []string
	R       *rand.Rand
}

func (h *Host) Self() string     { return h.Name }
func (h *Host) Peers() []string  { return h.Members }
func (h *Host) Rand() *rand.Rand { return h.R }

var _ circulation.Host = (*Host)(nil)

// Driver runs one policy through a script.
type Driver struct {
	P    circulation.Policy
	Host *Host
}

// New returns a driver for p as agent "a" with peers b and c.
func New(p circulation.Policy, seed uint64) *Driver {
	return &Driver{P: p, Host: &Host{Name: "a", Members: []string{"b", "c"}, R: rand.New(rand.NewPCG(seed, 16))}}
}

func sec(t time.Time) string { return t.Sub(T0).String() }

// Format prints actions, one a line.
func Format(acts []circulation.Action) string {
	var b strings.Builder
	for _, a := range acts {
		switch a.Kind {
		case circulation.Pass:
			fmt.Fprintf(&b, "pass %v -> %s\n", a.Token, a.Peer)
		case circulation.Discard:
			fmt.Fprintf(&b, "discard %v (%s: %s)\n", a.Token, a.Reason, a.Detail)
		case circulation.Generate:
			fmt.Fprintf(&b, "generate (%s)\n", a.Reason)
		case circulation.OpStart:
			fmt.Fprintf(&b, "op_started %s (%s)\n", tok(a.Token), a.Reason)
		case circulation.OpEnd:
			fmt.Fprintf(&b, "op_finished %s (%s)\n", tok(a.Token), a.Reason)
		default:
			fmt.Fprintf(&b, "action %d %+v\n", a.Kind, a)
		}
	}
	return b.String()
}

func tok(t wire.TokenID) string {
	if t == (wire.TokenID{}) {
		return "-"
	}
	return t.String()
}

func (d *Driver) deadline() string {
	if t, ok := d.P.Deadline(); ok {
		return "deadline " + sec(t) + "\n"
	}
	return "no deadline\n"
}

// Run is the datadriven command handler.
func (d *Driver) Run(t *testing.T, td *datadriven.TestData) string {
	at := func(key string) time.Time {
		var s string
		td.ScanArgs(t, key, &s)
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", td.Pos, key, s, err)
		}
		return T0.Add(v)
	}
	token := func() wire.TokenID {
		var s string
		td.ScanArgs(t, "token", &s)
		id, err := wire.ParseTokenID(s)
		if err != nil {
			t.Fatalf("%s: token=%q: %v", td.Pos, s, err)
		}
		return id
	}
	peer := func() string {
		s := "-"
		if td.HasArg("peer") {
			td.ScanArgs(t, "peer", &s)
		}
		return s
	}
	var acts []circulation.Action
	switch td.Cmd {
	case "start":
		acts = d.P.Start(d.Host, at("at"))
	case "recv":
		acts = d.P.Acquired(at("at"), token(), circulation.ByPass, "")
	case "gen":
		reason := "loss"
		if td.HasArg("reason") {
			td.ScanArgs(t, "reason", &reason)
		}
		acts = d.P.Acquired(at("at"), token(), circulation.ByGeneration, reason)
	case "passed":
		acts = d.P.Passed(at("at"), token(), peer())
	case "failed":
		acts = d.P.PassFailed(at("at"), token(), peer())
	case "tick":
		acts = d.P.Tick(at("at"))
	case "run":
		return d.run(at("until"))
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	return Format(acts) + d.deadline()
}

// run ticks the policy at its deadlines until end, completing every pass
// at once and acquiring every generated token, and prints what happened
// with its time.
func (d *Driver) run(end time.Time) string {
	var b strings.Builder
	var do func(now time.Time, acts []circulation.Action)
	do = func(now time.Time, acts []circulation.Action) {
		for _, a := range acts {
			fmt.Fprintf(&b, "%s %s", sec(now), Format([]circulation.Action{a}))
			switch a.Kind {
			case circulation.Pass:
				do(now, d.P.Passed(now, a.Token, a.Peer))
			case circulation.Generate:
				do(now, d.P.Acquired(now, wire.TokenID{Gen: now.Sub(T0).Nanoseconds(), Origin: d.Host.Name}, circulation.ByGeneration, a.Reason))
			}
		}
	}
	for {
		dl, ok := d.P.Deadline()
		if !ok || dl.After(end) {
			break
		}
		do(dl, d.P.Tick(dl))
	}
	return b.String() + d.deadline()
}
