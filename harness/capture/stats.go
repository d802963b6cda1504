package capture

import (
	"github.com/gopacket/gopacket/afpacket"
)

// InterfaceStats counts the packets of one captured interface.
type InterfaceStats struct {
	Name  string // pcapng interface name
	Index int    // pcapng interface index (the IDB's position)

	Received uint64 // packets read from the kernel ring
	Filtered uint64 // of those, dropped by Config.Filter
	Written  uint64 // packets written to the file

	// From PACKET_STATISTICS: KernelPackets counts every packet the socket
	// accepted, including KernelDrops, the packets lost because the ring
	// was full (the writer did not keep up).
	KernelPackets uint64
	KernelDrops   uint64
	QueueFreezes  uint64

	// PollErrors counts the socket errors reported while waiting, as when
	// the link goes down (ENETDOWN); capture resumes when it is up again.
	PollErrors uint64
	// Err says why capture on this interface ended early, if it did.
	Err error
}

// Stats is a snapshot of a capture's counters.
type Stats struct {
	Interfaces   []InterfaceStats
	Annotations  uint64 // annotation records written
	BytesWritten int64  // bytes written to the file
	Flushes      uint64 // writes to the file
	// OutOfOrder counts records written after a later one: they reached
	// user space more than half a flush interval after their timestamp.
	OutOfOrder uint64
}

// Drops returns the packets the kernel dropped on all interfaces.
func (s Stats) Drops() uint64 {
	var n uint64
	for _, i := range s.Interfaces {
		n += i.KernelDrops
	}
	return n
}

// kernelStats returns PACKET_STATISTICS, read now if the socket is open.
func (ifc *iface) kernelStats() (afpacket.SocketStatsV3, error) {
	ifc.sockMu.Lock()
	defer ifc.sockMu.Unlock()
	if ifc.tp != nil {
		if _, s3, err := ifc.tp.SocketStats(); err == nil {
			ifc.kernel = s3
		}
	}
	return ifc.kernel, ifc.err
}

// Stats returns the counters so far, kernel counters included.
func (c *Capture) Stats() Stats {
	select {
	case <-c.done:
		return c.final
	default:
	}
	return c.stats()
}

func (c *Capture) stats() Stats {
	c.mu.Lock()
	ifaces := append([]*iface(nil), c.ifaces...)
	s := Stats{Annotations: c.annotations, OutOfOrder: c.outOfOrder}
	c.mu.Unlock()
	for _, ifc := range ifaces {
		k, err := ifc.kernelStats()
		s.Interfaces = append(s.Interfaces, InterfaceStats{
			Name:          ifc.cfg.Name,
			Index:         ifc.index,
			Received:      ifc.received.Load(),
			Filtered:      ifc.filtered.Load(),
			Written:       ifc.written.Load(),
			KernelPackets: uint64(k.Packets()),
			KernelDrops:   uint64(k.Drops()),
			QueueFreezes:  uint64(k.QueueFreezes()),
			PollErrors:    ifc.pollErrors.Load(),
			Err:           err,
		})
	}
	s.BytesWritten = c.bytesWritten.Load()
	s.Flushes = c.flushes.Load()
	return s
}
