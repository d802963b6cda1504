package capturefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/eventlog"
)

// ErrStopped is returned by a Writer's Packet and Annotate after Stop.
var ErrStopped = errors.New("capture: stopped")

// Writer writes a capture of packets that were never on a kernel
// interface: the simulator's (harness/sim), whose links carry datagrams in
// virtual time. The file has the layout of a live capture (the same
// section header, one interface per agent, raw IPv4 as on the userspace
// engine's TUN devices, then the annotation interface, and interface
// statistics at the end), so analysis and `harness pcap` read it as any
// other. It reads no clock and starts no goroutine: records are written
// in the order given, which must be time order, and the file is the same
// bytes for the same records.
type Writer struct {
	ng       *pcapgo.NgWriter
	annIndex int
	ifaces   []string
	counts   []uint64
	dropped  []uint64
	first    time.Time
	last     time.Time
	stopped  bool
}

// NewWriter writes the header to w: one raw-IPv4 interface per name (its
// pcapng index is its position in names), then the annotation interface.
// descs, when given, describe each interface.
func NewWriter(w io.Writer, names, descs []string, comment string) (*Writer, error) {
	idbs := make([]pcapgo.NgInterface, 0, len(names)+1)
	for i, n := range names {
		idb := pcapgo.NgInterface{Name: n, Comment: "simulated: datagrams as the simulator's links carried them", LinkType: layers.LinkTypeRaw,
			OS: "tokenbed simulator", SnapLength: uint32(SnapLen)}
		if i < len(descs) {
			idb.Description = descs[i]
		}
		idbs = append(idbs, idb)
	}
	return NewWriterInterfaces(w, idbs, comment)
}

// NewWriterInterfaces is NewWriter with the packet interfaces given
// whole (a merge of captures keeps each one's link type and names), the
// annotation interface after them.
func NewWriterInterfaces(w io.Writer, idbs []pcapgo.NgInterface, comment string) (*Writer, error) {
	names := make([]string, len(idbs))
	for i, idb := range idbs {
		names[i] = idb.Name
	}
	idbs = append(idbs[:len(idbs):len(idbs)], AnnotationInterface(AnnotationName))
	ng, err := pcapgo.NewNgWriterInterface(w, idbs[0], SectionOptions(comment))
	if err != nil {
		return nil, fmt.Errorf("capture: writing the pcapng header: %w", err)
	}
	cw := &Writer{ng: ng, ifaces: names, counts: make([]uint64, len(names)), dropped: make([]uint64, len(names))}
	for _, idb := range idbs[1:] {
		if cw.annIndex, err = ng.AddInterface(idb); err != nil {
			return nil, fmt.Errorf("capture: writing the pcapng header: %w", err)
		}
	}
	if len(names) == 0 {
		cw.annIndex = 0
	}
	return cw, nil
}

// Packet records an IPv4 packet on interface index at t.
func (w *Writer) Packet(index int, t time.Time, data []byte) error {
	if w.stopped {
		return ErrStopped
	}
	if index < 0 || index >= len(w.ifaces) {
		return fmt.Errorf("capture: no interface %d", index)
	}
	w.counts[index]++
	w.seen(t)
	return w.ng.WritePacket(gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(data), Length: len(data), InterfaceIndex: index}, data)
}

func (w *Writer) seen(t time.Time) {
	if w.first.IsZero() {
		w.first = t
	}
	w.last = t
}

// Annotate records a harness event at its WallNS, which must be set.
func (w *Writer) Annotate(ev eventlog.Event) error {
	if w.stopped {
		return ErrStopped
	}
	if ev.WallNS == 0 {
		return errors.New("capture: annotation without a time")
	}
	js, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("capture: annotation: %w", err)
	}
	t := time.Unix(0, ev.WallNS)
	w.seen(t)
	rec := AnnotationRecord(js)
	ci := gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(rec), Length: len(rec), InterfaceIndex: w.annIndex}
	return w.ng.WritePacketWithOptions(ci, rec, pcapgo.NgPacketOptions{Comments: []string{string(js)}})
}

// AnnotateJSON records an annotation already encoded (js, an event's
// JSON, as Annotate encodes it) at t: a merge of captures copies them.
func (w *Writer) AnnotateJSON(t time.Time, js []byte) error {
	if w.stopped {
		return ErrStopped
	}
	w.seen(t)
	rec := AnnotationRecord(js)
	ci := gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(rec), Length: len(rec), InterfaceIndex: w.annIndex}
	return w.ng.WritePacketWithOptions(ci, rec, pcapgo.NgPacketOptions{Comments: []string{string(js)}})
}

// AddDropped adds n to the packets interface index dropped, which Stop
// reports (a merge carries each capture's drops over).
func (w *Writer) AddDropped(index int, n uint64) {
	if index >= 0 && index < len(w.dropped) {
		w.dropped[index] += n
	}
}

// Interfaces names the packet interfaces, in pcapng index order.
func (w *Writer) Interfaces() []string { return w.ifaces }

// Stop writes the interface statistics (no drops, nothing was dropped on
// the way to the file, but those AddDropped carried over) and flushes; it returns the packets written per
// interface, in index order (nil when already stopped). The caller closes
// the file.
func (w *Writer) Stop() ([]uint64, error) {
	if w.stopped {
		return nil, nil
	}
	w.stopped = true
	for i := range w.ifaces {
		err := w.ng.WriteInterfaceStats(i, pcapgo.NgInterfaceStatistics{LastUpdate: w.last, StartTime: w.first, EndTime: w.last,
			PacketsReceived: w.counts[i], PacketsDropped: w.dropped[i]})
		if err != nil {
			return w.counts[:i], err
		}
	}
	return w.counts, w.ng.Flush()
}
