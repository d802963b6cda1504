package ctrbackend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"tokenbed/internal/netlinkdump"

	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/backend"
	"tokenbed/internal/nsenter"
	"tokenbed/internal/results"
)

var base = netip.MustParsePrefix("10.77.0.0/16")

// testSpec is replicas × names agents, replica r on 10.77.r.0/24, with
// mounts.
func testSpec(runID string, replicas int, names []string, mounts ...string) backend.Spec {
	s := backend.Spec{RunID: runID, Mounts: mounts}
	for r := 0; r < replicas; r++ {
		p := backend.ReplicaPrefix(base, r)
		s.Prefixes = append(s.Prefixes, p)
		var as []backend.Agent
		for i, n := range names {
			as = append(as, backend.Agent{Name: n, Replica: r, Instance: results.Instance(n, r), Addr: backend.AgentAddr(p, i)})
		}
		s.Replicas = append(s.Replicas, as)
	}
	return s
}

// agentConfig writes a minimal agent configuration for inst of replica 0
// of spec (random walk, fast timers) and returns its path.
func agentConfig(t testing.TB, spec backend.Spec, keyDir, logDir, inst string, generate bool) string {
	t.Helper()
	var b strings.Builder
	var me backend.Agent
	for _, a := range spec.Replicas[0] {
		if a.Instance == inst {
			me = a
		}
	}
	fmt.Fprintf(&b, "name: %s\nlisten: %s:7400\nca: %s\ncredentials: %s\nlog: %s\nrole: randomwalk\nseed: 1\ntime_scale: 10\n",
		inst, me.Addr, filepath.Join(keyDir, "ca.crt"), keyDir, filepath.Join(logDir, inst+".jsonl"))
	b.WriteString("peers:\n")
	for _, a := range spec.Replicas[0] {
		if a.Instance != inst {
			fmt.Fprintf(&b, "  - {name: %s, addr: \"%s:7400\"}\n", a.Instance, a.Addr)
		}
	}
	fmt.Fprintf(&b, "passing: {move_timeout: 100ms, ack_timeout: 100ms, commit_timeout: 100ms}\nrandomwalk: {hold: 1s, generate_at_start: %v}\n", generate)
	p := filepath.Join(keyDir, inst+".yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func inNS(t *testing.T, ns netns.NsHandle, f func() error) {
	t.Helper()
	if err := nsenter.Do(ns, f); err != nil {
		t.Fatal(err)
	}
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// The whole life of a run's containers: Setup builds the image, networks
// and pods; traffic flows inside a replica and not across; agents start,
// stop on SIGTERM, crash on SIGKILL with their log intact, restart in the
// same namespace; Teardown leaves Docker as it was.
func TestBackendLifecycle(t *testing.T) {
	requireDocker(t)
	before := dockerState(t)
	runID := "tbc7a001"
	keyDir := credentials(t, "A", "B", "C")
	logDir, err := os.MkdirTemp("", "ctrbackend-logs-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(logDir)
	spec := testSpec(runID, 2, []string{"A", "B", "C"}, keyDir, logDir)
	b := New(Options{AgentBin: agentBin})
	ctx := context.Background()
	if err := b.Setup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	torn := false
	defer func() {
		if !torn {
			b.Teardown(ctx)
		}
	}()
	tm := b.Timings()
	t.Logf("setup: connect %v, image build %v, 2 networks %v, 6 pods %v", tm.Connect, tm.ImageBuild, tm.Networks, tm.Pods)

	// Every object is labelled with the run: 6 holders, 2 networks, 1
	// image; and the run's cgroup is named after it.
	objs, err := Leftovers(ctx, b.cli, runID)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, o := range objs {
		count[o.Kind]++
		if !strings.HasPrefix(o.Name, runID) && !strings.HasSuffix(o.Name, ":"+runID) && o.Name != cgroupName(runID) {
			t.Errorf("%v: name not prefixed with the run ID", o)
		}
	}
	if count["container"] != 6 || count["network"] != 2 || count["image"] != 1 || count["cgroup"] > 1 {
		t.Errorf("run objects %v, want 6 containers, 2 networks, 1 image, at most 1 cgroup", objs)
	}

	// The pod namespace has the fixed address, and the host end of its
	// veth is a port of the run's bridge.
	for _, inst := range []string{"A", "C.r1"} {
		ap, err := b.AgentPort(inst)
		if err != nil {
			t.Fatal(err)
		}
		h, err := netlink.NewHandleAt(ap.NS)
		if err != nil {
			t.Fatal(err)
		}
		l, err := h.LinkByName(ap.Link)
		if err != nil {
			t.Fatal(err)
		}
		addrs, _ := netlinkdump.Retry(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_V4) })
		h.Close()
		want := map[string]string{"A": "10.77.0.1/24", "C.r1": "10.77.1.3/24"}[inst]
		if len(addrs) != 1 || addrs[0].IPNet.String() != want {
			t.Errorf("%s: eth0 addresses %v, want %s", inst, addrs, want)
		}
		ip, err := b.IngressPort(inst)
		if err != nil {
			t.Fatal(err)
		}
		veth, err := netlink.LinkByName(ip.Link)
		if err != nil {
			t.Fatalf("%s: ingress port %q not in the host namespace: %v", inst, ip.Link, err)
		}
		br, _ := netlink.LinkByName(fmt.Sprintf("%s-r%d", runID, map[string]int{"A": 0, "C.r1": 1}[inst]))
		if br == nil || veth.Attrs().MasterIndex != br.Attrs().Index {
			t.Errorf("%s: ingress port %s is not a port of the run's bridge", inst, ip.Link)
		}
	}

	// A datagram from A reaches C of its own replica, and nothing leaves
	// the replica (internal networks, distinct subnets).
	pa, _ := b.AgentPort("A")
	pc, _ := b.AgentPort("C")
	pc1, _ := b.AgentPort("C.r1")
	var conn, conn1 *net.UDPConn
	inNS(t, pc.NS, func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 77, 0, 3), Port: 9999})
		return err
	})
	defer conn.Close()
	inNS(t, pc1.NS, func() (err error) {
		conn1, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 77, 1, 3), Port: 9999})
		return err
	})
	defer conn1.Close()
	var sendErr1 error
	inNS(t, pa.NS, func() error {
		s, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 77, 0, 3), Port: 9999})
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := s.Write([]byte("to C")); err != nil {
			return err
		}
		s1, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 77, 1, 3), Port: 9999})
		if err == nil {
			_, sendErr1 = s1.Write([]byte("to C.r1"))
			s1.Close()
		} else {
			sendErr1 = err
		}
		return nil
	})
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	if n, _, err := conn.ReadFromUDP(buf); err != nil || string(buf[:n]) != "to C" {
		t.Errorf("C did not receive A's datagram: %q %v", buf[:n], err)
	}
	conn1.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := conn1.ReadFromUDP(buf); err == nil {
		t.Errorf("C.r1 received %q from replica 0", buf[:n])
	}
	// Not even a route: the pod has none out of its subnet.
	if !errors.Is(sendErr1, syscall.ENETUNREACH) {
		t.Errorf("send from replica 0 to replica 1: %v, want ENETUNREACH (no default route in the pod)", sendErr1)
	}

	// The ingress port's queue carries the traffic toward C, and only
	// that: 20 datagrams A→C pass through a qdisc put there, 20 C→A do
	// not. (HTB stands in for the netem tree this kernel cannot build.)
	//
	// Equivalent to: `tc qdisc add dev VETH root handle 1: htb` and `tc -s
	// qdisc show dev VETH`.
	ipC, _ := b.IngressPort("C")
	vethC, err := netlink.LinkByName(ipC.Link)
	if err != nil {
		t.Fatal(err)
	}
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: vethC.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	if err := netlink.QdiscAdd(htb); err != nil {
		t.Fatal(err)
	}
	queued := func() uint32 {
		qs, err := netlinkdump.Retry(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(vethC) })
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Attrs().Handle == htb.Handle && q.Attrs().Statistics != nil {
				return q.Attrs().Statistics.Basic.Packets
			}
		}
		t.Fatalf("no HTB on %s", ipC.Link)
		return 0
	}
	// To open ports (C's conn above, and one on A): no ICMP errors, which
	// would travel too and fail later sends on a connected socket.
	var connA *net.UDPConn
	inNS(t, pa.NS, func() (err error) {
		connA, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 77, 0, 1), Port: 9999})
		return err
	})
	defer connA.Close()
	send := func(from netns.NsHandle, to net.IP, n int) {
		inNS(t, from, func() error {
			s, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: to, Port: 9999})
			if err != nil {
				return err
			}
			defer s.Close()
			for i := 0; i < n; i++ {
				s.Write([]byte("x"))
			}
			return nil
		})
	}
	// The bridge forwards in softirq context, after the sender's write
	// returned: give the counters time to settle.
	settled := func() uint32 {
		q := queued()
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			if n := queued(); n != q {
				q = n
				continue
			}
			break
		}
		return q
	}
	q0 := settled()
	send(pa.NS, net.IPv4(10, 77, 0, 3), 20)
	q1 := settled()
	send(pc.NS, net.IPv4(10, 77, 0, 1), 20)
	q2 := settled()
	if q1-q0 != 20 || q2 != q1 {
		t.Errorf("packets through the queue toward C: %d after A→C ×20 (want 20), %d more after C→A ×20 (want 0)", q1-q0, q2-q1)
	}

	// An agent with a bad command line exits 2 with its message on stderr.
	errPath := filepath.Join(logDir, "usage.stderr")
	ef, _ := os.Create(errPath)
	p, err := b.Start(ctx, "B", backend.Cmd{Path: agentBin, Args: []string{"run"}, Stdout: ef, Stderr: ef})
	ef.Close() // as the runner does: the backend keeps its own descriptor
	if err != nil {
		t.Fatal(err)
	}
	if code, sig, err := p.Wait(); code != 2 || sig != 0 || err != nil {
		t.Errorf("agent run without config: exit %d signal %v err %v, want 2", code, sig, err)
	}
	if msg, _ := os.ReadFile(errPath); !strings.Contains(string(msg), "credentials: missing") {
		t.Errorf("agent's stderr not copied: %q", msg)
	}

	// A real agent: SIGTERM stops it cleanly (exit 0, log complete).
	cfgA := agentConfig(t, spec, keyDir, logDir, "A", true)
	logA := filepath.Join(logDir, "A.jsonl")
	start := func() backend.Process {
		t.Helper()
		p, err := b.Start(ctx, "A", backend.Cmd{Path: agentBin, Args: []string{"run", "--config", cfgA}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p = start()
	if err := waitLog(logA, `"kind":"agent_started"`, 1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The agent runs in the pod's namespace, under the holder.
	if got, want := nsInode(t, fmt.Sprintf("/proc/%d/ns/net", p.Pid())), nsInode(t, pa.NSPath); got != want {
		t.Errorf("agent's namespace %d is not the pod's %d", got, want)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, sig, err := p.Wait(); code != 0 || sig != 0 || err != nil {
		t.Errorf("after SIGTERM: exit %d signal %v err %v, want 0", code, sig, err)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal after exit: %v, want os.ErrProcessDone", err)
	}
	evs, err := eventlog.ReadFile(logA)
	if err != nil || len(evs) < 2 || evs[len(evs)-1].Kind != eventlog.AgentStopping {
		t.Errorf("log after SIGTERM: %d events, err %v; want it to end with agent_stopping", len(evs), err)
	}

	// Restart, then SIGKILL: a crash. The container dies by signal 9 and
	// every line written before it is in the log; the namespace is the
	// same one as before.
	acquired := strings.Count(string(must(os.ReadFile(logA))), `"kind":"token_acquired"`)
	p = start()
	if err := waitLog(logA, `"kind":"agent_started"`, 2, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := waitLog(logA, `"kind":"token_acquired"`, acquired+1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := nsInode(t, fmt.Sprintf("/proc/%d/ns/net", p.Pid())), nsInode(t, pa.NSPath); got != want {
		t.Errorf("restarted agent's namespace %d is not the pod's %d", got, want)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, sig, err := p.Wait(); code != -1 || sig != syscall.SIGKILL || err != nil {
		t.Errorf("after SIGKILL: exit %d signal %v err %v, want -1 and killed", code, sig, err)
	}
	raw, _ := os.ReadFile(logA)
	if len(raw) == 0 || raw[len(raw)-1] != '\n' {
		t.Errorf("log does not end with a whole line after SIGKILL")
	}
	evs, err = eventlog.ReadFile(logA)
	if err != nil {
		t.Fatalf("log after SIGKILL: %v", err)
	}
	starts := 0
	for _, e := range evs {
		if e.Kind == eventlog.AgentStarted {
			starts++
		}
	}
	if starts != 2 || evs[len(evs)-1].Kind == eventlog.AgentStopping {
		t.Errorf("log after crash: %d agent_started (want 2), last event %s (want no agent_stopping)", starts, evs[len(evs)-1].Kind)
	}
	st, err := b.cli.ContainerInspect(ctx, agentName(runID, "A"), client.ContainerInspectOptions{})
	if err != nil || st.Container.State.Running || st.Container.State.ExitCode != 137 {
		t.Errorf("the crashed container: %+v %v, want exited 137", st.Container.State, err)
	}

	// A program other than the image's is refused.
	if _, err := b.Start(ctx, "B", backend.Cmd{Path: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "image holds") {
		t.Errorf("start of another program: %v", err)
	}

	// One more agent still running at Teardown: it is killed too.
	cfgB := agentConfig(t, spec, keyDir, logDir, "B", false)
	pb, err := b.Start(ctx, "B", backend.Cmd{Path: agentBin, Args: []string{"run", "--config", cfgB}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	torn = true
	if _, sig, _ := pb.Wait(); sig != syscall.SIGKILL {
		t.Errorf("agent running at teardown ended with signal %v, want SIGKILL", sig)
	}
	if after := dockerState(t); after != before {
		t.Errorf("docker state changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if l, err := netlink.LinkByName(runID + "-r0"); err == nil {
		t.Errorf("bridge %s left on the host", l.Attrs().Name)
	}
}

// A failed Setup removes what it made: here the second network cannot be
// created (its name is taken by a foreign network, which is left alone).
func TestSetupFailureLeavesNothing(t *testing.T) {
	requireDocker(t)
	runID := "tbc7a002"
	foreign := runID + "-r1"
	if out, err := exec.Command("docker", "network", "create", "--internal", "--subnet", "10.79.0.0/24", foreign).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v %s", err, out)
	}
	defer exec.Command("docker", "network", "rm", foreign).Run()
	before := dockerState(t)
	err := New(Options{AgentBin: agentBin}).Setup(context.Background(), testSpec(runID, 2, []string{"A", "B"}))
	if err == nil || !strings.Contains(err.Error(), "a network named "+foreign+" exists already") {
		t.Fatalf("setup with a taken network name: %v", err)
	}
	t.Logf("setup error: %v", err)
	if after := dockerState(t); after != before {
		t.Errorf("docker state changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if out, err := exec.Command("docker", "network", "inspect", foreign).CombinedOutput(); err != nil {
		t.Errorf("the foreign network was touched: %v %s", err, out)
	}
}

// Two runs at once on one engine cannot share the subnets: the second is
// refused with a message that says why, and the first is left alone.
func TestOverlappingRunRefused(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	first := New(Options{AgentBin: agentBin})
	if err := first.Setup(ctx, testSpec("tbc7a004", 1, []string{"A"})); err != nil {
		t.Fatal(err)
	}
	defer first.Teardown(ctx)
	objs, _ := Leftovers(ctx, first.cli, "tbc7a004")
	err := New(Options{AgentBin: agentBin}).Setup(ctx, testSpec("tbc7a005", 1, []string{"A"}))
	if err == nil || !strings.Contains(err.Error(), "overlaps a network that exists") {
		t.Fatalf("second run on the same subnet: %v", err)
	}
	t.Logf("second run: %v", err)
	if again, _ := Leftovers(ctx, first.cli, "tbc7a004"); len(again) != len(objs) {
		t.Errorf("the first run's objects changed: %v, then %v", objs, again)
	}
	if left, _ := Leftovers(ctx, first.cli, "tbc7a005"); len(left) != 0 {
		t.Errorf("the refused run left %v", left)
	}
}

// Clean removes what a killed harness left, by label, and nothing else:
// not objects without the label, nor with a label value that is no run ID.
func TestCleanByLabel(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	runID := "tbc7a003"
	others := map[string][]string{
		"tbc7a003x-unlabelled": {"network", "create", "--internal", "--subnet", "10.79.1.0/24"},
		"tbc7a003x-notarun":    {"network", "create", "--internal", "--subnet", "10.79.2.0/24", "--label", LabelRun + "=tbc7a003x"},
	}
	for name, args := range others {
		if out, err := exec.Command("docker", append(args, name)...).CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v %s", args, err, out)
		}
		defer exec.Command("docker", "network", "rm", name).Run()
	}
	before := dockerState(t)
	keyDir := credentials(t, "A")
	spec := testSpec(runID, 1, []string{"A", "B"}, keyDir)
	b := New(Options{AgentBin: agentBin})
	if err := b.Setup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	defer b.Teardown(ctx)
	cfg := agentConfig(t, spec, keyDir, keyDir, "A", true)
	if _, err := b.Start(ctx, "A", backend.Cmd{Path: agentBin, Args: []string{"run", "--config", cfg}}); err != nil {
		t.Fatal(err)
	}
	// The harness "dies" here: no Teardown.
	prov, err := Connect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	cli := prov.Client()
	// Listing every run finds this run's objects and none of the others
	// above. (Only listing: other runs on this engine are not ours to
	// remove in a test.)
	all, err := Leftovers(ctx, cli, "")
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, o := range all {
		if o.RunID == runID {
			mine++
		}
		if strings.HasPrefix(o.Name, "tbc7a003x") {
			t.Errorf("listed %v: not a run's", o)
		}
	}
	// 3 containers, 1 network, 1 image, and the run's cgroup where the
	// kernel budgets real-time time per group (realtime.go).
	cgroups := 0
	if b.rt.parent != "" {
		cgroups = 1
	}
	if mine != 5+cgroups {
		t.Errorf("listed %d objects of run %s in %v, want %d", mine, runID, all, 5+cgroups)
	}
	// A live run is skipped.
	if removed, err := Clean(ctx, cli, runID, map[string]bool{runID: true}); err != nil || len(removed) != 0 {
		t.Fatalf("clean with the run alive removed %v (%v)", removed, err)
	}
	removed, err := Clean(ctx, cli, runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range removed {
		kinds[o.Kind]++
		if o.RunID != runID {
			t.Errorf("removed %v, not of run %s", o, runID)
		}
	}
	if kinds["container"] != 3 || kinds["network"] != 1 || kinds["image"] != 1 || kinds["cgroup"] != cgroups {
		t.Errorf("removed %v, want 3 containers (2 pods, 1 agent), 1 network, 1 image, %d cgroup", removed, cgroups)
	}
	if after := dockerState(t); after != before {
		t.Errorf("docker state changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := Leftovers(ctx, cli, "nope"); err == nil {
		t.Error("Leftovers accepted an invalid run ID")
	}
}

// Without an engine the error says so and names the alternative. The
// child process runs in a private mount namespace with an empty /run over
// the engine's socket (testcontainers also tries the default socket when
// DOCKER_HOST does not answer), and a fresh process: testcontainers caches
// the engine's address per process.
func TestNoEngine(t *testing.T) {
	requireRoot(t)
	if os.Getenv(noEngineChild) == "1" {
		if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", "/run", "tmpfs", 0, ""); err != nil {
			t.Fatal(err)
		}
		_, err := Connect(context.Background(), nil)
		fmt.Printf("ERR=%v\nIS=%v\n", err, errors.Is(err, ErrNoEngine))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNoEngine$", "-test.v")
	cmd.Env = append(os.Environ(), noEngineChild+"=1", "DOCKER_HOST=unix:///run/docker.sock", "HOME="+t.TempDir(), "XDG_RUNTIME_DIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, _ := cmd.CombinedOutput()
	s := string(out)
	if !strings.Contains(s, "IS=true") || !strings.Contains(s, "no Docker engine reachable") || !strings.Contains(s, "--backend netns") {
		t.Errorf("without an engine: %s", s)
	}
	t.Logf("%s", s)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
