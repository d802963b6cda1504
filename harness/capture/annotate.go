package capture

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gopacket/gopacket"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/capturefile"
)

// LinkTypeUpperPDU is the link type of the annotation interface
// (capturefile.LinkTypeUpperPDU).
const LinkTypeUpperPDU = capturefile.LinkTypeUpperPDU

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
	rec := capturefile.AnnotationRecord(js)
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

// AnnotationIndex returns the pcapng index of the annotation interface.
func (c *Capture) AnnotationIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.annIndex
}
