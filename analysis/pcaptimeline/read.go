package pcaptimeline

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/ftn/ftnlayer"
	"tokenbed/agent/wire/wirelayer"
	"tokenbed/analysis/ipv4frag"
)

// linkTypeUpperPDU is LINKTYPE_WIRESHARK_UPPER_PDU, the link type of the
// annotation interface harness/capture writes: exported-PDU tags (2-byte
// tag, 2-byte length, value; tag 0 ends them), then the JSON event.
const linkTypeUpperPDU layers.LinkType = 252

// ReadFile reads the pcap or pcapng file at path.
func ReadFile(path string, opts Options) (*Timeline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tl, err := Read(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tl.Name = path
	return tl, nil
}

// packetSource is what both pcap readers provide.
type packetSource interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Read reads a pcap or pcapng capture and builds its timeline.
func Read(r io.Reader, opts Options) (*Timeline, error) {
	if opts.Port == 0 {
		opts.Port = wirelayer.DefaultPort
	}
	br := bufio.NewReaderSize(r, 1<<16)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("reading the file header: %w", err)
	}
	tl := &Timeline{port: opts.Port}
	var src packetSource
	linkTypeOf := func(ci gopacket.CaptureInfo) layers.LinkType { return 0 }
	var ng *pcapgo.NgReader
	if binary.LittleEndian.Uint32(magic) == 0x0a0d0d0a {
		tl.Format = "pcapng"
		ng, err = pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("pcapng: %w", err)
		}
		src = ng
		linkTypeOf = func(ci gopacket.CaptureInfo) layers.LinkType { return ci.AncillaryData[0].(layers.LinkType) }
	} else {
		tl.Format = "pcap"
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("not a pcap or pcapng file: %w", err)
		}
		src = pr
		lt := pr.LinkType()
		linkTypeOf = func(gopacket.CaptureInfo) layers.LinkType { return lt }
		tl.Interfaces = []string{"pcap"}
	}

	var (
		eth     layers.Ethernet
		sll     layers.LinuxSLL
		ip4     layers.IPv4
		ip6     layers.IPv6
		udp     layers.UDP
		decoded []gopacket.LayerType
	)
	var defrag ipv4frag.Reassembler
	parsers := map[gopacket.LayerType]*gopacket.DecodingLayerParser{}
	parserFor := func(first gopacket.LayerType) *gopacket.DecodingLayerParser {
		p, ok := parsers[first]
		if !ok {
			p = gopacket.NewDecodingLayerParser(first, &eth, &sll, &ip4, &ip6, &udp)
			// Stop quietly after UDP: the payload is decoded below.
			p.IgnoreUnsupported = true
			parsers[first] = p
		}
		return p
	}

	for frame := 1; ; frame++ {
		data, ci, err := src.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A partial last record (a capture killed mid-write) keeps
			// what came before; anything else is an error.
			if errors.Is(err, io.ErrUnexpectedEOF) {
				tl.Truncated = err
				break
			}
			return nil, fmt.Errorf("record %d: %w", frame, err)
		}
		tl.Records++
		if tl.Start.IsZero() || ci.Timestamp.Before(tl.Start) {
			tl.Start = ci.Timestamp
		}
		iface := "pcap"
		if ng != nil {
			for len(tl.Interfaces) < ng.NInterfaces() {
				ifc, _ := ng.Interface(len(tl.Interfaces))
				name := ifc.Name
				if name == "" {
					name = fmt.Sprintf("if%d", len(tl.Interfaces))
				}
				tl.Interfaces = append(tl.Interfaces, name)
			}
			iface = tl.Interfaces[ci.InterfaceIndex]
		}
		lt := linkTypeOf(ci)
		if lt == linkTypeUpperPDU {
			if js, ok := exportedPDU(data); ok {
				tl.anns = append(tl.anns, parseAnnotation(frame, ci.Timestamp, iface, js))
				continue
			}
		}
		first := firstLayer(lt, data)
		if first == gopacket.LayerTypeZero {
			tl.Other++
			continue
		}
		p := parserFor(first)
		if err := p.DecodeLayers(data, &decoded); err != nil {
			tl.Other++
			continue
		}
		var srcIP, dstIP netip.Addr
		isUDP, frags := false, 0
		for _, l := range decoded {
			switch l {
			case layers.LayerTypeIPv4:
				srcIP, _ = netip.AddrFromSlice(ip4.SrcIP.To4())
				dstIP, _ = netip.AddrFromSlice(ip4.DstIP.To4())
			case layers.LayerTypeIPv6:
				srcIP, _ = netip.AddrFromSlice(ip6.SrcIP)
				dstIP, _ = netip.AddrFromSlice(ip6.DstIP)
			case layers.LayerTypeUDP:
				isUDP = true
			}
		}
		if slices.Contains(decoded, layers.LayerTypeIPv4) && ipv4frag.IsFragment(&ip4) {
			// An FTN global state listing tens of clients exceeds the
			// MTU: reassemble per interface, as its receiver does. The
			// datagram is seen when its last fragment is.
			tl.Fragments++
			whole, n, err := defrag.Add(ci.InterfaceIndex, &ip4, ci.Timestamp)
			if err != nil || whole == nil {
				continue // not whole yet, or fragments that make no datagram
			}
			tl.Reassembled++
			tl.LeftOver -= n
			if whole.Protocol != layers.IPProtocolUDP || udp.DecodeFromBytes(whole.Payload, gopacket.NilDecodeFeedback) != nil {
				continue
			}
			isUDP, frags = true, n
		}
		if !isUDP || (uint16(udp.SrcPort) != opts.Port && uint16(udp.DstPort) != opts.Port) || len(udp.Payload) == 0 {
			if frags == 0 {
				tl.Other++ // fragments are counted as such
			}
			continue
		}
		o := &Observation{
			Frame: frame, Time: ci.Timestamp, Interface: iface,
			Src:       netip.AddrPortFrom(srcIP, uint16(udp.SrcPort)),
			Dst:       netip.AddrPortFrom(dstIP, uint16(udp.DstPort)),
			Bytes:     bytes.Clone(udp.Payload),
			Fragments: frags,
		}
		if o.IsFTN() {
			// FTN shares the port; gopacket's port table holds
			// wirelayer's type (agent/ftn/ftnlayer).
			var l ftnlayer.Datagram
			if err := l.DecodeFromBytes(o.Bytes, gopacket.NilDecodeFeedback); err != nil {
				o.Err = err
			} else {
				o.FTN = &l
			}
		} else {
			var l wirelayer.Datagram
			if err := l.DecodeFromBytes(o.Bytes, gopacket.NilDecodeFeedback); err != nil {
				o.Err = err
			} else {
				d := l.Datagram
				o.Datagram = &d
			}
		}
		tl.all = append(tl.all, o)
	}
	tl.LeftOver += tl.Fragments
	tl.build()
	if err := tl.filter(opts); err != nil {
		return nil, err
	}
	return tl, nil
}

// exportedPDU returns the data after the exported-PDU tags.
func exportedPDU(b []byte) ([]byte, bool) {
	for len(b) >= 4 {
		tag, n := binary.BigEndian.Uint16(b[0:2]), int(binary.BigEndian.Uint16(b[2:4]))
		if len(b) < 4+n {
			return nil, false
		}
		b = b[4+n:]
		if tag == 0 {
			return b, true
		}
	}
	return nil, false
}

// firstLayer returns the layer a frame of link type lt starts with, or
// LayerTypeZero when the timeline cannot read it.
func firstLayer(lt layers.LinkType, data []byte) gopacket.LayerType {
	switch lt {
	case layers.LinkTypeEthernet:
		return layers.LayerTypeEthernet
	case layers.LinkTypeLinuxSLL:
		return layers.LayerTypeLinuxSLL
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		if len(data) > 0 {
			switch data[0] >> 4 {
			case 4:
				return layers.LayerTypeIPv4
			case 6:
				return layers.LayerTypeIPv6
			}
		}
	}
	return gopacket.LayerTypeZero
}
