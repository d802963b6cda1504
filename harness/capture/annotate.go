package capture

import (
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/eventlog"
)

// LinkTypeUpperPDU is LINKTYPE_WIRESHARK_UPPER_PDU, the link type of the
// annotation interface: an exported-PDU header naming a Wireshark
// dissector, then the data for that dissector.
const LinkTypeUpperPDU layers.LinkType = 252

// Exported-PDU tags (Wireshark epan/exported_pdu.h).
const (
	expPDUTagEnd       = 0
	expPDUTagProtoName = 12
)

// annotationIDB is the interface of the harness's annotation records.
func annotationIDB(name string) pcapgo.NgInterface {
	return pcapgo.NgInterface{
		Name:        name,
		Description: "tokenbed harness actions: one record per event, JSON (exported PDU for the json dissector; the same JSON in the comment)",
		LinkType:    LinkTypeUpperPDU,
		OS:          runtime.GOOS,
	}
}

// Annotate writes ev as one record on the annotation interface, at
// ev.WallNS (now if zero). Like packets, it reaches the file in time order
// within Config.FlushInterval.
func (c *Capture) Annotate(ev eventlog.Event) error {
	js, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("capture: annotation: %w", err)
	}
	ts := time.Now()
	if ev.WallNS != 0 {
		ts = time.Unix(0, ev.WallNS)
	}
	rec := annotationRecord(js)
	c.mu.Lock()
	idx := c.annIndex
	c.mu.Unlock()
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(rec), Length: len(rec), InterfaceIndex: idx}
	if err := c.writeRecord(ci, rec, string(js)); err != nil {
		return err
	}
	c.mu.Lock()
	c.annotations++
	c.mu.Unlock()
	return nil
}

// annotationRecord is the exported-PDU header naming the json dissector,
// then the JSON.
func annotationRecord(js []byte) []byte {
	const proto = "json" // 4 bytes: no padding
	rec := make([]byte, 0, 4+len(proto)+4+len(js))
	rec = append(rec, 0, expPDUTagProtoName, 0, byte(len(proto)))
	rec = append(rec, proto...)
	rec = append(rec, 0, expPDUTagEnd, 0, 0)
	return append(rec, js...)
}

// AnnotationIndex returns the pcapng index of the annotation interface.
func (c *Capture) AnnotationIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.annIndex
}
