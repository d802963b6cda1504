package netem

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/internal/nsenter"
	"tokenbed/internal/testenv"
)

// runID prefixes every namespace these tests create, so leftovers are
// recognisable and nothing else is touched.
var runID = fmt.Sprintf("tbnetem%d", os.Getpid())

var kernelModules = []string{"sch_netem", "sch_htb", "cls_u32", "veth"}

func needRoot(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "creates network namespaces and qdiscs")
}

// scratchNS creates /run/netns/RUNID-suffix and removes it at cleanup,
// asserting that it is gone.
func scratchNS(t *testing.T, suffix string) (netns.NsHandle, string) {
	t.Helper()
	name := runID + "-" + suffix
	ns, err := nsenter.NewNamed(name)
	if err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("removing namespace %s: %v", name, err)
		}
		if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
			t.Errorf("namespace %s still exists after cleanup", name)
		}
	})
	return ns, name
}

// TestCheckKernelOnThisKernel: on a kernel without sch_netem (this
// project's host) CheckKernel must say so with ErrNoNetem; where netem
// exists (inside UML, users' machines) it must return nil. Either way the
// scratch namespace is gone afterwards.
func TestCheckKernelOnThisKernel(t *testing.T) {
	needRoot(t)
	err := CheckKernel(runID)
	if _, serr := os.Stat("/run/netns/" + runID + "-netemcheck"); !os.IsNotExist(serr) {
		t.Fatalf("CheckKernel left its namespace behind")
	}
	if hostHasNetem() {
		if err != nil {
			t.Fatalf("netem module is present but CheckKernel says: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrNoNetem) || !strings.Contains(err.Error(), "CONFIG_NET_SCH_NETEM") {
		t.Fatalf("CheckKernel on a kernel without netem = %v, want ErrNoNetem naming CONFIG_NET_SCH_NETEM", err)
	}
	t.Logf("as expected on this kernel: %v", err)
}

// hostHasNetem looks at the kernel independently of this package: a
// loaded or loadable sch_netem, or netem built in.
func hostHasNetem() bool {
	if b, err := os.ReadFile("/proc/modules"); err == nil && strings.Contains(string(b), "sch_netem ") {
		return true
	}
	var uts [65]byte
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		copy(uts[:], strings.TrimSpace(string(rel)))
		r := strings.TrimRight(string(uts[:]), "\x00")
		for _, f := range []string{"/lib/modules/" + r + "/modules.dep", "/lib/modules/" + r + "/modules.builtin"} {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "sch_netem.ko") {
				return true
			}
		}
	}
	return false
}

// TestAddWithoutNetemIsAnError: a profile that cannot be applied is an
// error, never a silent no-op.
func TestAddWithoutNetemIsAnError(t *testing.T) {
	needRoot(t)
	if hostHasNetem() {
		t.Skip("this kernel has netem; TestKernelProfiles covers it")
	}
	ns, _ := scratchNS(t, "nonetem")
	_, err := Add(Target{NS: ns, Link: "lo"}, Profile{Delay: time.Millisecond})
	var oe *OpError
	if !errors.Is(err, ErrNoNetem) || !errors.As(err, &oe) || oe.Op != "add" {
		t.Fatalf("Add = %v, want an OpError wrapping ErrNoNetem", err)
	}
}

// vethPair creates a veth pair between two namespaces with the given
// addresses and brings both ends up.
func vethPair(t *testing.T, nsA netns.NsHandle, a string, addrA []string, nsB netns.NsHandle, b string, addrB []string) {
	t.Helper()
	ha, err := netlink.NewHandleAt(nsA, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(nsB, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b, PeerNamespace: netlink.NsFd(nsB)}
	if err := ha.LinkAdd(v); err != nil {
		t.Fatalf("veth %s/%s: %v", a, b, err)
	}
	for _, x := range []struct {
		h     *netlink.Handle
		name  string
		addrs []string
	}{{ha, a, addrA}, {hb, b, addrB}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range x.addrs {
			ad, err := netlink.ParseAddr(s)
			if err != nil {
				t.Fatal(err)
			}
			ad.Flags = unix.IFA_F_NODAD // usable at once, also for IPv6
			if err := x.h.AddrAdd(l, ad); err != nil {
				t.Fatalf("addr %s on %s: %v", s, x.name, err)
			}
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		lo, _ := x.h.LinkByName("lo")
		x.h.LinkSetUp(lo)
	}
}

// tcShow runs iproute2's tc in the namespace and returns its output.
func tcShow(t *testing.T, nsName string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", nsName, "tc"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tc %v: %v\n%s", args, err, out)
	}
	return string(out)
}

var (
	reQdiscLine = regexp.MustCompile(`(?m)^qdisc netem ([0-9a-f]+:) (?:root|parent [0-9a-f:]+) .*?(limit .*)$`)
	reStateShow = regexp.MustCompile(`loss state p13 (\S+) p31 (\S+) p32 (\S+) p23 (\S+) p14 (\S+)`)
	reGEShow    = regexp.MustCompile(`loss gemodel p (\S+) r (\S+) 1-h (\S+) 1-k (\S+)`)
	reRateShow  = regexp.MustCompile(`rate (\S+)((?: packetoverhead -?\d+)?)((?: cellsize \d+)?)((?: celloverhead -?\d+)?)`)
	reSlotDist  = regexp.MustCompile(`slot distribution `)
)

// parseTCShow turns the netem options `tc qdisc show` (iproute2 6.1)
// prints into input syntax and parses that: an independent reading of
// the kernel's state.
func parseTCShow(line string) (Profile, error) {
	s := reStateShow.ReplaceAllString(line, "loss state $1 $2 $3 $4 $5")
	s = reGEShow.ReplaceAllString(s, "loss gemodel $1 $2 $3 $4")
	s = reRateShow.ReplaceAllStringFunc(s, func(m string) string {
		g := reRateShow.FindStringSubmatch(m)
		po := strings.TrimPrefix(g[2], " packetoverhead ")
		cs := strings.TrimPrefix(g[3], " cellsize ")
		co := strings.TrimPrefix(g[4], " celloverhead ")
		out := "rate " + g[1]
		switch {
		case co != "":
			out += " " + or0(po) + " " + or0(cs) + " " + co
		case cs != "":
			out += " " + or0(po) + " " + cs
		case po != "":
			out += " " + po
		}
		return out
	})
	s = reSlotDist.ReplaceAllString(s, "slot distribution "+TableUnreported+" ")
	p, err := Parse(s)
	if err != nil {
		return p, fmt.Errorf("tc printed %q (rewritten %q): %w", line, s, err)
	}
	return p, nil
}

func or0(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

func tcNetemLine(t *testing.T, nsName, dev string) string {
	t.Helper()
	out := tcShow(t, nsName, "-s", "qdisc", "show", "dev", dev)
	m := reQdiscLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no netem qdisc in tc output:\n%s", out)
	}
	return m[2]
}

// kernelProfiles are applied one after the other on a veth. Values are
// round so that tc's 6-digit, 1-decimal printing shows them exactly.
var kernelProfiles = []string{
	"delay 40ms 5ms 25% distribution normal",
	"delay 100ms 10ms distribution pareto loss random 1% 25%",
	"loss random 2.5% 10%",
	"loss gemodel 1% 10% 70% 0.1% ecn",
	"loss state 1% 30% 10% 80% 0.5%",
	"duplicate 1% 50%",
	"delay 10ms reorder 25% 50% gap 5",
	"corrupt 0.1% 5%",
	"rate 5kbit 20 100 5",
	"rate 50gbit",
	"limit 50 delay 1s",
	"slot 1ms 2ms packets 4 bytes 1500",
	"slot distribution pareto 2ms 1ms bytes 2048",
}

func TestKernelProfiles(t *testing.T) {
	if reexecInUML(t, kernelModules) {
		return
	}
	needRoot(t)
	if err := CheckKernel(runID); err != nil {
		t.Fatalf("netem unavailable in the guest: %v", err)
	}
	ns, nsName := scratchNS(t, "profiles")
	peer, _ := scratchNS(t, "profpeer")
	vethPair(t, ns, "nt0", []string{"10.77.0.1/24"}, peer, "nt1", []string{"10.77.0.2/24"})
	tgt := Target{NS: ns, Link: "nt0"}
	var q *Qdisc
	for i, s := range kernelProfiles {
		p, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if q == nil {
			if q, err = Add(tgt, p); err != nil {
				t.Fatalf("Add(%q): %v", s, err)
			}
		} else if err = q.Change(p); errors.Is(err, ErrTableStuck) {
			// Expected where an earlier profile loaded a table.
			if err = q.Replace(p); err != nil {
				t.Fatalf("Replace(%q): %v", s, err)
			}
		} else if err != nil {
			t.Fatalf("Change(%q) after %q: %v", s, kernelProfiles[i-1], err)
		}
		want := quantised(p.KernelView())
		got, err := q.Read()
		if err != nil {
			t.Fatalf("Read after %q: %v", s, err)
		}
		if !quantised(got).Equal(want) {
			t.Errorf("%q: netlink read-back\n got %+v\nwant %+v", s, got, want)
		}
		line := tcNetemLine(t, nsName, "nt0")
		shown, err := parseTCShow(line)
		if err != nil {
			t.Fatal(err)
		}
		if !quantised(shown).Equal(want) {
			t.Errorf("%q: tc shows %q =\n %+v\nwant %+v", s, line, shown, want)
		}
	}
	if err := q.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Read(); err == nil {
		t.Fatal("Read after Delete found a netem qdisc")
	}
}

// TestKernelChangeInPlace: Change keeps the qdisc (same handle, counters
// keep counting) and resets options the new profile leaves out, which
// `tc qdisc change` would keep.
func TestKernelChangeInPlace(t *testing.T) {
	if reexecInUML(t, kernelModules) {
		return
	}
	needRoot(t)
	ns, nsName := scratchNS(t, "change")
	q, err := Add(Target{NS: ns, Link: "lo", Handle: netlink.MakeHandle(0x77, 0)}, Profile{Delay: 20 * time.Millisecond, Corrupt: 5, Rate: Rate{BytesPerSecond: 125000}})
	if err != nil {
		t.Fatal(err)
	}
	next := Profile{Delay: 30 * time.Millisecond, Jitter: time.Millisecond, Loss: Loss{Model: LossGE, P: 1, R: 50, OneMinusH: 100}}
	if err := q.Change(next); err != nil {
		t.Fatal(err)
	}
	got, err := q.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(next.KernelView()) {
		t.Fatalf("after Change: %+v, want %+v (corrupt and rate must be gone)", got, next.KernelView())
	}
	if out := tcShow(t, nsName, "qdisc", "show", "dev", "lo"); !strings.Contains(out, "qdisc netem 77:") {
		t.Fatalf("handle changed, not in place:\n%s", out)
	}
	// A table cannot be dropped in place: Change refuses instead of
	// leaving netem shaping uniform jitter with the old table.
	withTable := next
	withTable.Distribution = Distribution{Name: "normal"}
	if err := q.Change(withTable); err != nil {
		t.Fatal(err)
	}
	if err := q.Change(next); !errors.Is(err, ErrTableStuck) {
		t.Fatalf("Change dropping a table = %v, want ErrTableStuck", err)
	}
	if err := q.Replace(next); err != nil {
		t.Fatal(err)
	}
	if err := q.Change(next); err != nil {
		t.Fatalf("after Replace the table is gone, Change must work: %v", err)
	}
	if err := q.Delete(); err != nil {
		t.Fatal(err)
	}
}

// udpRTT measures round trips from a socket in ns to an echo server; it
// returns the sorted RTTs.
func udpRTT(t *testing.T, ns netns.NsHandle, dst netip.AddrPort, n int) []time.Duration {
	t.Helper()
	network := "udp4"
	if dst.Addr().Is6() {
		network = "udp6"
	}
	c := inNS(t, ns, func() (net.PacketConn, error) { return net.ListenPacket(network, ":0") })
	defer c.Close()
	var rtts []time.Duration
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.WriteTo([]byte(fmt.Sprintf("probe %d", i)), net.UDPAddrFromAddrPort(dst)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		m, _, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("probe %d to %s: %v", i, dst, err)
		}
		if string(buf[:m]) != fmt.Sprintf("probe %d", i) {
			t.Fatalf("probe %d to %s: echo %q", i, dst, buf[:m])
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	return rtts
}

// inNS opens a socket inside ns on a locked thread; the socket stays in ns.
func inNS(t *testing.T, ns netns.NsHandle, open func() (net.PacketConn, error)) net.PacketConn {
	t.Helper()
	var c net.PacketConn
	if err := nsenter.Do(ns, func() (err error) {
		c, err = open()
		return err
	}); err != nil {
		if c != nil {
			c.Close()
		}
		t.Fatal(err)
	}
	return c
}

func TestKernelTree(t *testing.T) {
	if reexecInUML(t, append(kernelModules, "ipv6")) {
		return
	}
	needRoot(t)
	nsA, nameA := scratchNS(t, "treea")
	nsB, _ := scratchNS(t, "treeb")
	// One interface in A; B answers on three addresses: two impaired peers
	// and one that no filter matches.
	vethPair(t, nsA, "ta0", []string{"10.78.0.1/24", "fd78::1/64"}, nsB, "tb0",
		[]string{"10.78.0.2/24", "10.78.0.3/24", "10.78.0.4/24", "fd78::2/64", "fd78::3/64"})
	for _, network := range []string{"udp4", "udp6"} {
		echo := inNS(t, nsB, func() (net.PacketConn, error) { return net.ListenPacket(network, ":7007") })
		t.Cleanup(func() { echo.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				n, from, err := echo.ReadFrom(buf)
				if err != nil {
					return
				}
				echo.WriteTo(buf[:n], from)
			}
		}()
	}
	p1, p2 := netip.MustParsePrefix("10.78.0.2/32"), netip.MustParsePrefix("10.78.0.3/32")
	p6 := netip.MustParsePrefix("fd78::3/128")
	tree, err := ApplyTree(nsA, "ta0", []Dest{
		{Prefix: p1, Profile: Profile{Delay: 5 * time.Millisecond}},
		{Prefix: p2, Profile: Profile{Delay: 40 * time.Millisecond}},
		{Prefix: p6, Profile: Profile{Delay: 20 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	median := func(addr string) time.Duration {
		r := udpRTT(t, nsA, netip.AddrPortFrom(netip.MustParseAddr(addr), 7007), 21)
		return r[len(r)/2]
	}
	// netem delays only A→B here; the guest adds ~0.5 ms per Go round trip.
	const slack = 4 * time.Millisecond
	check := func(addr string, want time.Duration) {
		t.Helper()
		m := median(addr)
		t.Logf("%s: median RTT %v (netem delay %v)", addr, m, want)
		if m < want || m > want+slack {
			t.Errorf("%s: median RTT %v, want [%v, %v]", addr, m, want, want+slack)
		}
	}
	check("10.78.0.2", 5*time.Millisecond)
	check("10.78.0.3", 40*time.Millisecond)
	check("10.78.0.4", 0)
	check("fd78::3", 20*time.Millisecond)
	check("fd78::2", 0)

	classes := tcShow(t, nameA, "-s", "class", "show", "dev", "ta0")
	for _, c := range []string{"class htb 1:1 ", "class htb 1:10 ", "class htb 1:11 ", "class htb 1:12 "} {
		if !strings.Contains(classes, c) {
			t.Errorf("tc class show lacks %q:\n%s", c, classes)
		}
	}
	filters := tcShow(t, nameA, "filter", "show", "dev", "ta0")
	for _, f := range []string{"flowid 1:10", "flowid 1:11", "match 0a4e0002/ffffffff at 16", "match 0a4e0003/ffffffff at 16",
		"protocol ipv6 pref 2 u32", "flowid 1:12", "match fd780000/ffffffff at 24", "match 00000003/ffffffff at 36"} {
		if !strings.Contains(filters, f) {
			t.Errorf("tc filter show lacks %q:\n%s", f, filters)
		}
	}
	qd := tcShow(t, nameA, "-s", "qdisc", "show", "dev", "ta0")
	for _, q := range []string{"qdisc htb 1: root", "qdisc netem 10: parent 1:10 limit 1000 delay 5ms", "qdisc netem 11: parent 1:11 limit 1000 delay 40ms"} {
		if !strings.Contains(qd, q) {
			t.Errorf("tc qdisc show lacks %q:\n%s", q, qd)
		}
	}

	// Change one destination in place; the other keeps its delay.
	if err := tree.Change(p2, Profile{Delay: 15 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	check("10.78.0.3", 15*time.Millisecond)
	check("10.78.0.2", 5*time.Millisecond)
	if got, err := tree.Leaf(p2).Read(); err != nil || got.Delay != 15*time.Millisecond {
		t.Fatalf("leaf read-back %+v %v", got, err)
	}
	if err := tree.Remove(); err != nil {
		t.Fatal(err)
	}
	if qd := tcShow(t, nameA, "qdisc", "show", "dev", "ta0"); strings.Contains(qd, "htb") || strings.Contains(qd, "netem") {
		t.Fatalf("tree not removed:\n%s", qd)
	}
	check("10.78.0.3", 0)
}

func TestTreeRejectsBadInput(t *testing.T) {
	_, err := ApplyTree(netns.None(), "x", []Dest{
		{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Profile: Profile{}},
		{Prefix: netip.MustParsePrefix("10.0.0.5/32"), Profile: Profile{}},
	})
	if err == nil || !strings.Contains(err.Error(), "dests[1].Prefix 10.0.0.5/32 overlaps dests[0].Prefix") {
		t.Fatalf("overlap: %v", err)
	}
	_, err = ApplyTree(netns.None(), "x", []Dest{{Prefix: netip.MustParsePrefix("10.0.0.5/32"), Profile: Profile{Gap: 2}}})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "Gap" {
		t.Fatalf("invalid profile: %v", err)
	}
}

func TestU32KeysForPrefixes(t *testing.T) {
	f := u32Addr(3, netip.MustParsePrefix("10.1.2.0/23"), 0x10010, false)
	k := f.Sel.Keys
	if len(k) != 1 || k[0].Off != 16 {
		t.Fatalf("v4 keys %+v", k)
	}
	if k[0].Mask != 0xfffffe00 || k[0].Val != 0x0a010200 {
		t.Fatalf("v4 key mask %#x val %#x", k[0].Mask, k[0].Val)
	}
	f = u32Addr(3, netip.MustParsePrefix("fd00::1/128"), 1, false)
	if len(f.Sel.Keys) != 4 || f.Sel.Keys[3].Off != 36 || f.Priority != 2 {
		t.Fatalf("v6 keys %+v", f.Sel.Keys)
	}
	// Source matching: IPv4 source at offset 12, IPv6 at 8.
	if f = u32Addr(3, netip.MustParsePrefix("10.1.2.3/32"), 1, true); f.Sel.Keys[0].Off != 12 {
		t.Fatalf("v4 source key %+v", f.Sel.Keys)
	}
	if f = u32Addr(3, netip.MustParsePrefix("fd00::1/128"), 1, true); f.Sel.Keys[0].Off != 8 || f.Sel.Keys[3].Off != 20 {
		t.Fatalf("v6 source keys %+v", f.Sel.Keys)
	}
}
