package capture

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/gopacket/gopacket/layers"
)

// Filter selects captured packets in user space. Keep sees the frame as
// captured, link-layer header included, and must not keep it.
type Filter interface {
	Keep(frame []byte, lt layers.LinkType) bool
	String() string // for the capture file: what was kept
}

// UDP returns a filter that keeps the UDP datagrams (IPv4 or IPv6, 802.1Q
// tags allowed) from or to one of ports, or every UDP datagram when no
// port is given: the equivalent of the pcap filter "udp port P or udp port
// Q". A fragment other than the first has no UDP header and is dropped; the
// protocol's datagrams are never fragmented (wire.MaxSize).
func UDP(ports ...uint16) Filter {
	return udpFilter{ports: append([]uint16(nil), ports...)}
}

type udpFilter struct{ ports []uint16 }

func (f udpFilter) String() string {
	if len(f.ports) == 0 {
		return "udp"
	}
	var b strings.Builder
	for i, p := range f.ports {
		if i > 0 {
			b.WriteString(" or ")
		}
		fmt.Fprintf(&b, "udp port %d", p)
	}
	return b.String()
}

func (f udpFilter) Keep(frame []byte, lt layers.LinkType) bool {
	udp, ok := udpHeader(frame, lt)
	if !ok {
		return false
	}
	if len(f.ports) == 0 {
		return true
	}
	src, dst := binary.BigEndian.Uint16(udp[0:2]), binary.BigEndian.Uint16(udp[2:4])
	for _, p := range f.ports {
		if src == p || dst == p {
			return true
		}
	}
	return false
}

// udpHeader returns the UDP header of frame (at least 8 bytes), if it
// carries one.
func udpHeader(b []byte, lt layers.LinkType) ([]byte, bool) {
	var ethertype uint16
	switch lt {
	case layers.LinkTypeEthernet:
		if len(b) < 14 {
			return nil, false
		}
		ethertype, b = binary.BigEndian.Uint16(b[12:14]), b[14:]
		for ethertype == 0x8100 || ethertype == 0x88a8 { // 802.1Q, 802.1ad
			if len(b) < 4 {
				return nil, false
			}
			ethertype, b = binary.BigEndian.Uint16(b[2:4]), b[4:]
		}
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		if len(b) < 1 {
			return nil, false
		}
		switch b[0] >> 4 {
		case 4:
			ethertype = 0x0800
		case 6:
			ethertype = 0x86dd
		}
	default:
		return nil, false
	}
	switch ethertype {
	case 0x0800:
		if len(b) < 20 || b[0]>>4 != 4 {
			return nil, false
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl+8 || b[9] != 17 {
			return nil, false
		}
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 { // not the first fragment
			return nil, false
		}
		return b[ihl:], true
	case 0x86dd:
		if len(b) < 40 || b[0]>>4 != 6 {
			return nil, false
		}
		next, b := b[6], b[40:]
		for {
			switch next {
			case 17:
				return b, len(b) >= 8
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if len(b) < 8 {
					return nil, false
				}
				n := (int(b[1]) + 1) * 8
				if len(b) < n {
					return nil, false
				}
				next, b = b[0], b[n:]
			case 44: // fragment
				if len(b) < 8 || binary.BigEndian.Uint16(b[2:4])&0xfff8 != 0 {
					return nil, false
				}
				next, b = b[0], b[8:]
			default:
				return nil, false
			}
		}
	}
	return nil, false
}
