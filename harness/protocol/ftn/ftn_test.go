package ftn

import (
	"net/netip"
	"strings"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/internal/results"
	decl "tokenbed/protocols/ftn"
)

func proc(name, role string, last byte) protocol.Process {
	return protocol.Process{Instance: name, Name: name, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, last}), 7000),
		Spec: experiments.Agent{Name: name, Role: role}}
}

func TestConfig(t *testing.T) {
	ps := []protocol.Process{proc("s1", "server", 2), proc("s0", "server", 1), proc("c0", "client", 9)}
	f := protocol.Files{CACert: "/r/ca.crt", Credentials: "/r/cred", Log: "/r/logs/c0.jsonl"}
	b, err := Protocol{}.Config(&experiments.Experiment{TimeScale: 2}, ps[2], ps[:2], f, 42)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ftnconfig.Decode("c0.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if c.Role != "client" || len(c.Servers) != 2 || c.Servers[0].Name != "s0" || c.Servers[1].Addr != "10.0.0.2:7000" ||
		c.Seed != 42 || c.TimeScale != 2 || c.Workload == nil || c.Log != f.Log {
		t.Errorf("config %+v", c)
	}
	if _, err := (Protocol{}).Config(&experiments.Experiment{}, proc("x", "randomwalk", 3), ps, f, 1); err == nil || !strings.Contains(err.Error(), `role "randomwalk"`) {
		t.Errorf("a token passing role: %v, want an error naming it", err)
	}
	if _, err := (Protocol{}).Config(&experiments.Experiment{}, ps[2], nil, f, 1); err == nil {
		t.Error("a client without servers: want an error")
	}
	if got := strings.Join(Protocol{}.Args("/r/c0.yaml", protocol.Start{}), " "); got != "ftn run --config /r/c0.yaml" {
		t.Errorf("args %q", got)
	}
}

func TestObserverAndBasis(t *testing.T) {
	o := Protocol{}.NewObserver()
	o.Observe("s1", eventlog.Event{Kind: "ftn_leader"})
	if l, ok := o.Target(decl.TargetLeader, []string{"s0", "s1", "s2"}); !ok || l != "s1" {
		t.Errorf("leader %q %v, want s1", l, ok)
	}
	if _, ok := o.Target(decl.TargetLeader, []string{"s0"}); ok {
		t.Error("leader outside among")
	}
	acq := ftnlog.Completion(1, 1, msg.Acquire, "a", msg.Exclusive, ftnlog.OK, "ok", msg.Fence{Epoch: 1, Counter: 1}, nil).Event(ftnlog.Complete)
	rel := ftnlog.Invocation(1, 2, msg.Release, "a", 0, nil).Event(ftnlog.Invoke)
	o.Observe("c0", acq)
	if o.Holds("c0") != "a" {
		t.Errorf("holds %q, want a", o.Holds("c0"))
	}
	o.Observe("c0", rel)
	o.Down("s1")
	if _, ok := o.Target(decl.TargetLeader, []string{"s0", "s1", "s2"}); ok || o.Holds("c0") != "" {
		t.Error("after s1 down and c0's release: want no leader and no holds")
	}
	if op, k := (Protocol{}).Basis(acq); op != results.ClockBegin || k != "a" {
		t.Errorf("basis of an acquire: %v %q", op, k)
	}
	if op, k := (Protocol{}).Basis(rel); op != results.ClockEnd || k != "a" {
		t.Errorf("basis of a release: %v %q", op, k)
	}
}
