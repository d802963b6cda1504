package capture_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"

	"tokenbed/harness/capture"
)

// Bad configurations fail before anything is opened, naming the field.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  capture.Config
		want string
	}{
		{"no device", capture.Config{Interfaces: []capture.Interface{{Name: "A/eth0"}}}, "interfaces[0]: device: empty"},
		{"duplicate", capture.Config{Interfaces: []capture.Interface{{Device: "lo"}, {Device: "lo"}}}, `interfaces[1]: name "lo" used twice`},
		{"annotation name", capture.Config{Interfaces: []capture.Interface{{Name: "harness", Device: "lo"}}}, `interfaces[0]: name "harness" used twice (or by the annotation interface)`},
		{"both namespaces", capture.Config{Interfaces: []capture.Interface{{Device: "lo", NetNSPath: "/run/netns/x", NetNS: 3}}}, "netns: both NetNSPath and NetNS set"},
		{"ring block", capture.Config{RingBlockSize: 1000}, "ring block size 1000: must be a positive multiple of the page size"},
		{"snap", capture.Config{SnapLen: -1}, "snap length -1"},
		{"missing netns", capture.Config{Interfaces: []capture.Interface{{Device: "eth0", NetNSPath: "/nonexistent/netns/x"}}}, "capture: interface x/eth0: netns /nonexistent/netns/x: "},
		{"missing device", capture.Config{Interfaces: []capture.Interface{{Device: "tbnosuchdev0"}}}, `capture: interface tbnosuchdev0: device "tbnosuchdev0": no such device`},
	}
	for _, c := range cases {
		var out bytes.Buffer
		_, err := capture.Start(context.Background(), &out, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", c.name, out.Len())
		}
	}
	path := t.TempDir() + "/exists.pcapng"
	os.WriteFile(path, []byte("keep me"), 0o644)
	if _, err := capture.Create(context.Background(), path, capture.Config{}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("Create over an existing file: %v, want an error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Errorf("Create clobbered an existing file: %q", b)
	}
}

func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	for _, l := range ls {
		if tl, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			for _, n := range ls {
				if nl, ok := n.(gopacket.NetworkLayer); ok {
					tl.SetNetworkLayerForChecksum(nl)
				}
			}
		}
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUDPFilter(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	eth := func(et layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: et}
	}
	ip4 := func(proto layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 1, Protocol: proto, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	}
	ip6 := func(next layers.IPProtocol) *layers.IPv6 {
		return &layers.IPv6{Version: 6, HopLimit: 1, NextHeader: next, SrcIP: net.ParseIP("fd00::1"), DstIP: net.ParseIP("fd00::2")}
	}
	udp := func(src, dst uint16) *layers.UDP {
		return &layers.UDP{SrcPort: layers.UDPPort(src), DstPort: layers.UDPPort(dst)}
	}
	// 40 bytes of payload: no Ethernet padding, so a frame ends with it.
	const plLen = 40
	pl := gopacket.Payload(bytes.Repeat([]byte("x"), plLen))
	frag4 := ip4(layers.IPProtocolUDP)
	frag4.FragOffset = 100
	cases := []struct {
		name  string
		frame []byte
		lt    layers.LinkType
		keep  bool
	}{
		{"ipv4 dst port", serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolUDP), udp(40000, 7400), pl), layers.LinkTypeEthernet, true},
		{"ipv4 src port", serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolUDP), udp(7400, 40000), pl), layers.LinkTypeEthernet, true},
		{"ipv4 other port", serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolUDP), udp(7401, 9999), pl), layers.LinkTypeEthernet, false},
		{"ipv4 tcp", serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolTCP), &layers.TCP{SrcPort: 7400, DstPort: 7400}, pl), layers.LinkTypeEthernet, false},
		{"ipv4 later fragment", serialize(t, eth(layers.EthernetTypeIPv4), frag4, udp(7400, 7400), pl), layers.LinkTypeEthernet, false},
		{"ipv4 options", func() []byte {
			l := ip4(layers.IPProtocolUDP)
			l.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 1}}
			return serialize(t, eth(layers.EthernetTypeIPv4), l, udp(1, 7400), pl)
		}(), layers.LinkTypeEthernet, true},
		{"vlan", serialize(t, eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 5, Type: layers.EthernetTypeIPv4}, ip4(layers.IPProtocolUDP), udp(1, 7400), pl), layers.LinkTypeEthernet, true},
		{"ipv6", serialize(t, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolUDP), udp(7400, 1), pl), layers.LinkTypeEthernet, true},
		{"ipv6 ext headers", serialize(t, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolIPv6HopByHop), gopacket.Payload(append([]byte{
			60, 0, 1, 4, 0, 0, 0, 0, // hop-by-hop, then destination options
			17, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // destination options (16 bytes), then UDP
			0, 1, 0x1c, 0xe8, 0, 48, 0, 0, // UDP 1 → 7400
		}, pl...))), layers.LinkTypeEthernet, true},
		{"ipv6 later fragment", serialize(t, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolIPv6Fragment), gopacket.Payload(append([]byte{
			17, 0, 0, 8, 0, 0, 0, 1, // fragment at offset 1 (8 bytes), then UDP
			0, 1, 0x1c, 0xe8, 0, 48, 0, 0,
		}, pl...))), layers.LinkTypeEthernet, false},
		{"ipv6 first fragment", serialize(t, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolIPv6Fragment), gopacket.Payload(append([]byte{
			17, 0, 0, 1, 0, 0, 0, 1, // offset 0, more fragments
			0, 1, 0x1c, 0xe8, 0, 48, 0, 0,
		}, pl...))), layers.LinkTypeEthernet, true},
		{"ipv6 icmp", serialize(t, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolICMPv6), &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}, pl), layers.LinkTypeEthernet, false},
		{"arp", serialize(t, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: 1, Protocol: 0x800, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
			SourceHwAddress: mac, SourceProtAddress: []byte{1, 2, 3, 4}, DstHwAddress: mac, DstProtAddress: []byte{1, 2, 3, 5}}), layers.LinkTypeEthernet, false},
		{"raw ipv4", serialize(t, ip4(layers.IPProtocolUDP), udp(1, 7400), pl), layers.LinkTypeRaw, true},
		{"raw ipv6", serialize(t, ip6(layers.IPProtocolUDP), udp(1, 7400), pl), layers.LinkTypeRaw, true},
		{"unknown link type", serialize(t, ip4(layers.IPProtocolUDP), udp(1, 7400), pl), layers.LinkTypePPP, false},
	}
	f := capture.UDP(7400)
	if f.String() != "udp port 7400" || capture.UDP(1, 2).String() != "udp port 1 or udp port 2" || capture.UDP().String() != "udp" {
		t.Errorf("filter strings %q %q %q", f, capture.UDP(1, 2), capture.UDP())
	}
	for _, c := range cases {
		if got := f.Keep(c.frame, c.lt); got != c.keep {
			t.Errorf("%s: Keep %v, want %v", c.name, got, c.keep)
		}
		// Every truncation is dropped, or kept only with its whole UDP
		// header.
		for n := 0; n < len(c.frame)-plLen; n++ {
			if f.Keep(c.frame[:n], c.lt) {
				t.Errorf("%s: truncated to %d of %d bytes, kept", c.name, n, len(c.frame))
			}
		}
		if all := capture.UDP().Keep(c.frame, c.lt); all != (c.keep || strings.Contains(c.name, "other port")) {
			t.Errorf("%s: UDP() keeps %v", c.name, all)
		}
	}
}

// The in-kernel program agrees with the userspace filter on Ethernet
// frames, except where it is documented to be narrower (no IPv6 extension
// headers, no VLAN tags: AF_PACKET sees frames with the tag removed).
func TestUDPBPF(t *testing.T) {
	raw, err := capture.UDPBPF(7400, 7401)
	if err != nil {
		t.Fatal(err)
	}
	prog := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		prog[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("%v\n%v", err, prog)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	udp4 := func(src, dst uint16, frag uint16) []byte {
		ip := &layers.IPv4{Version: 4, TTL: 1, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}, FragOffset: frag}
		return serialize(t, &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: layers.EthernetTypeIPv4}, ip,
			&layers.UDP{SrcPort: layers.UDPPort(src), DstPort: layers.UDPPort(dst)}, gopacket.Payload("payload"))
	}
	udp6 := func(src, dst uint16) []byte {
		ip := &layers.IPv6{Version: 6, HopLimit: 1, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP("fd00::1"), DstIP: net.ParseIP("fd00::2")}
		return serialize(t, &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: layers.EthernetTypeIPv6}, ip,
			&layers.UDP{SrcPort: layers.UDPPort(src), DstPort: layers.UDPPort(dst)}, gopacket.Payload("payload"))
	}
	withOptions := func() []byte {
		ip := &layers.IPv4{Version: 4, TTL: 1, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2},
			Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 1}}}
		return serialize(t, &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: layers.EthernetTypeIPv4}, ip,
			&layers.UDP{SrcPort: 1, DstPort: 7401}, gopacket.Payload("payload"))
	}
	tcp := serialize(t, &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 1, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}},
		&layers.TCP{SrcPort: 7400, DstPort: 7400}, gopacket.Payload("payload"))
	arp := serialize(t, &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: layers.EthernetTypeARP}, &layers.ARP{AddrType: 1, Protocol: 0x800,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: mac, SourceProtAddress: []byte{1, 2, 3, 4}, DstHwAddress: mac, DstProtAddress: []byte{1, 2, 3, 5}})
	cases := []struct {
		name  string
		frame []byte
		keep  bool
	}{
		{"v4 dst 7400", udp4(40000, 7400, 0), true},
		{"v4 src 7401", udp4(7401, 40000, 0), true},
		{"v4 other", udp4(7402, 53, 0), false},
		{"v4 later fragment", udp4(7400, 7400, 3), false},
		{"v4 options", withOptions(), true},
		{"v6 dst 7400", udp6(1, 7400), true},
		{"v6 src 7401", udp6(7401, 1), true},
		{"v6 other", udp6(7402, 7399), false},
		{"tcp", tcp, false},
		{"arp", arp, false},
	}
	user := capture.UDP(7400, 7401)
	for _, c := range cases {
		n, err := vm.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (n > 0) != c.keep || user.Keep(c.frame, layers.LinkTypeEthernet) != c.keep {
			t.Errorf("%s: BPF keeps %d bytes, userspace %v; want keep=%v", c.name, n, user.Keep(c.frame, layers.LinkTypeEthernet), c.keep)
		}
		if c.keep && n < len(c.frame) {
			t.Errorf("%s: BPF keeps %d of %d bytes", c.name, n, len(c.frame))
		}
	}
	if _, err := capture.UDPBPF(); err == nil {
		t.Error("UDPBPF(): no error")
	}
}

func FuzzUDPFilter(f *testing.F) {
	f.Add([]byte{}, uint8(1))
	f.Add(bytes.Repeat([]byte{0x86, 0xdd, 0x60, 0, 0, 0, 0, 8, 0, 1}, 8), uint8(1))
	f.Add(bytes.Repeat([]byte{0x45, 0x11}, 40), uint8(101))
	f.Fuzz(func(t *testing.T, b []byte, lt uint8) {
		// Must not panic on any input.
		capture.UDP(7400).Keep(b, layers.LinkType(lt))
		capture.UDP().Keep(b, layers.LinkTypeEthernet)
		capture.UDP().Keep(b, layers.LinkTypeRaw)
	})
}
