package sim

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// The datagrams travel as the IPv4/UDP packets a TUN device would carry
// (20-byte header, no options, don't fragment, TTL 64), with both
// checksums, so that the capture reads as a real one and corruption is
// caught where the kernel would catch it.

const (
	ipHeader  = 20
	udpHeader = 8
)

func ipv4UDP(src, dst netip.AddrPort, payload []byte) []byte {
	n := ipHeader + udpHeader + len(payload)
	b := make([]byte, n)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	binary.BigEndian.PutUint16(b[6:], 0x4000) // DF
	b[8] = 64
	b[9] = 17 // UDP
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:], ^sum(0, b[:ipHeader]))
	u := b[ipHeader:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpHeader+len(payload)))
	copy(u[udpHeader:], payload)
	c := ^sum(pseudo(b), u)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return b
}

// sum is the Internet checksum's one's-complement sum of b, from acc.
func sum(acc uint32, b []byte) uint16 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}

// pseudo is the sum of the UDP pseudo-header of IPv4 packet b.
func pseudo(b []byte) uint32 {
	var acc uint32
	for i := 12; i < 20; i += 2 {
		acc += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	return acc + 17 + uint32(binary.BigEndian.Uint16(b[2:])) - ipHeader
}

func dstAddr(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b[16:20])) }

// checksumsOK checks what the receiving kernel checks before a socket
// sees the datagram: the IPv4 header and the UDP checksum.
func checksumsOK(b []byte) bool {
	if len(b) < ipHeader+udpHeader || b[0] != 0x45 || b[9] != 17 || int(binary.BigEndian.Uint16(b[2:])) != len(b) {
		return false
	}
	if sum(0, b[:ipHeader]) != 0xffff {
		return false
	}
	u := b[ipHeader:]
	if int(binary.BigEndian.Uint16(u[4:])) != len(u) {
		return false
	}
	return binary.BigEndian.Uint16(u[6:]) == 0 || sum(pseudo(b), u) == 0xffff
}

func udpPayload(b []byte) (netip.AddrPort, []byte, error) {
	if len(b) < ipHeader+udpHeader {
		return netip.AddrPort{}, nil, errors.New("sim: short packet")
	}
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), binary.BigEndian.Uint16(b[ipHeader:]))
	return src, b[ipHeader+udpHeader:], nil
}
