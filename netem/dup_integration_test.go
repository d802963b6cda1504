package netem

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"tokenbed/internal/netlinkdump"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var dupModules = append(kernelModules, "bridge", "ifb", "sch_ingress", "act_mirred")

// star is the harness's layout in small: a hub namespace with bridge br0
// and a port pI per host, each host a namespace with eth0 = 10.79.0.(I+1).
type star struct {
	hub     netns.NsHandle
	hubName string
	hosts   []netns.NsHandle
	addrs   []netip.Addr
}

func newStar(t *testing.T, n int) *star {
	t.Helper()
	s := &star{}
	s.hub, s.hubName = scratchNS(t, "duphub")
	hh, err := netlink.NewHandleAt(s.hub, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer hh.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := hh.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	if err := hh.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		ns, _ := scratchNS(t, fmt.Sprintf("duph%d", i))
		addr := netip.AddrFrom4([4]byte{10, 79, 0, byte(i + 1)})
		s.hosts, s.addrs = append(s.hosts, ns), append(s.addrs, addr)
		port := fmt.Sprintf("p%d", i)
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Index}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
		if err := hh.LinkAdd(v); err != nil {
			t.Fatalf("veth %s: %v", port, err)
		}
		p, err := hh.LinkByName(port)
		if err != nil {
			t.Fatal(err)
		}
		if err := hh.LinkSetUp(p); err != nil {
			t.Fatal(err)
		}
		ah, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ah.LinkByName("eth0")
		if err == nil {
			err = ah.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(24, 32)}})
		}
		if err == nil {
			err = ah.LinkSetUp(l)
		}
		ah.Close()
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
	}
	return s
}

// sourceTree is the tree toward host to with profiles[from] for each
// other sender, as the runner builds it.
func (s *star) sourceTree(to int, profiles map[int]Profile) SourceTree {
	st := SourceTree{Link: fmt.Sprintf("p%d", to), Host: netip.PrefixFrom(s.addrs[to], 32)}
	for from := range s.addrs {
		if from != to {
			st.Sources = append(st.Sources, Source{Dest: Dest{Prefix: netip.PrefixFrom(s.addrs[from], 32), Profile: profiles[from]}, Via: fmt.Sprintf("p%d", from)})
		}
	}
	return st
}

// linkStats returns the packet counters of eth0 in ns.
func linkStats(t *testing.T, ns netns.NsHandle) (tx, rx uint64) {
	t.Helper()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	st := l.Attrs().Statistics
	return st.TxPackets, st.RxPackets
}

// counts sends n numbered datagrams from host from to host to and returns
// how many distinct numbers arrived and how many arrived more than once
// (the copies beyond the first).
func (s *star) counts(t *testing.T, from, to, n int) (distinct, extra int) {
	t.Helper()
	rx := inNS(t, s.hosts[to], func() (net.PacketConn, error) { return net.ListenPacket("udp4", s.addrs[to].String()+":7009") })
	defer rx.Close()
	tx := inNS(t, s.hosts[from], func() (net.PacketConn, error) { return net.ListenPacket("udp4", s.addrs[from].String()+":0") })
	defer tx.Close()
	seen := make([]int, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			rx.SetReadDeadline(time.Now().Add(2 * time.Second))
			k, _, err := rx.ReadFrom(buf)
			if err != nil {
				return
			}
			var i int
			if _, err := fmt.Sscanf(string(buf[:k]), "seq %d", &i); err == nil && i >= 0 && i < n {
				seen[i]++
			}
		}
	}()
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.addrs[to], 7009))
	for i := 0; i < n; i++ {
		if _, err := tx.WriteTo([]byte(fmt.Sprintf("seq %d", i)), dst); err != nil {
			t.Fatal(err)
		}
		if i%20 == 19 {
			// Paced well below what the guest's receiver drains.
			time.Sleep(2 * time.Millisecond)
		}
	}
	<-done
	for _, c := range seen {
		if c > 0 {
			distinct++
			extra += c - 1
		}
	}
	return distinct, extra
}

// TestKernelDuplicationOwnDevice: with three hosts and "duplicate 10%" on
// one direction (plain delays on the others), the kernel accepts the
// layout (the duplicating sender on an IFB device of its own), reads back
// every profile, duplicates that direction at about 10% and no other. On
// the old layout (every sender a leaf of the host's tree) the duplicating
// leaf is refused: TestKernelRefusesDuplicateBesideOtherNetems.
func TestKernelDuplicationOwnDevice(t *testing.T) {
	if reexecInUML(t, dupModules) {
		return
	}
	if err := CheckOwnDevice(runID); err != nil {
		t.Fatalf("CheckOwnDevice: %v", err)
	}
	s := newStar(t, 3)
	dup := Profile{Delay: 2 * time.Millisecond, Duplicate: 10}
	plain := func(ms int) Profile { return Profile{Delay: time.Duration(ms) * time.Millisecond} }
	// profiles[to][from]: 0>1 duplicates.
	profiles := map[int]map[int]Profile{
		0: {1: plain(3), 2: plain(4)},
		1: {0: dup, 2: plain(5)},
		2: {0: plain(6), 1: plain(7)},
	}
	trees := map[int]*Tree{}
	for to := range s.hosts {
		tr, err := s.sourceTree(to, profiles[to]).Apply(s.hub)
		if err != nil {
			t.Fatalf("tree toward host %d: %v", to, err)
		}
		trees[to] = tr
	}
	p0 := netip.PrefixFrom(s.addrs[0], 32)
	if d := trees[1].Own(p0); d != "p1-10" || !slices.Equal(trees[1].OwnDevices(), []string{"p1-10"}) {
		t.Fatalf("sender 0 toward 1 is on %q (own devices %q), want its own device p1-10", d, trees[1].OwnDevices())
	}
	if d := trees[0].OwnDevices(); len(d) != 0 {
		t.Fatalf("nothing duplicates toward 0, yet own devices %q", d)
	}
	for to, tr := range trees {
		for from, p := range profiles[to] {
			src := netip.PrefixFrom(s.addrs[from], 32)
			if to != 1 || from != 0 {
				if d := tr.Own(src); d != "" {
					t.Errorf("%d>%d does not duplicate but is on its own device %s", from, to, d)
				}
			}
			got, err := tr.Leaf(src).Read()
			if err != nil {
				t.Fatalf("%d>%d read-back: %v", from, to, err)
			}
			if !got.Equal(p.KernelView()) {
				t.Errorf("%d>%d read back %+v, want %+v", from, to, got, p.KernelView())
			}
		}
	}
	// iproute2's view of the same: the duplicating netem alone at the root
	// of p1-10, the redirect on p0's ingress, and no leaf for 10.79.0.1 in
	// the tree on p1.
	if out := tcShow(t, s.hubName, "qdisc", "show", "dev", "p1-10"); !strings.Contains(out, "qdisc netem") || !strings.Contains(out, "root") || !strings.Contains(out, "duplicate 10%") {
		t.Errorf("tc qdisc show dev p1-10:\n%s", out)
	}
	if out := tcShow(t, s.hubName, "filter", "show", "dev", "p0", "ingress"); !strings.Contains(out, "mirred (Egress Redirect to device p1-10)") ||
		!strings.Contains(out, "match 0a4f0001/ffffffff at 12") || !strings.Contains(out, "match 0a4f0002/ffffffff at 16") {
		t.Errorf("tc filter show dev p0 ingress:\n%s", out)
	}
	if out := tcShow(t, s.hubName, "filter", "show", "dev", "p1"); strings.Contains(out, "0a4f0001") || !strings.Contains(out, "0a4f0003") {
		t.Errorf("tc filter show dev p1 (want a leaf for .3 only):\n%s", out)
	}

	const n = 2000
	tx0, _ := linkStats(t, s.hosts[0])
	_, rx1 := linkStats(t, s.hosts[1])
	distinct, extra := s.counts(t, 0, 1, n)
	tx0b, _ := linkStats(t, s.hosts[0])
	_, rx1b := linkStats(t, s.hosts[1])
	rate := float64(extra) / float64(distinct)
	t.Logf("0>1 (duplicate 10%%): %d of %d arrived, %d duplicates (%.1f%%); eth0 of 0 sent %d, eth0 of 1 received %d", distinct, n, extra, 100*rate, tx0b-tx0, rx1b-rx1)
	if distinct < n*98/100 {
		t.Errorf("0>1: only %d of %d datagrams arrived", distinct, n)
	}
	// Binomial(2000, 0.1): sd 13.4 duplicates; ±4.5 sd.
	if rate < 0.07 || rate > 0.13 {
		t.Errorf("0>1: duplicate rate %.3f, want 0.10 ± 0.03", rate)
	}
	// The sender's own interface sees every packet once, before
	// impairment (a capture there is honest); the receiver's sees the
	// copies too.
	if sent := tx0b - tx0; sent < n || sent > n+20 {
		t.Errorf("eth0 of sender 0 sent %d packets for %d datagrams: impairment must come after it", sent, n)
	}
	if got := rx1b - rx1; got < uint64(distinct+extra) {
		t.Errorf("eth0 of host 1 received %d packets, fewer than the %d datagrams counted", got, distinct+extra)
	}
	for _, d := range [][2]int{{1, 0}, {2, 1}, {0, 2}, {1, 2}, {2, 0}} {
		distinct, extra := s.counts(t, d[0], d[1], n/2)
		t.Logf("%d>%d (%s): %d of %d arrived, %d duplicates", d[0], d[1], profiles[d[1]][d[0]], distinct, n/2, extra)
		if extra != 0 || distinct < n/2*98/100 {
			t.Errorf("%d>%d: %d of %d arrived with %d duplicates, want all once", d[0], d[1], distinct, n/2, extra)
		}
	}

	// In place at run time: the own device takes another duplicating
	// profile; a leaf beside others cannot duplicate.
	more := Profile{Delay: time.Millisecond, Duplicate: 30}
	if err := trees[1].Change(p0, more); err != nil {
		t.Fatal(err)
	}
	if got, err := trees[1].Leaf(p0).Read(); err != nil || !got.Equal(more.KernelView()) {
		t.Fatalf("after Change: %+v, %v", got, err)
	}
	if err := trees[2].Change(p0, dup); !errors.Is(err, ErrSharedDuplicate) {
		t.Fatalf("Change of a leaf beside another to a duplicating profile = %v, want ErrSharedDuplicate", err)
	}
	// Toward 1 the leaf for 2 is the only netem left on p1: the kernel
	// allows it to duplicate, and so does Change.
	if err := trees[1].Change(netip.PrefixFrom(s.addrs[2], 32), dup); err != nil {
		t.Fatalf("Change of the only leaf on p1 to a duplicating profile: %v", err)
	}

	for to, tr := range trees {
		if err := tr.Remove(); err != nil {
			t.Fatalf("remove tree toward %d: %v", to, err)
		}
	}
	if out := tcShow(t, s.hubName, "qdisc", "show"); strings.Contains(out, "netem") || strings.Contains(out, "ingress") || strings.Contains(out, "htb") {
		t.Errorf("qdiscs left after Remove:\n%s", out)
	}
	if out, _ := s.hubLinks(t); strings.Contains(out, "p1-10") {
		t.Errorf("own device left after Remove: %s", out)
	}
}

func (s *star) hubLinks(t *testing.T) (string, error) {
	h, err := netlink.NewHandleAt(s.hub, unix.NETLINK_ROUTE)
	if err != nil {
		return "", err
	}
	defer h.Close()
	ls, err := netlinkdump.Retry(h.LinkList)
	var names []string
	for _, l := range ls {
		names = append(names, l.Attrs().Name)
	}
	return strings.Join(names, " "), err
}

// TestKernelRefusesDuplicateBesideOtherNetems is the defect: the old
// layout, a netem leaf per sender in the host's tree, cannot take a
// duplicating profile beside other netems. The kernel answers "netem:
// cannot mix duplicating netems with other netems in tree" (6.1.176 in the
// guest; check_netem_in_tree), which Change reports as ErrSharedDuplicate.
func TestKernelRefusesDuplicateBesideOtherNetems(t *testing.T) {
	if reexecInUML(t, dupModules) {
		return
	}
	s := newStar(t, 3)
	tr, err := s.sourceTree(1, map[int]Profile{0: {Delay: 2 * time.Millisecond}, 2: {Delay: 3 * time.Millisecond}}).Apply(s.hub)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Remove()
	p0 := netip.PrefixFrom(s.addrs[0], 32)
	dup := Profile{Delay: 2 * time.Millisecond, Duplicate: 10}
	err = tr.Change(p0, dup)
	if !errors.Is(err, ErrSharedDuplicate) || !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "netem: cannot mix duplicating netems with other netems in tree") {
		t.Fatalf("change of a leaf beside another to duplicate = %v, want the kernel's refusal as ErrSharedDuplicate", err)
	}
	t.Logf("as expected, the kernel refuses the old layout: %v", err)
	// Adding a duplicating netem beside the others, in a class of its
	// own, is refused the same way.
	c, err := dial(s.hub)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := c.ifindex("p1")
	if err == nil {
		err = addClass(c, idx, 0x20)
	}
	c.close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Add(Target{NS: s.hub, Link: "p1", Parent: netlink.MakeHandle(1, 0x20), Handle: netlink.MakeHandle(0x20, 0)}, dup)
	if !errors.Is(err, ErrSharedDuplicate) {
		t.Fatalf("Add of a duplicating netem beside others = %v, want ErrSharedDuplicate", err)
	}
	if got, err := tr.Leaf(p0).Read(); err != nil || got.Duplicate != 0 {
		t.Fatalf("leaf after the refused change: %+v, %v", got, err)
	}
}

// TestCheckOwnDeviceOnThisKernel: where netem exists CheckOwnDevice
// passes (in the guest: ifb, sch_ingress and act_mirred are loaded); on
// this project's host it fails with ErrNoNetem. The scratch namespace goes
// either way.
func TestCheckOwnDeviceOnThisKernel(t *testing.T) {
	needRoot(t)
	err := CheckOwnDevice(runID)
	if h, serr := netns.GetFromName(runID + "-owncheck"); serr == nil {
		h.Close()
		t.Fatal("CheckOwnDevice left its namespace behind")
	}
	if hostHasNetem() {
		if err != nil {
			t.Fatalf("CheckOwnDevice on a kernel with netem: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrNoNetem) {
		t.Fatalf("CheckOwnDevice without netem = %v, want ErrNoNetem", err)
	}
}
