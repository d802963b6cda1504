package pcaptimeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/gopacket/gopacket"

	"tokenbed/agent/ftn/ftnlayer"
	"tokenbed/agent/wire/wirelayer"
	"tokenbed/internal/pcapread"
)

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

// Read reads a pcap or pcapng capture and builds its timeline.
func Read(r io.Reader, opts Options) (*Timeline, error) {
	if opts.Port == 0 {
		opts.Port = wirelayer.DefaultPort
	}
	rd, err := pcapread.NewReader(r)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{port: opts.Port, Format: rd.Format}
	for {
		p, err := rd.Next()
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
			return nil, fmt.Errorf("record %d: %w", rd.Stats().Records+1, err)
		}
		tl.add(rd, p, opts.Port)
	}
	st := rd.Stats()
	tl.Records, tl.Fragments, tl.Reassembled, tl.LeftOver = st.Records, st.Fragments, st.Reassembled, st.LeftOver
	if rd.Format == "pcap" {
		tl.Interfaces = []string{"pcap"}
	}
	tl.build()
	if err := tl.filter(opts); err != nil {
		return nil, err
	}
	return tl, nil
}

// add takes one record into the timeline: an annotation, a datagram on
// port, or another record.
func (tl *Timeline) add(rd *pcapread.Reader, p *pcapread.Packet, port uint16) {
	if tl.Start.IsZero() || p.Time.Before(tl.Start) {
		tl.Start = p.Time
	}
	iface := "pcap"
	if rd.Format == "pcapng" {
		for len(tl.Interfaces) < rd.NInterfaces() {
			ifc, _ := rd.Interface(len(tl.Interfaces))
			name := ifc.Name
			if name == "" {
				name = fmt.Sprintf("if%d", len(tl.Interfaces))
			}
			tl.Interfaces = append(tl.Interfaces, name)
		}
		iface = tl.Interfaces[p.Iface]
	}
	if p.Annotation != nil {
		tl.anns = append(tl.anns, parseAnnotation(p.Record, p.Time, iface, p.Annotation))
		return
	}
	udp := p.UDP
	if udp == nil || (uint16(udp.SrcPort) != port && uint16(udp.DstPort) != port) || len(udp.Payload) == 0 {
		if !p.Fragment {
			tl.Other++ // fragments are counted as such
		}
		return
	}
	o := &Observation{
		Frame: p.Record, Time: p.Time, Interface: iface,
		Src:       netip.AddrPortFrom(p.Src, uint16(udp.SrcPort)),
		Dst:       netip.AddrPortFrom(p.Dst, uint16(udp.DstPort)),
		Bytes:     bytes.Clone(udp.Payload),
		Fragments: p.Fragments,
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
