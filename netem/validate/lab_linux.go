package validate

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/internal/nsenter"
)

// Addresses of the two ends: the sender A and the receiver B.
var (
	AddrA = netip.MustParseAddr("10.79.0.1")
	AddrB = netip.MustParseAddr("10.79.0.2")
)

// ProbePort is the receiver's UDP port.
const ProbePort = 7979

// pair is two network namespaces, RUNID-a and RUNID-b, joined by a veth
// pair RUNID-a (in A) and RUNID-b (in B), with static neighbour entries so
// that no ARP crosses an impaired link.
type pair struct {
	runID      string
	nsA, nsB   netns.NsHandle
	linkA      string
	send, recv *net.UDPConn
}

func newPair(runID string) (p *pair, err error) {
	p = &pair{runID: runID, nsA: netns.None(), nsB: netns.None(), linkA: runID + "-a"}
	defer func() {
		if err != nil {
			p.close()
			p = nil
		}
	}()
	if p.nsA, err = nsenter.NewNamed(runID + "-a"); err != nil {
		return p, err
	}
	if p.nsB, err = nsenter.NewNamed(runID + "-b"); err != nil {
		return p, err
	}
	ha, err := netlink.NewHandleAt(p.nsA, unix.NETLINK_ROUTE)
	if err != nil {
		return p, err
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(p.nsB, unix.NETLINK_ROUTE)
	if err != nil {
		return p, err
	}
	defer hb.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: runID + "-a"}, PeerName: runID + "-b", PeerNamespace: netlink.NsFd(p.nsB)}
	if err := ha.LinkAdd(v); err != nil {
		return p, fmt.Errorf("veth: %w", err)
	}
	type end struct {
		h    *netlink.Handle
		name string
		addr netip.Addr
		peer string
		pa   netip.Addr
	}
	ends := []end{{ha, runID + "-a", AddrA, runID + "-b", AddrB}, {hb, runID + "-b", AddrB, runID + "-a", AddrA}}
	macs := map[string]net.HardwareAddr{}
	for _, e := range ends {
		l, err := e.h.LinkByName(e.name)
		if err != nil {
			return p, err
		}
		macs[e.name] = l.Attrs().HardwareAddr
	}
	for _, e := range ends {
		l, err := e.h.LinkByName(e.name)
		if err != nil {
			return p, err
		}
		a := &netlink.Addr{IPNet: &net.IPNet{IP: e.addr.AsSlice(), Mask: net.CIDRMask(24, 32)}}
		if err := e.h.AddrAdd(l, a); err != nil {
			return p, fmt.Errorf("address %v: %w", e.addr, err)
		}
		if err := e.h.LinkSetUp(l); err != nil {
			return p, err
		}
		if lo, err := e.h.LinkByName("lo"); err == nil {
			e.h.LinkSetUp(lo)
		}
		n := &netlink.Neigh{LinkIndex: l.Attrs().Index, State: netlink.NUD_PERMANENT, IP: e.pa.AsSlice(), HardwareAddr: macs[e.peer]}
		if err := e.h.NeighAdd(n); err != nil {
			return p, fmt.Errorf("neighbour %v: %w", e.pa, err)
		}
	}
	if err := nsenter.Do(p.nsA, func() (err error) {
		p.send, err = net.ListenUDP("udp4", &net.UDPAddr{IP: AddrA.AsSlice()})
		return err
	}); err != nil {
		return p, err
	}
	if err := nsenter.Do(p.nsB, func() (err error) {
		p.recv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: AddrB.AsSlice(), Port: ProbePort})
		if err == nil {
			err = p.recv.SetReadBuffer(4 << 20)
		}
		return err
	}); err != nil {
		return p, err
	}
	p.send.SetWriteBuffer(4 << 20)
	return p, nil
}

// close removes both namespaces (and with them the veth pair).
func (p *pair) close() error {
	var errs []error
	for _, c := range []*net.UDPConn{p.send, p.recv} {
		if c != nil {
			c.Close()
		}
	}
	for _, x := range []struct {
		ns   netns.NsHandle
		name string
	}{{p.nsA, p.runID + "-a"}, {p.nsB, p.runID + "-b"}} {
		if x.ns.IsOpen() {
			x.ns.Close()
			if err := netns.DeleteNamed(x.name); err != nil {
				errs = append(errs, fmt.Errorf("removing namespace %s: %w", x.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// csumErrors reads UDP InCsumErrors + IP InHdrErrors of ns.
func csumErrors(ns netns.NsHandle) (uint64, error) {
	var total uint64
	err := nsenter.Do(ns, func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		var head []string
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) == 0 {
				continue
			}
			if head == nil || head[0] != fs[0] {
				head = fs
				continue
			}
			for i := 1; i < len(fs) && i < len(head); i++ {
				if (fs[0] == "Udp:" && head[i] == "InCsumErrors") || (fs[0] == "Ip:" && head[i] == "InHdrErrors") {
					v, _ := strconv.ParseUint(fs[i], 10, 64)
					total += v
				}
			}
			head = nil
		}
		return sc.Err()
	})
	return total, err
}

// Leftovers lists namespaces named after runID (all tbXXXXXX-a/-b when
// runID is empty) that this package would have created.
func Leftovers(runID string) []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		n := e.Name()
		if (runID != "" && strings.HasPrefix(n, runID+"-")) || (runID == "" && strings.HasPrefix(n, "tb") && (strings.HasSuffix(n, "-a") || strings.HasSuffix(n, "-b"))) {
			out = append(out, n)
		}
	}
	return out
}
