// Package inject puts whole IPv4 packets into a network namespace with
// the source address they carry, as a network attacker with a tap would
// replay what it recorded: a raw socket (IPPROTO_RAW, which implies
// IP_HDRINCL) opened inside the namespace, so the kernel sends the
// packet's own header, spoofed source included, and delivers it locally
// when its destination is an address of that namespace. Signed datagrams
// bind both UDP addresses (agent/ftn/codec, 002 §3), so a replay that
// changed the source would be refused for that alone: only a spoofed one
// tests the receiver's freshness rules.
//
// It is for tests, and only into namespaces the test's run created.
package inject

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netns"

	"tokenbed/internal/nsenter"
)

// Injector sends packets into one namespace.
type Injector struct {
	ns string
	fd int
}

// Open opens a raw socket inside the named network namespace.
func Open(ns string) (*Injector, error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns, err)
	}
	defer h.Close()
	in := &Injector{ns: ns, fd: -1}
	err = nsenter.Do(h, func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
		in.fd = fd
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("namespace %s: raw socket: %w", ns, err)
	}
	return in, nil
}

// Send sends one whole IPv4 packet (header included) to its destination.
// A UDP checksum the sender left to offload is not valid on a copy: set
// it to zero (none, RFC 768) before sending, with UDPNoChecksum.
func (in *Injector) Send(pkt []byte) error {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return fmt.Errorf("namespace %s: not an IPv4 packet (%d bytes)", in.ns, len(pkt))
	}
	var dst syscall.SockaddrInet4
	copy(dst.Addr[:], pkt[16:20])
	return syscall.Sendto(in.fd, pkt, 0, &dst)
}

// Close closes the socket.
func (in *Injector) Close() error { return syscall.Close(in.fd) }

// UDPNoChecksum returns a copy of the IPv4 packet pkt with its UDP
// checksum zeroed, or false when pkt is not a whole, unfragmented IPv4
// UDP packet.
func UDPNoChecksum(pkt []byte) ([]byte, bool) {
	if len(pkt) < 28 || pkt[0]>>4 != 4 || pkt[9] != syscall.IPPROTO_UDP {
		return nil, false
	}
	ihl := int(pkt[0]&0xf) * 4
	if frag := binary.BigEndian.Uint16(pkt[6:]); frag&0x3fff != 0 || len(pkt) < ihl+8 {
		return nil, false // a fragment, or truncated
	}
	p := append([]byte(nil), pkt...)
	p[ihl+6], p[ihl+7] = 0, 0
	return p, true
}
