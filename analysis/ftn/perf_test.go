package ftn

import (
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
)

// The figures of a literal history: two clients, pairs of acquire and
// release whose latencies are known, a failed acquire that counts for
// nothing, and a crash of the leader with the election and the query
// rounds after it.
func TestPerformanceOfALiteralHistory(t *testing.T) {
	const ms = int64(1e6)
	var evs []eventlog.Event
	op := func(client string, req uint64, k msg.Kind, name string, inv, done int64, result string) {
		i := ftnlog.Invocation(1, req, k, name, msg.Exclusive, nil).Event(ftnlog.Invoke)
		i.Agent, i.MonoNS, i.Seq = client, inv*ms, req*2
		c := ftnlog.Completion(1, req, k, name, msg.Exclusive, result, "", msg.Fence{Epoch: 1, Counter: req}, nil).Event(ftnlog.Complete)
		c.Agent, c.MonoNS, c.Seq = client, done*ms, req*2+1
		evs = append(evs, i, c)
	}
	// c0: pairs of 3+1 ms and 5+2 ms; c1: 10+4 ms, and a failed acquire.
	op("c0", 1, msg.Acquire, "t0", 0, 3, ftnlog.OK)
	op("c0", 2, msg.Release, "t0", 100, 101, ftnlog.OK)
	op("c0", 3, msg.Acquire, "t1", 200, 205, ftnlog.OK)
	op("c0", 4, msg.Release, "t1", 300, 302, ftnlog.OK)
	op("c1", 1, msg.Acquire, "t0", 400, 410, ftnlog.OK)
	op("c1", 2, msg.Release, "t0", 500, 504, ftnlog.OK)
	op("c1", 3, msg.Acquire, "t0", 600, 900, ftnlog.Fail)
	ev := func(agent string, k eventlog.Kind, at int64, peer string) {
		evs = append(evs, eventlog.Event{Agent: agent, Kind: k, MonoNS: at * ms, Peer: peer})
	}
	ev("s0", "ftn_leader", 1, "")
	ev("harness", eventlog.AgentCrash, 1000, "s0")
	ev("s1", "ftn_round_done", 1100, "") // before the DOWN declaration: not the recovery's
	ev("s2", "ftn_leader", 1500, "")
	ev("s2", "ftn_declare_down", 1600, "")
	ev("s1", "ftn_round_done", 1800, "")
	ev("s2", "ftn_round_done", 1900, "")
	ev("s0", "ftn_leader", 5000, "") // its next life

	p, err := Performance(evs)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pairs != 3 || p.PairP50MS != 7 || p.PairP99MS != 14 || p.AcqP50MS != 5 || p.RelP50MS != 2 {
		t.Errorf("pairs %d, p50 %v, p99 %v, acquire p50 %v, release p50 %v; want 3, 7, 14, 5, 2",
			p.Pairs, p.PairP50MS, p.PairP99MS, p.AcqP50MS, p.RelP50MS)
	}
	// Six successful operations from 0 to 504 ms.
	if p.Ops != 6 || p.Clients != 2 || p.WindowS != 0.504 {
		t.Errorf("ops %d, clients %d, window %v s; want 6, 2, 0.504", p.Ops, p.Clients, p.WindowS)
	}
	if len(p.Failovers) != 1 {
		t.Fatalf("failovers %+v, want one", p.Failovers)
	}
	f := p.Failovers[0]
	if f.Leader != "s0" || f.NewLeader != "s2" || f.ElectedS != 0.5 || f.RecoveredS != 0.9 {
		t.Errorf("failover %+v; want s0, then s2 after 0.5 s, rounds done 0.9 s after the crash", f)
	}
}
