package capture

import (
	"io"

	"tokenbed/internal/capturefile"
)

// Writer writes a capture of packets that were never on a kernel
// interface (the simulator's), in the layout of a live capture:
// capturefile.Writer, whose Stop reports as a Capture's does.
type Writer struct{ *capturefile.Writer }

// NewWriter writes the header to w: one raw-IPv4 interface per name, then
// the annotation interface (capturefile.NewWriter).
func NewWriter(w io.Writer, names, descs []string, comment string) (*Writer, error) {
	cw, err := capturefile.NewWriter(w, names, descs, comment)
	if err != nil {
		return nil, err
	}
	return &Writer{cw}, nil
}

// Stop writes the interface statistics and flushes (capturefile.Writer's
// Stop), and counts each interface's packets as a Capture's Stats does.
// The caller closes the file.
func (w *Writer) Stop() (Stats, error) {
	var s Stats
	counts, err := w.Writer.Stop()
	for i, n := range counts {
		s.Interfaces = append(s.Interfaces, InterfaceStats{Name: w.Interfaces()[i], Index: i, Received: n, Written: n, KernelPackets: n})
	}
	return s, err
}
