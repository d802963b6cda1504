// Package capturefile is the layout of a tokenbed capture file (pcapng)
// as both halves see it: the section header every capture carries, the
// harness's annotation interface and records (one exported-PDU record per
// harness event, for Wireshark's json dissector), and Writer, which
// writes a capture of packets that were never on a kernel interface. The
// live capture (harness/capture) writes the same header and annotations;
// the simulator writes its captures with Writer, and so do tests that
// build a literal capture (analysis/ftn/ftnliteral). It reads nothing.
package capturefile

import (
	"runtime"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// SnapLen is libpcap's maximum snapshot length: whole packets.
const SnapLen = 262144

// AnnotationName names the annotation interface.
const AnnotationName = "harness"

// LinkTypeUpperPDU is LINKTYPE_WIRESHARK_UPPER_PDU, the link type of the
// annotation interface: an exported-PDU header naming a Wireshark
// dissector, then the data for that dissector.
const LinkTypeUpperPDU layers.LinkType = 252

// Exported-PDU tags (Wireshark epan/exported_pdu.h).
const (
	expPDUTagEnd       = 0
	expPDUTagProtoName = 12
)

// SectionOptions is the pcapng section header of every tokenbed capture.
func SectionOptions(comment string) pcapgo.NgWriterOptions {
	return pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware:    runtime.GOARCH,
		OS:          runtime.GOOS,
		Application: "tokenbed harness/capture",
		Comment:     comment,
	}}
}

// AnnotationInterface is the interface of the harness's annotation
// records, named name.
func AnnotationInterface(name string) pcapgo.NgInterface {
	return pcapgo.NgInterface{
		Name:        name,
		Description: "tokenbed harness actions: one record per event, JSON (exported PDU for the json dissector; the same JSON in the comment)",
		LinkType:    LinkTypeUpperPDU,
		OS:          runtime.GOOS,
	}
}

// AnnotationRecord is an annotation's record: the exported-PDU header
// naming the json dissector, then the JSON js.
func AnnotationRecord(js []byte) []byte {
	const proto = "json" // 4 bytes: no padding
	rec := make([]byte, 0, 4+len(proto)+4+len(js))
	rec = append(rec, 0, expPDUTagProtoName, 0, byte(len(proto)))
	rec = append(rec, proto...)
	rec = append(rec, 0, expPDUTagEnd, 0, 0)
	return append(rec, js...)
}
