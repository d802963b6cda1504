package node

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/circulation"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// opPolicy starts the protected operation at Start and ends it at its
// deadline, as the baseline does (no token); a second operation, enabled
// by a token, is left running for Stop to close.
type opPolicy struct{ end time.Time }

func (p *opPolicy) Name() string { return "ops" }
func (p *opPolicy) Start(h circulation.Host, now time.Time) []circulation.Action {
	p.end = now.Add(4 * time.Second)
	return []circulation.Action{{Kind: circulation.OpStart, Reason: "periodic"},
		{Kind: circulation.OpStart, Token: wire.TokenID{Gen: 7, Origin: "x"}, Reason: "token"}}
}
func (p *opPolicy) Acquired(time.Time, wire.TokenID, circulation.How, string) []circulation.Action {
	return nil
}
func (p *opPolicy) Passed(time.Time, wire.TokenID, string) []circulation.Action     { return nil }
func (p *opPolicy) PassFailed(time.Time, wire.TokenID, string) []circulation.Action { return nil }
func (p *opPolicy) Tick(now time.Time) []circulation.Action {
	if p.end.IsZero() || now.Before(p.end) {
		return nil
	}
	p.end = time.Time{}
	return []circulation.Action{{Kind: circulation.OpEnd, Reason: "done"}}
}
func (p *opPolicy) Deadline() (time.Time, bool) { return p.end, !p.end.IsZero() }

// TestOpEvents: the policy's OpStart/OpEnd become op_started/op_finished
// (the driver hooks a real operation to them), and an
// operation still running when the agent stops is closed with reason
// "stopping", so that analysis never sees an open interval.
func TestOpEvents(t *testing.T) {
	simCA.dir = ""
	cred := credentials(t, "A")
	n, err := New(Config{Name: "A", Addr: netip.MustParseAddrPort("10.0.0.1:7400"), Key: cred.Key, Cert: cred.Cert,
		CA: ca.NewVerifier(cred.CA), Passing: passing.DefaultConfig(), Policy: &opPolicy{}, Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	n.Start(now)
	var got []string
	log := func() {
		for _, e := range n.Ready().Events {
			if e.Kind == eventlog.OpStarted || e.Kind == eventlog.OpFinished {
				got = append(got, string(e.Kind)+" "+e.Token+" "+e.Reason)
			}
		}
	}
	for range 3 {
		d, _ := n.Deadline()
		n.Tick(d)
		log()
	}
	n.Stop("signal")
	log()
	want := []string{"op_started  periodic", "op_started 7@x token", "op_finished  done", "op_finished 7@x stopping"}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}
