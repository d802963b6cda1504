package etcdbench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
	ftncheck "tokenbed/analysis/ftn"
	"tokenbed/internal/testenv"
)

// clientEnv marks the test binary re-run as an etcd workload client
// (Config.ClientCmd), so the test needs no separate build.
const clientEnv = "TOKENBED_ETCDBENCH_CLIENT=1"

func TestMain(m *testing.M) {
	if os.Getenv("TOKENBED_ETCDBENCH_CLIENT") == "1" && len(os.Args) > 1 && os.Args[1] == "client" {
		os.Exit(ClientMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

func rec(kind eventlog.Kind, mono int64, r ftnlog.Record) eventlog.Event {
	e := r.Event(kind)
	e.Agent, e.MonoNS = "c0", mono
	return e
}

// TestSamples: a literal history with a hold, a failed acquire, an
// unknown release and a hold still open at the end gives one sample.
func TestSamples(t *testing.T) {
	ms := int64(time.Millisecond)
	acq := func(req uint64, name string) ftnlog.Record {
		return ftnlog.Record{Op: "acquire", Name: name, Mode: "x", Req: req}
	}
	rel := func(req uint64, name string) ftnlog.Record { return ftnlog.Record{Op: "release", Name: name, Req: req} }
	res := func(r ftnlog.Record, result string) ftnlog.Record { r.Result = result; return r }
	evs := []eventlog.Event{
		{Agent: "c0", Kind: eventlog.AgentStarted},
		rec(ftnlog.Invoke, 100*ms, acq(1, "t1")),
		rec(ftnlog.Complete, 103*ms, res(acq(1, "t1"), ftnlog.OK)),
		rec(ftnlog.Invoke, 303*ms, rel(2, "t1")),
		rec(ftnlog.Complete, 305*ms, res(rel(2, "t1"), ftnlog.OK)),
		rec(ftnlog.Invoke, 400*ms, acq(3, "t2")),
		rec(ftnlog.Complete, 410*ms, res(acq(3, "t2"), ftnlog.Fail)),
		rec(ftnlog.Invoke, 500*ms, acq(4, "t2")),
		rec(ftnlog.Complete, 501*ms, res(acq(4, "t2"), ftnlog.OK)),
		rec(ftnlog.Invoke, 700*ms, rel(5, "t2")),
		rec(ftnlog.Complete, 799*ms, res(rel(5, "t2"), ftnlog.Unknown)),
		rec(ftnlog.Invoke, 800*ms, acq(6, "t3")),
		rec(ftnlog.Complete, 802*ms, res(acq(6, "t3"), ftnlog.OK)),
	}
	ss, n, err := Samples(evs)
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{Client: "c0", Name: "t1", Acquire: 3 * time.Millisecond, Release: 2 * time.Millisecond, InvokedNS: 100 * ms}
	if len(ss) != 1 || ss[0] != want {
		t.Fatalf("samples %+v, want [%+v]", ss, want)
	}
	if n != (Counts{Acquires: 4, NotOK: 2}) {
		t.Errorf("counts %+v, want 4 acquires, 2 not ok", n)
	}
	if p50, p99 := Quantiles(ss); p50 != 5*time.Millisecond || p99 != 5*time.Millisecond {
		t.Errorf("quantiles %v %v, want 5ms 5ms", p50, p99)
	}
}

// TestEtcdLocks runs a 3-member etcd cluster and 3 workload clients
// contending for 2 names in namespaces, and judges the clients' history
// with the FTN checker (analysis/ftn): etcd's locks must be mutually
// exclusive and their revisions, logged as fences, must increase per
// name. It proves that the bench drives etcd's lock API and logs a
// history the checker reads; its latencies are make ftn-etcd's business.
func TestEtcdLocks(t *testing.T) {
	testenv.RequireRoot(t, "creates network namespaces")
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("SKIP: no etcd binary in PATH (Debian's etcd-server; scripts/install-deps.sh installs it)")
	}
	dir := t.TempDir()
	c := Config{System: Etcd, Clients: 3, Duration: 8 * time.Second, Seed: 3, Dir: dir, DataRoot: t.TempDir(), EtcdBin: etcd,
		Workload:  ftnconfig.Workload{Names: 2, Rate: 5, Hold: 50 * time.Millisecond},
		ClientCmd: []string{os.Args[0]}, ClientEnv: []string{clientEnv}}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) < 10 {
		t.Fatalf("%d holds completed in %v, want at least 10 (logs in %s)", len(r.Samples), c.Duration, dir)
	}
	var evs []eventlog.Event
	for _, n := range []string{"c0", "c1", "c2"} {
		e, err := eventlog.ReadFile(filepath.Join(dir, "logs", n+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e...)
	}
	rep, err := ftncheck.Check(evs)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.MutualExclusion.Pass || !rep.Fencing.Pass {
		t.Errorf("mutual exclusion %s: %s; fencing %s: %s", rep.MutualExclusion.Verdict, rep.MutualExclusion.Detail, rep.Fencing.Verdict, rep.Fencing.Detail)
	}
	if len(rep.Holds) < 10 {
		t.Errorf("checker saw %d holds, want at least 10", len(rep.Holds))
	}
	t.Logf("%d holds, acquire+release p50 %v p99 %v; %s", len(r.Samples), r.P50, r.P99, rep.MutualExclusion.Value)
}
