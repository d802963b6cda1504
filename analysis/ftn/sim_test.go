package ftn

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	ftnproto "tokenbed/harness/protocol/ftn"
	"tokenbed/harness/sim"
	"tokenbed/netem"
	ftndecl "tokenbed/protocols/ftn"
)

// TestSimulatedRun runs the processes the plug-in configures (3 servers,
// 10 workload clients) in the simulator, with the same code as real
// processes (signed datagrams included), through a leader crash and a
// partition of one server from the others, and judges the clients'
// histories: every check must pass. The simulation is seeded: a failure
// replays exactly.
func TestSimulatedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a 60 s simulated run (a few seconds of CPU)")
	}
	dir := t.TempDir()
	if d := os.Getenv("KEEPDIR"); d != "" { // keep the logs to read them
		dir = d
	}
	src := ca.Seeded(1, sim.Epoch, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	if err := ca.InitWith(dir, src); err != nil {
		t.Fatal(err)
	}
	var procs []protocol.Process
	add := func(name, role string, a, b byte) {
		procs = append(procs, protocol.Process{Instance: name, Name: name, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, a, b}), 7000),
			Spec: experiments.Agent{Name: name, Role: role}})
		if err := ca.IssueWith(dir, name, src); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		add(fmt.Sprintf("s%d", i), "server", 0, byte(i+1))
	}
	for j := range 10 {
		add(fmt.Sprintf("c%d", j), "client", 1, byte(j+1))
	}
	// The observer sees events as the runner's does (sim.Config.OnEvent):
	// the simulator buffers the logs, so reading them mid-run would not.
	var proto ftnproto.Protocol
	obs := proto.NewObserver()
	w := sim.New(sim.Config{Seed: 1, OnEvent: obs.Observe})
	defer w.Close()
	link, _ := netem.Parse("delay 2ms 1ms")
	cut, _ := netem.Parse("loss 100%")
	for _, p := range procs {
		if _, err := w.AddHost(p.Instance, p.Addr.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range procs {
		for _, b := range procs {
			if a.Instance != b.Instance {
				if err := w.SetProfile(a.Addr.Addr(), b.Addr.Addr(), link); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	e := &experiments.Experiment{TimeScale: 1}
	start := func(p protocol.Process) {
		var peers []protocol.Process
		for _, q := range procs {
			if q.Instance != p.Instance {
				peers = append(peers, q)
			}
		}
		f := protocol.Files{CACert: filepath.Join(dir, "ca.crt"), Credentials: dir, Log: filepath.Join(dir, p.Instance+".jsonl")}
		b, err := proto.Config(e, p, peers, f, uint64(len(p.Instance))*7+uint64(p.Addr.Addr().As4()[3]))
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, p.Instance+".yaml")
		if err := os.WriteFile(cfg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sp, log, err := proto.SimProcess(cfg, protocol.Start{}, w.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(p.Instance, sp, log); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		start(p)
	}
	var harness []eventlog.Event
	at := func(d time.Duration) time.Time { return sim.Epoch.Add(d) }
	mono := func() int64 { return w.Mono() }
	run := func(d time.Duration) {
		if err := w.RunUntil(at(d)); err != nil {
			t.Fatal(err)
		}
	}
	run(15 * time.Second)
	// Crash the leader (the observer finds it, as the runner's would).
	leader, ok := obs.Target(ftndecl.TargetLeader, []string{"s0", "s1", "s2"})
	if !ok {
		t.Fatal("no leader after 15 s")
	}
	if err := w.Crash(leader); err != nil {
		t.Fatal(err)
	}
	harness = append(harness, eventlog.Event{Agent: "harness", Kind: eventlog.AgentCrash, Peer: leader, MonoNS: mono()})
	run(25 * time.Second)
	for _, p := range procs[:3] {
		if p.Instance == leader {
			start(p)
		}
	}
	harness = append(harness, eventlog.Event{Agent: "harness", Kind: eventlog.AgentRestart, Peer: leader, MonoNS: mono()})
	run(35 * time.Second)
	// Partition one server from the other two.
	cutOff := procs[0]
	if cutOff.Instance == leader {
		cutOff = procs[1]
	}
	// Each direction's start and end are logged as the runner logs them
	// (harness/runner cut): one outage_start and one outage_end per
	// direction, which the checker takes as one fault each.
	setCut := func(k eventlog.Kind, p netem.Profile) {
		for _, q := range procs[:3] {
			if q.Instance == cutOff.Instance {
				continue
			}
			for _, d := range [][2]protocol.Process{{cutOff, q}, {q, cutOff}} {
				if err := w.SetProfile(d[0].Addr.Addr(), d[1].Addr.Addr(), p); err != nil {
					t.Fatal(err)
				}
				harness = append(harness, eventlog.Event{Agent: "harness", Kind: k, Link: d[0].Instance + ">" + d[1].Instance, MonoNS: mono()})
			}
		}
	}
	setCut(eventlog.OutageStart, cut)
	run(45 * time.Second)
	setCut(eventlog.OutageEnd, link)
	run(60 * time.Second)
	w.Close() // the logs are buffered: on disk once closed
	evs := harness
	for _, p := range procs {
		pe, err := eventlog.ReadFile(filepath.Join(dir, p.Instance+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, pe...)
	}
	r, err := Check(evs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s crashed at 15 s, %s cut off 35–45 s\n%s", leader, cutOff.Instance, render(r))
	for _, n := range Names {
		if q := r.Requirement(n); q.Verdict != analysis.VerdictPass {
			t.Errorf("%s: %s %s", n, q.Verdict, q.Detail)
		}
	}
	// Four faults (the crash, the restart, the partition's start and its
	// end), each judged by the requests that completed after it.
	if len(r.Recovery) != 4 || !strings.HasPrefix(r.Liveness.Detail, "4 faults;") || strings.Contains(r.Liveness.Detail, "not judged") {
		t.Errorf("liveness judged %d faults, want 4 (crash, restart, partition start and end): %s", len(r.Recovery), r.Liveness.Detail)
	}
}
