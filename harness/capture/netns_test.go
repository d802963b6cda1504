package capture_test

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"tokenbed/internal/nsenter"
	"tokenbed/internal/testenv"
)

// Scratch namespaces are named nsPrefix + PID + "-" + sequence, so that a
// later run can tell its own leftovers (a dead PID) from another live run's.
const nsPrefix = "tbcap-"

var (
	scratchMu   sync.Mutex
	scratchSeq  int
	scratchLive = map[string]bool{} // namespaces this process created and has not deleted
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	removeStale()
	// Ctrl-C or SIGTERM: t.Cleanup does not run, so remove the scratch
	// namespaces here.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		scratchMu.Lock()
		for name := range scratchLive {
			netns.DeleteNamed(name)
		}
		scratchMu.Unlock()
		fmt.Fprintf(os.Stderr, "capture tests: %v: removed scratch namespaces\n", s)
		os.Exit(1)
	}()
	os.Exit(m.Run())
}

// removeStale deletes scratch namespaces left by test processes that died
// (SIGKILL): ours by prefix, and only those whose creator is gone.
func removeStale() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			netns.DeleteNamed(e.Name())
		}
	}
}

func needRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
}

// pair is two scratch namespaces joined by a veth: A (devA, ipA) and B
// (devB, ipB), both up, on 10.99.0.0/24.
type pair struct {
	nsA, nsB     string // names under /run/netns
	hA, hB       netns.NsHandle
	devA, devB   string
	ipA, ipB     netip.Addr
	pathA, pathB string
}

// newPair creates the namespaces and the veth; t.Cleanup deletes them and
// checks that they are gone, whether the test passed or not.
func newPair(t testing.TB) *pair {
	t.Helper()
	needRoot(t)
	scratchMu.Lock()
	scratchSeq++
	seq := scratchSeq
	scratchMu.Unlock()
	id := fmt.Sprintf("%d-%d", os.Getpid(), seq)
	p := &pair{
		nsA: nsPrefix + id + "-a", nsB: nsPrefix + id + "-b",
		// Link names have at most 15 bytes.
		devA: fmt.Sprintf("tbc%d%ca", os.Getpid()%10000000, 'a'+rune(seq%26)),
		devB: fmt.Sprintf("tbc%d%cb", os.Getpid()%10000000, 'a'+rune(seq%26)),
		ipA:  netip.MustParseAddr("10.99.0.1"), ipB: netip.MustParseAddr("10.99.0.2"),
	}
	p.pathA, p.pathB = filepath.Join("/run/netns", p.nsA), filepath.Join("/run/netns", p.nsB)
	t.Cleanup(func() { p.remove(t) })

	for _, n := range []struct {
		name string
		h    *netns.NsHandle
	}{{p.nsA, &p.hA}, {p.nsB, &p.hB}} {
		h, err := nsenter.NewNamed(n.name)
		if err != nil {
			t.Fatalf("ip netns add %s: %v", n.name, err)
		}
		scratchMu.Lock()
		scratchLive[n.name] = true
		scratchMu.Unlock()
		*n.h = h
	}
	hA, err := netlink.NewHandleAt(p.hA)
	if err != nil {
		t.Fatal(err)
	}
	defer hA.Close()
	hB, err := netlink.NewHandleAt(p.hB)
	if err != nil {
		t.Fatal(err)
	}
	defer hB.Close()
	// Equivalent to: ip -n A link add devA type veth peer name devB netns B
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.devA}, PeerName: p.devB, PeerNamespace: netlink.NsFd(int(p.hB))}
	if err := hA.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s/%s: %v", p.devA, p.devB, err)
	}
	for _, e := range []struct {
		h   *netlink.Handle
		dev string
		ip  netip.Addr
	}{{hA, p.devA, p.ipA}, {hB, p.devB, p.ipB}} {
		l, err := e.h.LinkByName(e.dev)
		if err != nil {
			t.Fatal(err)
		}
		// Equivalent to: ip addr add IP/24 dev DEV; ip link set DEV up; ip link set lo up
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.ip.AsSlice(), Mask: net.CIDRMask(24, 32)}}
		if err := e.h.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := e.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		lo, err := e.h.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.h.LinkSetUp(lo); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// remove deletes both namespaces (and with them the veth) and checks that
// nothing is left. Equivalent to: ip netns del A; ip netns del B.
func (p *pair) remove(t testing.TB) {
	for _, n := range []struct {
		name string
		h    netns.NsHandle
	}{{p.nsA, p.hA}, {p.nsB, p.hB}} {
		if n.h.IsOpen() {
			n.h.Close()
		}
		scratchMu.Lock()
		created := scratchLive[n.name]
		delete(scratchLive, n.name)
		scratchMu.Unlock()
		if !created {
			continue
		}
		if err := netns.DeleteNamed(n.name); err != nil {
			t.Errorf("ip netns del %s: %v", n.name, err)
		}
		if _, err := os.Stat(filepath.Join("/run/netns", n.name)); !os.IsNotExist(err) {
			t.Errorf("namespace %s still exists after cleanup (stat: %v)", n.name, err)
		}
		if nsExists(n.name) {
			t.Errorf("namespace %s still mounted after cleanup", n.name)
		}
	}
	for _, dev := range []string{p.devA, p.devB} {
		if _, err := netlink.LinkByName(dev); err == nil {
			t.Errorf("link %s exists in the host namespace after cleanup", dev)
		}
	}
}

// in runs fn on a thread inside namespace h; sockets fn creates stay there.
func in(t testing.TB, h netns.NsHandle, fn func() error) {
	t.Helper()
	if err := nsenter.Do(h, fn); err != nil {
		t.Fatal(err)
	}
}

// listen opens a UDP socket on ip:port inside h.
func listen(t testing.TB, h netns.NsHandle, ip netip.Addr, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	in(t, h, func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port))))
		return err
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// nsExists reports whether a named namespace exists (for leak checks).
func nsExists(name string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "/run/netns/"+name+" ") {
			return true
		}
	}
	return false
}
