package nsbackend

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"tokenbed/internal/netlinkdump"

	"github.com/vishvananda/netlink"

	"tokenbed/harness/backend"
	"tokenbed/internal/nsenter"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
)

func requireRoot(t *testing.T) { testenv.RequireRoot(t, "creates network namespaces") }

var prefix = netip.MustParsePrefix("10.77.0.0/16")

// ours holds the run IDs this package's tests create. Other test packages
// (runner, capture, analysis) create namespaces of their own at the same
// time, since go test runs packages in parallel, so the leftover check
// looks at these IDs only.
var ours = map[string]bool{}

func spec(runID string, replicas int) backend.Spec {
	ours[runID] = true
	s := backend.Spec{RunID: runID}
	for r := 0; r < replicas; r++ {
		var as []backend.Agent
		// The netns backend isolates replicas: they may share addresses.
		s.Prefixes = append(s.Prefixes, prefix)
		for i, n := range []string{"A", "B", "C"} {
			as = append(as, backend.Agent{Name: n, Replica: r, Instance: results.Instance(n, r), Addr: backend.AgentAddr(prefix, i)})
		}
		s.Replicas = append(s.Replicas, as)
	}
	return s
}

func rootLinks(t *testing.T) map[string]bool {
	ls, err := netlinkdump.Retry(netlink.LinkList)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range ls {
		n := l.Attrs().Name
		// Links of concurrent test packages' runs (other run IDs) and of
		// Docker (containers started by ctrbackend's tests) are not ours.
		if theirs(n) {
			continue
		}
		m[n] = true
	}
	return m
}

func TestSetupTrafficIsolationTeardown(t *testing.T) {
	requireRoot(t)
	before := rootLinks(t)
	id := "tb" + "c0ffee"
	b := New()
	if err := b.Setup(context.Background(), spec(id, 2)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Teardown(context.Background()) })
	names, _ := Leftovers(id)
	if len(names) != 8 { // 2 hubs + 6 agents
		t.Fatalf("namespaces %v, want 8", names)
	}
	// The run registry lists what Setup creates, exactly: harness clean
	// removes only what it lists.
	listed := Namespaces(spec(id, 2))
	slices.Sort(listed)
	slices.Sort(names)
	if !slices.Equal(listed, names) {
		t.Errorf("Namespaces lists %v, Setup created %v", listed, names)
	}
	// A datagram from A to C's address reaches C of the same replica only.
	recv := func(inst string) *net.UDPConn {
		p, _ := b.AgentPort(inst)
		var c *net.UDPConn
		if err := nsenter.Do(p.NS, func() (err error) {
			c, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(10, 77, 0, 3), Port: 9999})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c0, c1 := recv("C"), recv("C.r1")
	defer c0.Close()
	defer c1.Close()
	pa, _ := b.AgentPort("A")
	if err := nsenter.Do(pa.NS, func() error {
		s, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(10, 77, 0, 3), Port: 9999})
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.Write([]byte("hello from A"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	c0.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := c0.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "hello from A" || !from.IP.Equal(net.IPv4(10, 77, 0, 1)) {
		t.Fatalf("C got %q from %v, %v", buf[:n], from, err)
	}
	c1.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := c1.ReadFromUDP(buf); err == nil {
		t.Fatal("replica 1's C received replica 0's datagram: replicas are not isolated")
	}

	// A process started as B runs in B's namespace.
	p, err := b.Start(context.Background(), "B", backend.Cmd{Path: "/bin/sleep", Args: []string{"100"}})
	if err != nil {
		t.Fatal(err)
	}
	var want, got syscall.Stat_t
	syscall.Stat(filepath.Join(NetnsDir, id+"-B"), &want)
	if err := syscall.Stat(filepath.Join("/proc", itoa(p.Pid()), "ns/net"), &got); err != nil || got.Ino != want.Ino {
		t.Fatalf("process namespace inode %d, want B's %d (%v)", got.Ino, want.Ino, err)
	}

	if err := b.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, sig, _ := p.Wait(); sig != syscall.SIGKILL {
		t.Errorf("agent process ended with signal %v, want SIGKILL at teardown", sig)
	}
	if names, _ := Leftovers(id); len(names) != 0 {
		t.Fatalf("namespaces left after teardown: %v", names)
	}
	after := rootLinks(t)
	for l := range after {
		if !before[l] {
			t.Errorf("link %s appeared in the host namespace", l)
		}
	}
}

func theirs(link string) bool {
	for _, p := range []string{"veth", "docker", "br-"} {
		if strings.HasPrefix(link, p) {
			return true
		}
	}
	if len(link) >= 8 && backend.ValidRunID(link[:8]) {
		return !ours[link[:8]]
	}
	return false
}

func itoa(i int) string { return fmtInt(i) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}

// A run killed without teardown leaves namespaces and processes; Clean
// removes them, and nothing that is not a run's.
func TestCleanRemovesOnlyRunLeftovers(t *testing.T) {
	requireRoot(t)
	id := "tbdead01"
	b := New()
	if err := b.Setup(context.Background(), spec(id, 1)); err != nil {
		t.Fatal(err)
	}
	p, err := b.Start(context.Background(), "A", backend.Cmd{Path: "/bin/sleep", Args: []string{"100"}})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's namespaces, one of which merely looks similar.
	for _, n := range []string{"notours", "tb12-x", "tbzzzzzz-A"} {
		if err := exec.Command("ip", "netns", "add", n).Run(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, n := range []string{"notours", "tb12-x", "tbzzzzzz-A"} {
			exec.Command("ip", "netns", "del", n).Run()
		}
		releaseNetnsDir()
	}()
	removed, err := Clean(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 4 {
		t.Errorf("removed %v, want the 4 namespaces of %s", removed, id)
	}
	if _, sig, _ := p.Wait(); sig != syscall.SIGKILL {
		t.Errorf("process in a removed namespace ended with %v, want SIGKILL", sig)
	}
	for _, n := range []string{"notours", "tb12-x", "tbzzzzzz-A"} {
		if _, err := os.Stat(filepath.Join(NetnsDir, n)); err != nil {
			t.Errorf("Clean removed %s, which is not a run's", n)
		}
	}
	b.Teardown(context.Background())
}

// The host is left as found: no namespace of ours, and /run/netns not
// left bound by us.
func TestMain(m *testing.M) {
	code := m.Run()
	if os.Geteuid() == 0 {
		for id := range ours {
			if names, _ := Leftovers(id); len(names) > 0 {
				println("nsbackend tests left namespaces of", id+":", len(names))
				code = 1
			}
		}
		if weMountedD {
			println("nsbackend tests left /run/netns mounted")
			code = 1
		}
	}
	os.Exit(code)
}
