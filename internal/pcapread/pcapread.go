// Package pcapread is the one reader of packet captures: the harness's
// capture.pcapng (harness/capture) and any pcap or pcapng file given to
// `harness pcap`. It yields each record decoded up to UDP, with the IPv4
// fragments of a datagram reassembled per interface (ipv4frag), the
// harness's annotations recognised, and the capture's own statistics: the
// packets its kernel rings dropped (pcapng interface statistics blocks,
// written by harness/capture at Stop) and whether the file ends cleanly.
//
// Every analysis of a capture reads through it (analysis/tokenpassing and
// its failure bundles' slices, analysis/ftn, analysis/pcaptimeline), and
// so do the tests that read a run's capture, so a datagram is the same
// datagram to all of them: a checker that skipped fragments would miss an FTN
// global state listing tens of clients (larger than the MTU), and one that
// ignored the interface statistics could take the capture's loss for the
// network's.
//
// The protocol layers above UDP are the caller's: FTN and token passing
// share one port, so the payload is handed over undecoded.
package pcapread

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/internal/pcapread/ipv4frag"
)

// LinkTypeUpperPDU is LINKTYPE_WIRESHARK_UPPER_PDU, the link type of the
// annotation interface harness/capture writes: exported-PDU tags (2-byte
// tag, 2-byte length, value; tag 0 ends them), then the JSON event.
const LinkTypeUpperPDU layers.LinkType = 252

// Interface is one capture interface: harness/capture names agent
// interfaces "INSTANCE/DEVICE" and describes each (the device, its MAC),
// which a copy of the capture keeps (analysis/tokenpassing's failure
// bundles).
type Interface struct {
	Name        string // "" when the file does not name it; "pcap" for a pcap file
	Description string // "" when the file does not describe it
	LinkType    layers.LinkType
}

// IfaceStats is one interface statistics block, in file order.
type IfaceStats struct {
	Iface int
	Name  string // its interface's name
	// Dropped is the packets the interface's kernel ring dropped;
	// HasDropped is false when the block does not say.
	Dropped    uint64
	HasDropped bool
}

// Packet is one record, decoded. Its slices and UDP are the reader's and
// valid until the next call of Next.
type Packet struct {
	Record   int // 1-based record number in the file
	Time     time.Time
	Iface    int // interface index (0 in a pcap file)
	LinkType layers.LinkType
	Data     []byte // the record as captured
	// Annotation is the JSON of a harness annotation (the UPPER_PDU
	// interface), nil for any other record.
	Annotation []byte
	// DecodeErr is why a layer up to UDP did not decode; the record is
	// then neither UDP nor a fragment.
	DecodeErr error
	// Src and Dst are the IP addresses (IPv4 or IPv6), when IP decoded.
	Src, Dst netip.Addr
	// IPv4 is the IPv4 packet as captured, header included and link
	// header and padding excluded (for a fragment, that fragment), nil
	// when the record is not IPv4: what a test re-injects to replay it
	// from its original source (internal/inject).
	IPv4 []byte
	// UDP is the UDP header and payload, nil when the record is not UDP
	// or is a fragment that does not complete a UDP datagram.
	UDP *layers.UDP
	// Fragment is set when the record is an IPv4 fragment; Fragments is
	// then, when it completed a datagram, the fragments captured for it
	// on this interface, repeats included (0 while incomplete).
	Fragment  bool
	Fragments int
}

// Stats is what the reader learnt about the capture itself.
type Stats struct {
	// Records counts every record read; Annotations those that are the
	// harness's annotations (events written into the capture, not
	// packets).
	Records, Annotations int
	// Statistics are the interface statistics blocks read so far; the
	// harness writes them when the capture stops, so a capture whose
	// writer died has none.
	Statistics []IfaceStats
	// Fragments counts the records that are IPv4 fragments; Reassembled
	// the datagrams made of them (per interface); LeftOver the fragments
	// that made no datagram (lost, expired or contradictory).
	Fragments, Reassembled, LeftOver int
}

// Complete reports whether the capture ended with its interface
// statistics, i.e. harness/capture's Stop ran.
func (s *Stats) Complete() bool { return len(s.Statistics) > 0 }

// Packets is the records that are packets: all but the annotations.
func (s *Stats) Packets() int { return s.Records - s.Annotations }

// Drops is the packets dropped on every interface, the sum of the
// statistics blocks.
func (s *Stats) Drops() uint64 {
	var n uint64
	for _, st := range s.Statistics {
		if st.HasDropped {
			n += st.Dropped
		}
	}
	return n
}

// Reader reads a pcap or pcapng capture, one record per Next.
type Reader struct {
	Format string // "pcap" or "pcapng"

	src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	ng       *pcapgo.NgReader
	pcapLink layers.LinkType
	stats    Stats
	fragIn   int // fragments given to complete datagrams

	eth     layers.Ethernet
	sll     layers.LinuxSLL
	ip4     layers.IPv4
	ip6     layers.IPv6
	udp     layers.UDP
	decoded []gopacket.LayerType
	parsers map[gopacket.LayerType]*gopacket.DecodingLayerParser
	defrag  ipv4frag.Reassembler
	p       Packet
}

// NewReader reads the file header of r, a pcap or pcapng capture.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("reading the file header: %w", err)
	}
	rd := &Reader{parsers: map[gopacket.LayerType]*gopacket.DecodingLayerParser{}}
	if binary.LittleEndian.Uint32(magic) == 0x0a0d0d0a {
		rd.Format = "pcapng"
		opts := pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true,
			StatisticsCallback: rd.statistics}
		if rd.ng, err = pcapgo.NewNgReader(br, opts); err != nil {
			return nil, fmt.Errorf("pcapng: %w", err)
		}
		rd.src = rd.ng
		return rd, nil
	}
	rd.Format = "pcap"
	pr, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("not a pcap or pcapng file: %w", err)
	}
	rd.src, rd.pcapLink = pr, pr.LinkType()
	return rd, nil
}

func (r *Reader) statistics(id int, st pcapgo.NgInterfaceStatistics) {
	s := IfaceStats{Iface: id, Dropped: st.PacketsDropped, HasDropped: st.PacketsDropped != pcapgo.NgNoValue64}
	if ifc, err := r.ng.Interface(id); err == nil {
		s.Name = ifc.Name
	}
	r.stats.Statistics = append(r.stats.Statistics, s)
}

// Section is a pcapng file's section header (zero for a pcap file): a
// merge of captures keeps its comment.
func (r *Reader) Section() pcapgo.NgSectionInfo {
	if r.ng == nil {
		return pcapgo.NgSectionInfo{}
	}
	return r.ng.SectionInfo()
}

// Block is interface i's description block as read, for copying it
// whole into another capture.
func (r *Reader) Block(i int) (pcapgo.NgInterface, error) {
	if r.ng == nil {
		return pcapgo.NgInterface{Name: "pcap", LinkType: r.pcapLink}, nil
	}
	return r.ng.Interface(i)
}

// NInterfaces is the number of interfaces described so far.
func (r *Reader) NInterfaces() int {
	if r.ng == nil {
		return 1
	}
	return r.ng.NInterfaces()
}

// Interface describes interface i.
func (r *Reader) Interface(i int) (Interface, error) {
	if r.ng == nil {
		if i != 0 {
			return Interface{}, fmt.Errorf("interface %d: a pcap file has one", i)
		}
		return Interface{Name: "pcap", LinkType: r.pcapLink}, nil
	}
	ifc, err := r.ng.Interface(i)
	if err != nil {
		return Interface{}, err
	}
	return Interface{Name: ifc.Name, Description: ifc.Description, LinkType: ifc.LinkType}, nil
}

// Stats is what the reader has learnt so far; read to the end (io.EOF),
// it holds the capture's statistics blocks and fragment counts.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.Statistics = slices.Clone(s.Statistics)
	s.LeftOver = s.Fragments - r.fragIn
	return s
}

// Next reads and decodes the next record. At the end of the file it
// returns io.EOF; a file cut inside a record (a capture killed while
// writing) gives an error wrapping io.ErrUnexpectedEOF after the records
// before it.
func (r *Reader) Next() (*Packet, error) {
	data, ci, err := r.src.ReadPacketData()
	if err != nil {
		return nil, err
	}
	r.stats.Records++
	p := &r.p
	*p = Packet{Record: r.stats.Records, Time: ci.Timestamp, Iface: ci.InterfaceIndex, Data: data, LinkType: r.pcapLink}
	if r.ng != nil {
		p.LinkType = ci.AncillaryData[0].(layers.LinkType)
	}
	if p.LinkType == LinkTypeUpperPDU {
		if js, ok := exportedPDU(data); ok {
			p.Annotation = js
			r.stats.Annotations++
			return p, nil
		}
	}
	first := firstLayer(p.LinkType, data)
	if first == gopacket.LayerTypeZero {
		p.DecodeErr = fmt.Errorf("link type %s is not read", p.LinkType)
		return p, nil
	}
	if err := r.parser(first).DecodeLayers(data, &r.decoded); err != nil {
		p.DecodeErr = err
		return p, nil
	}
	for _, l := range r.decoded {
		switch l {
		case layers.LayerTypeIPv4:
			p.Src, _ = netip.AddrFromSlice(r.ip4.SrcIP.To4())
			p.Dst, _ = netip.AddrFromSlice(r.ip4.DstIP.To4())
			// The payload follows the header in the record's bytes.
			p.IPv4 = r.ip4.Contents[:len(r.ip4.Contents)+len(r.ip4.Payload)]
		case layers.LayerTypeIPv6:
			p.Src, _ = netip.AddrFromSlice(r.ip6.SrcIP)
			p.Dst, _ = netip.AddrFromSlice(r.ip6.DstIP)
		case layers.LayerTypeUDP:
			p.UDP = &r.udp
		}
	}
	if slices.Contains(r.decoded, layers.LayerTypeIPv4) && ipv4frag.IsFragment(&r.ip4) {
		r.fragment(p, ci.Timestamp)
	}
	return p, nil
}

// fragment gives the fragment p to the reassembler; when it completes a
// UDP datagram, p becomes that datagram. The datagram is seen when its
// last fragment is, as its receiver sees it.
func (r *Reader) fragment(p *Packet, t time.Time) {
	p.Fragment, p.UDP = true, nil
	r.stats.Fragments++
	whole, n, err := r.defrag.Add(p.Iface, &r.ip4, t)
	if err != nil || whole == nil {
		return // not whole yet, or fragments that make no datagram
	}
	r.stats.Reassembled++
	r.fragIn += n
	p.Fragments = n
	if whole.Protocol != layers.IPProtocolUDP || r.udp.DecodeFromBytes(whole.Payload, gopacket.NilDecodeFeedback) != nil {
		return
	}
	p.UDP = &r.udp
}

func (r *Reader) parser(first gopacket.LayerType) *gopacket.DecodingLayerParser {
	p, ok := r.parsers[first]
	if !ok {
		p = gopacket.NewDecodingLayerParser(first, &r.eth, &r.sll, &r.ip4, &r.ip6, &r.udp)
		// Stop quietly after UDP: the payload is the caller's.
		p.IgnoreUnsupported = true
		r.parsers[first] = p
	}
	return p
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
// LayerTypeZero when it cannot be read: agent interfaces are Ethernet
// (veth) or raw IP (the userspace engine's TUN devices).
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
