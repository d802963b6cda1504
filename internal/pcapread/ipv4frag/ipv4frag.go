// Package ipv4frag reassembles the IPv4 fragments of a capture with
// gopacket's ip4defrag, one defragmenter per capture interface, as each
// receiver does. A datagram larger than the MTU leaves its sender in
// fragments (an FTN global state listing tens of clients: ftn-5x50's
// capture held 37,376 fragments), so a reader that skips them misses it.
// Per interface, because one datagram is captured on several interfaces
// (leaving the sender, arriving at the receiver): pooled, each fragment
// would be seen twice and the copies would contradict each other.
//
// Used by the capture reader (internal/pcapread), through which every
// analysis and `harness pcap` read captures.
package ipv4frag

import (
	"bytes"
	"time"

	"github.com/gopacket/gopacket/ip4defrag"
	"github.com/gopacket/gopacket/layers"
)

// IsFragment reports whether ip is a fragment of a larger datagram.
func IsFragment(ip *layers.IPv4) bool {
	return ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0
}

// key is one datagram's fragments on one interface (RFC 791 §2.3:
// source, destination, protocol and identification).
type key struct {
	iface    int
	src, dst [4]byte
	proto    layers.IPProtocol
	id       uint16
}

// Timeout is how long a datagram's fragments wait for the rest: the
// Linux default of net.ipv4.ipfrag_time, after which a receiver drops
// them too. Without it a long capture that lost fragments would keep
// every incomplete datagram in memory to its end.
const Timeout = 30 * time.Second

// Reassembler reassembles fragments per capture interface. The zero
// value is ready to use.
type Reassembler struct {
	defrag map[int]*ip4defrag.IPv4Defragmenter // by interface index
	count  map[key]*pending                    // per incomplete datagram
	swept  time.Time                           // the last sweep for expired fragments
	// Expired counts the incomplete datagrams forgotten after Timeout
	// without a new fragment.
	Expired int
}

type pending struct {
	n    int       // fragments given so far, repeats included
	last time.Time // the newest of them
}

// Add gives r the fragment ip (IsFragment) captured on interface iface
// at t. When ip completes a datagram, Add returns it (the header with the
// whole payload) and the number of fragments captured for it, repeats
// included; while the datagram is incomplete it returns nil. Fragments
// that contradict each other make no datagram: Add returns ip4defrag's
// error and forgets them, as a receiver drops them. r keeps a copy of
// ip: the caller may reuse it (a gopacket.DecodingLayer).
func (r *Reassembler) Add(iface int, ip *layers.IPv4, t time.Time) (*layers.IPv4, int, error) {
	if r.defrag == nil {
		r.defrag, r.count, r.swept = map[int]*ip4defrag.IPv4Defragmenter{}, map[key]*pending{}, t
	}
	if t.Sub(r.swept) >= Timeout {
		r.sweep(t)
	}
	d := r.defrag[iface]
	if d == nil {
		d = ip4defrag.NewIPv4Defragmenter()
		r.defrag[iface] = d
	}
	k := key{iface: iface, proto: ip.Protocol, id: ip.Id}
	copy(k.src[:], ip.SrcIP.To4())
	copy(k.dst[:], ip.DstIP.To4())
	p := r.count[k]
	if p == nil {
		p = &pending{}
		r.count[k] = p
	}
	p.n++
	p.last = t
	frag := *ip // the defragmenter keeps what it is given
	frag.SrcIP, frag.DstIP = bytes.Clone(ip.SrcIP), bytes.Clone(ip.DstIP)
	frag.Payload = bytes.Clone(ip.Payload)
	whole, err := d.DefragIPv4WithTimestamp(&frag, t)
	if err != nil {
		delete(r.count, k)
		return nil, 0, err
	}
	if whole == nil {
		return nil, 0, nil
	}
	delete(r.count, k)
	return whole, p.n, nil
}

// sweep forgets the datagrams whose newest fragment is older than
// Timeout before t, in the defragmenters and here. Captures are read in
// time order within the writer's flush window, which is far below
// Timeout.
func (r *Reassembler) sweep(t time.Time) {
	cut := t.Add(-Timeout)
	for _, d := range r.defrag {
		d.DiscardOlderThan(cut)
	}
	for k, p := range r.count {
		if p.last.Before(cut) {
			delete(r.count, k)
			r.Expired++
		}
	}
	r.swept = t
}

// Pending is the number of datagrams still waiting for fragments.
func (r *Reassembler) Pending() int { return len(r.count) }
