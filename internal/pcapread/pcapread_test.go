package pcapread_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/internal/pcapread"
)

// capture is a literal capture as harness/capture writes one: agent
// interfaces "A/veth" (Ethernet) and "B/tun" (raw IP), the annotation
// interface, and, when stopped, interface statistics.
type capture struct {
	t   *testing.T
	buf bytes.Buffer
	w   *pcapgo.NgWriter
}

func newCapture(t *testing.T) *capture {
	c := &capture{t: t}
	w, err := pcapgo.NewNgWriterInterface(&c.buf, pcapgo.NgInterface{Name: "A/veth", Description: "veth of A", LinkType: layers.LinkTypeEthernet, SnapLength: 65535},
		pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	c.w = w
	for _, ifc := range []pcapgo.NgInterface{{Name: "B/tun", LinkType: layers.LinkTypeRaw}, {Name: "harness", LinkType: pcapread.LinkTypeUpperPDU}} {
		ifc.SnapLength = 65535
		if _, err := w.AddInterface(ifc); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *capture) write(iface int, at time.Duration, data []byte) {
	c.t.Helper()
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(1000, 0).Add(at), CaptureLength: len(data), Length: len(data), InterfaceIndex: iface}
	if err := c.w.WritePacket(ci, data); err != nil {
		c.t.Fatal(err)
	}
}

// udpFragments serialises a UDP datagram from 10.0.0.1:7400 to
// 10.0.0.2:7400 carrying payload, cut into IPv4 fragments of at most
// 16 bytes of IP payload; with eth, each in an Ethernet frame.
func udpFragments(t *testing.T, payload []byte, eth bool) [][]byte {
	t.Helper()
	src, dst := net.IP{10, 0, 0, 1}, net.IP{10, 0, 0, 2}
	udp := &layers.UDP{SrcPort: 7400, DstPort: 7400}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src, DstIP: dst, Id: 9}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	b := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	whole := b.Bytes()
	var out [][]byte
	for off := 0; off < len(whole); off += 16 {
		frag := *ip
		frag.FragOffset = uint16(off / 8)
		if off+16 < len(whole) {
			frag.Flags = layers.IPv4MoreFragments
		}
		ls := []gopacket.SerializableLayer{&frag, gopacket.Payload(whole[off:min(off+16, len(whole))])}
		if eth {
			ls = append([]gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
				DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}}, ls...)
		}
		fb := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(fb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(fb.Bytes()))
	}
	return out
}

// annotation is an exported-PDU record: one tag, the end tag, the JSON.
func annotation(js string) []byte {
	return append([]byte{0, 12, 0, 2, 'h', 'i', 0, 0, 0, 0}, js...)
}

// A datagram larger than the MTU, captured in fragments leaving A
// (Ethernet) and arriving at B (raw IP), interleaved, is yielded once per
// interface, when its last fragment is read, whole; the annotation is
// recognised and counted apart from the packets; the interface
// statistics give the capture's drops.
func TestReaderReassemblesAndCounts(t *testing.T) {
	payload := []byte("a global state listing tens of clients, larger than one fragment")
	c := newCapture(t)
	onA, onB := udpFragments(t, payload, true), udpFragments(t, payload, false)
	if len(onA) < 3 {
		t.Fatalf("%d fragments, want several", len(onA))
	}
	at := time.Duration(0)
	for i := range onA {
		c.write(0, at, onA[i])
		c.write(1, at+time.Millisecond, onB[i])
		at += 10 * time.Microsecond
	}
	c.write(2, at+time.Second, annotation(`{"kind":"crash"}`))
	for i, drops := range []uint64{3, 4} {
		if err := c.w.WriteInterfaceStats(i, pcapgo.NgInterfaceStatistics{PacketsDropped: drops, PacketsReceived: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}

	r, err := pcapread.NewReader(&c.buf)
	if err != nil {
		t.Fatal(err)
	}
	var whole []string
	var anns []string
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotation != nil {
			anns = append(anns, string(p.Annotation))
			continue
		}
		if !p.Fragment {
			t.Errorf("record %d: not a fragment", p.Record)
		}
		if p.UDP == nil {
			continue
		}
		ifc, _ := r.Interface(p.Iface)
		if !bytes.Equal(p.UDP.Payload, payload) || p.Fragments != len(onA) ||
			p.Src != netip.MustParseAddr("10.0.0.1") || p.Dst != netip.MustParseAddr("10.0.0.2") {
			t.Errorf("%s: %q from %d fragments, %s → %s", ifc.Name, p.UDP.Payload, p.Fragments, p.Src, p.Dst)
		}
		whole = append(whole, ifc.Name)
	}
	if len(whole) != 2 || whole[0] != "A/veth" || whole[1] != "B/tun" {
		t.Errorf("datagrams on %v, want one on A/veth then one on B/tun", whole)
	}
	if len(anns) != 1 || anns[0] != `{"kind":"crash"}` {
		t.Errorf("annotations %q", anns)
	}
	st := r.Stats()
	n := 2 * len(onA)
	if st.Records != n+1 || st.Annotations != 1 || st.Packets() != n || st.Fragments != n || st.Reassembled != 2 || st.LeftOver != 0 {
		t.Errorf("stats %+v (packets %d); want %d records, 1 annotation, %d fragments in 2 datagrams", st, st.Packets(), n+1, n)
	}
	if !st.Complete() || st.Drops() != 7 || len(st.Statistics) != 2 || st.Statistics[1].Name != "B/tun" {
		t.Errorf("complete %v, drops %d, statistics %+v; want complete, 3+4 drops", st.Complete(), st.Drops(), st.Statistics)
	}
}

// A capture cut inside a record (its writer killed) yields the records
// before the cut, then an error wrapping io.ErrUnexpectedEOF; without
// interface statistics it is not complete.
func TestReaderTruncated(t *testing.T) {
	c := newCapture(t)
	frags := udpFragments(t, []byte("short"), true)
	c.write(0, 0, frags[0])
	c.write(0, time.Millisecond, frags[0])
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	b := c.buf.Bytes()
	r, err := pcapread.NewReader(bytes.NewReader(b[:len(b)-5]))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Next()
	if err != nil || p.UDP == nil || string(p.UDP.Payload) != "short" || p.Fragment {
		t.Fatalf("first record: %+v, %v", p, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut record: %v, want io.ErrUnexpectedEOF", err)
	}
	if st := r.Stats(); st.Complete() || st.Records != 1 {
		t.Errorf("stats %+v, want 1 record and incomplete", st)
	}
}

// Neither pcap nor pcapng: an error that says so.
func TestReaderNotACapture(t *testing.T) {
	_, err := pcapread.NewReader(bytes.NewReader([]byte("this is a text file\n")))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("not a pcap or pcapng file")) {
		t.Errorf("error %v", err)
	}
}

// A whole datagram's IPv4 packet is yielded as it travelled, header
// included, without the Ethernet header or the padding that brought the
// frame to its minimum length: a test re-injects exactly those bytes.
func TestReaderIPv4Bytes(t *testing.T) {
	onA, onB := udpFragments(t, []byte("short"), true), udpFragments(t, []byte("short"), false)
	if len(onA) != 1 || len(onB) != 1 {
		t.Fatalf("%d and %d packets, want 1 each", len(onA), len(onB))
	}
	ip := onB[0]
	frame := append(bytes.Clone(onA[0]), make([]byte, 64)...) // trailing padding
	c := newCapture(t)
	c.write(0, 0, frame)
	c.write(1, time.Millisecond, ip)
	c.write(2, time.Second, annotation(`{"kind":"crash"}`))
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapread.NewReader(&c.buf)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]byte{ip, ip, nil} {
		p, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p.Fragment || !bytes.Equal(p.IPv4, want) || (want == nil) != (p.IPv4 == nil) {
			t.Errorf("record %d: fragment %v, IPv4 % x; want % x", i+1, p.Fragment, p.IPv4, want)
		}
	}
}

// The interfaces are read as the file declares them, with their names,
// descriptions and link types; a pcap file has one, named "pcap".
func TestReaderInterfaces(t *testing.T) {
	c := newCapture(t)
	c.write(1, 0, udpFragments(t, []byte("short"), false)[0])
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapread.NewReader(&c.buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	want := []pcapread.Interface{{Name: "A/veth", Description: "veth of A", LinkType: layers.LinkTypeEthernet},
		{Name: "B/tun", LinkType: layers.LinkTypeRaw}, {Name: "harness", LinkType: pcapread.LinkTypeUpperPDU}}
	if r.NInterfaces() != len(want) {
		t.Fatalf("%d interfaces, want %d", r.NInterfaces(), len(want))
	}
	for i, w := range want {
		if got, err := r.Interface(i); err != nil || got != w {
			t.Errorf("interface %d: %+v, %v; want %+v", i, got, err, w)
		}
	}
	if _, err := r.Interface(len(want)); err == nil {
		t.Errorf("interface %d: no error, want one (the file declares %d)", len(want), len(want))
	}

	var buf bytes.Buffer
	pw := pcapgo.NewWriterNanos(&buf)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	pr, err := pcapread.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pr.Interface(0); err != nil || got != (pcapread.Interface{Name: "pcap", LinkType: layers.LinkTypeEthernet}) || pr.NInterfaces() != 1 {
		t.Errorf("pcap file: interface %+v, %v, %d interfaces; want one, pcap, Ethernet", got, err, pr.NInterfaces())
	}
	if _, err := pr.Interface(1); err == nil {
		t.Error("pcap file: interface 1: no error, want one")
	}
}
