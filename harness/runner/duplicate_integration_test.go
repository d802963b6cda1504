package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/internal/netlinkdump"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
	"tokenbed/internal/uml/umltest"
	"tokenbed/netem"
)

// Three agents, A>B duplicating 10%, plain delays elsewhere, on the
// kernel's netem (inside User Mode Linux on a host without it). The
// per-receiver tree used to hold a duplicating leaf beside the others,
// which Linux refuses ("netem: cannot mix duplicating netems with other
// netems in tree"), so the run failed at setup.
const dupLink = `
name: dup-link
seed: 9
duration: 400s
time_scale: 20
defaults:
  profile: "delay 2ms"
  agent:
    randomwalk: {hold: 2s, regenerate_after: 10}
    passing: {move_timeout: 300ms, ack_timeout: 300ms, commit_timeout: 300ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
links:
  - {between: [A, B], a_to_b: "delay 2ms duplicate 10%", b_to_a: "delay 2ms"}
`

func TestKernelRunWithDuplication(t *testing.T) {
	requireRoot(t)
	t.Parallel() // real time, counts of events (runner_test.go says why)
	if umltest.Reexec(t, umltest.Options{Modules: []string{"sch_netem", "sch_htb", "cls_u32", "veth", "bridge"}, MemMB: 1024,
		Timeout: 5 * time.Minute, Env: []string{testenv.AgentEnv + "=" + agentBin},
		RunOnHost: func() bool { return netem.CheckKernel(NewRunID()) == nil }}) {
		return
	}
	e, path := load(t, dupLink)
	var log strings.Builder
	be := &watchTeardown{Backend: nsbackend.New()}
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairKernel,
		ImpairReason: "test", Backend: be, AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatalf("run with a duplicating direction among three agents: %v\n%s", err, log.String())
	}
	info := checkDuplication(t, dir, ImpairKernel)
	// The own device was gone before the backend's teardown (which, for
	// containers, would not remove it from the host's namespace).
	if be.err != nil || len(be.links) == 0 || slices.ContainsFunc(be.links, func(l string) bool { return strings.HasPrefix(l, info.RunID) }) {
		t.Errorf("links in the hub at teardown: %q (%v); want the ports and no device named after the run", be.links, be.err)
	}
	// A>B (B is the second agent) on a device named after the run.
	want := `msg="duplicating direction on a device of its own" link=A>B device=` + info.RunID + "1-10"
	if !strings.Contains(log.String(), want) || strings.Count(log.String(), "device of its own") != 1 {
		t.Errorf("log lacks %q (once):\n%s", want, log.String())
	}
}

// checkDuplication checks run.json (status ok on the impairment path
// want) and that the capture shows copies of A>B datagrams, about 10%,
// and none of A>C.
func checkDuplication(t *testing.T, dir, want string) results.RunInfo {
	t.Helper()
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	if info.Status != "ok" || info.Impairment != want {
		t.Fatalf("run.json: status %q, impairment %q (%s); want ok on %s", info.Status, info.Impairment, info.ImpairWhy, want)
	}
	// Copies beyond the first of each A→X datagram, on A's interface
	// (before impairment) and on X's (after). Agents' retransmissions
	// are identical bytes too, so compare the two.
	extra := extraCopies(t, filepath.Join(dir, results.CaptureFile))
	sent := extra["A A>B distinct"]
	dupAB := extra["B A>B"] - extra["A A>B"]
	dupAC := extra["C A>C"] - extra["A A>C"]
	t.Logf("A>B: %d distinct datagrams sent, %d duplicated by netem; A>C: %d distinct, %d duplicated", sent, dupAB, extra["A A>C distinct"], dupAC)
	if sent < 50 {
		t.Fatalf("only %d A>B datagrams captured", sent)
	}
	if dupAB <= 0 || float64(dupAB) > 0.25*float64(sent) {
		t.Errorf("A>B: %d copies added for %d datagrams, want about 10%%", dupAB, sent)
	}
	if dupAC != 0 {
		t.Errorf("A>C: %d copies added, want none", dupAC)
	}
	return info
}

// watchTeardown lists the links of replica 0's hub when teardown starts.
type watchTeardown struct {
	*nsbackend.Backend
	links []string
	err   error
}

func (b *watchTeardown) Teardown(ctx context.Context) error {
	if p, err := b.IngressPort("B"); err != nil {
		b.err = err
	} else if h, err := netlink.NewHandleAt(p.NS); err != nil {
		b.err = err
	} else {
		ls, err := netlinkdump.Retry(h.LinkList)
		h.Close()
		b.err = err
		for _, l := range ls {
			b.links = append(b.links, l.Attrs().Name)
		}
	}
	return b.Backend.Teardown(ctx)
}

// splitPorts is the netns backend with every agent's ingress port said to
// be in a namespace of its own, as a backend might have it: the senders'
// ports are then out of the receivers' trees' reach, the kernel layout
// cannot give A>B a device of its own, and the run must take the
// userspace engine rather than fail.
type splitPorts struct{ *nsbackend.Backend }

func (b splitPorts) IngressPort(inst string) (backend.Port, error) {
	p, err := b.Backend.IngressPort(inst)
	p.NSPath += "#" + inst
	return p, err
}

func TestKernelRunFallsBackToUserspace(t *testing.T) {
	requireRoot(t)
	t.Parallel() // real time, counts of events (runner_test.go says why)
	if umltest.Reexec(t, umltest.Options{Modules: []string{"sch_netem", "sch_htb", "cls_u32", "veth", "bridge", "tun"}, MemMB: 1024,
		Timeout: 5 * time.Minute, Env: []string{testenv.AgentEnv + "=" + agentBin},
		RunOnHost: func() bool { return netem.CheckKernel(NewRunID()) == nil }}) {
		return
	}
	e, path := load(t, dupLink)
	var log strings.Builder
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairKernel,
		ImpairReason: "test", Backend: splitPorts{nsbackend.New()}, AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	info := checkDuplication(t, dir, ImpairUserspace)
	t.Logf("run.json impairment_reason: %s", info.ImpairWhy)
	// The engine's account of its timing is in run.json, for the report.
	if e := info.Engine; e == nil || e.Delivered == 0 || e.LateOver1ms > e.Delivered {
		t.Errorf("run.json engine: %+v", e)
	}
	if !strings.Contains(info.ImpairWhy, "test; then the userspace engine, because direction A>B: sources[0] (10.77.0.1/32) duplicates") || !strings.Contains(info.ImpairWhy, "Via") {
		t.Errorf("run.json impairment_reason %q does not say why", info.ImpairWhy)
	}
	if !strings.Contains(log.String(), "using the userspace engine for the run") {
		t.Errorf("no log line says the run took the userspace engine:\n%s", log.String())
	}
}

// extraCopies counts, per agent's capture interface and direction ("B A>B"),
// the copies of UDP payloads beyond the first, and ("… distinct") the
// distinct payloads.
func extraCopies(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapread.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"10.77.0.1": "A", "10.77.0.2": "B", "10.77.0.3": "C"}
	seen := map[string]map[string]int{}
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// Ethernet on veths, raw IP on TUN devices; the harness's
		// annotations are neither IPv4 nor UDP.
		if p.UDP == nil || !p.Src.Is4() {
			continue
		}
		intf, _ := r.Interface(p.Iface)
		inst, _, _ := strings.Cut(intf.Name, "/") // "A/eth0", or "A/" and a TUN device
		k := inst + " " + names[p.Src.String()] + ">" + names[p.Dst.String()]
		if seen[k] == nil {
			seen[k] = map[string]int{}
		}
		seen[k][string(p.UDP.Payload)]++
	}
	out := map[string]int{}
	for k, m := range seen {
		for _, n := range m {
			out[k] += n - 1
			out[k+" distinct"]++
		}
	}
	return out
}
