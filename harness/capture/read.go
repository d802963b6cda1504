package capture

import (
	"errors"
	"fmt"
	"time"

	"github.com/gopacket/gopacket/afpacket"

	"tokenbed/agent/eventlog"
)

const (
	// pollTimeout bounds how long a reader waits before it checks for
	// Stop; blockTimeout bounds how long the kernel holds packets in a
	// partly filled ring block before handing them over.
	pollTimeout  = 50 * time.Millisecond
	blockTimeout = 10 * time.Millisecond
	// errBackoff paces a reader whose socket reports an error, which the
	// kernel does while its link is down (ENETDOWN, until read): the ring
	// is still drained, so packets sent after the link is up again are
	// captured.
	errBackoff = 10 * time.Millisecond
	// drainLimit bounds the time Stop spends draining the rings when
	// packets keep arriving.
	drainLimit = time.Second
)

// KindCaptureError is the kind of the annotation written when capture on
// one interface ends early.
const KindCaptureError eventlog.Kind = "capture_error"

// read copies packets from one interface's ring into the file. When the
// capture stops, it drains the ring first: every packet the kernel
// timestamped before Stop is written (within drainLimit).
func (c *Capture) read(ifc *iface) {
	defer c.readers.Done()
	defer ifc.close()
	snap := c.cfg.SnapLen
	var drainUntil, lastRead time.Time
	for {
		stopping := c.ctx.Err() != nil
		if stopping {
			if drainUntil.IsZero() {
				drainUntil = time.Now().Add(drainLimit)
				lastRead = time.Now()
			}
			if time.Now().After(drainUntil) {
				return
			}
		}
		data, ci, err := ifc.tp.ZeroCopyReadPacketData()
		switch {
		case err == nil:
			lastRead = time.Now()
		case errors.Is(err, afpacket.ErrTimeout):
			// The ring is empty and the kernel has retired every block
			// (pollTimeout > blockTimeout): drained.
			if stopping {
				return
			}
			continue
		case errors.Is(err, afpacket.ErrPoll):
			// The socket has a pending error (ENETDOWN since its link went
			// down, kept until a recv the ring API never makes), so poll
			// cannot wait: sleep instead. Packets still arrive in the ring
			// once the link is up; a partly filled block is handed over
			// within blockTimeout, so a quiet ring after a few of those is
			// drained.
			ifc.pollErrors.Add(1)
			if stopping && time.Since(lastRead) > 3*blockTimeout {
				return
			}
			time.Sleep(errBackoff)
			continue
		default:
			if !stopping {
				c.interfaceFailed(ifc, err)
			}
			return
		}
		if stopping && ci.Timestamp.UnixNano() > c.stopNS.Load() {
			return // everything before Stop is in
		}
		ifc.received.Add(1)
		if c.cfg.Filter != nil && !c.cfg.Filter.Keep(data, ifc.lt) {
			ifc.filtered.Add(1)
			continue
		}
		// The kernel's ifindex is meaningless in the file: pcapng packets
		// name their interface by IDB position.
		ci.InterfaceIndex = ifc.index
		ci.AncillaryData = nil
		if len(data) > snap {
			data = data[:snap]
		}
		ci.CaptureLength = len(data)
		if ci.Length < len(data) {
			ci.Length = len(data)
		}
		if err := c.writeRecord(ci, data, ""); err != nil {
			return
		}
		ifc.written.Add(1)
	}
}

func (ifc *iface) close() {
	ifc.sockMu.Lock()
	defer ifc.sockMu.Unlock()
	if ifc.tp == nil {
		return
	}
	if _, s3, err := ifc.tp.SocketStats(); err == nil {
		ifc.kernel = s3
	}
	ifc.tp.Close()
	ifc.tp = nil
}

func (c *Capture) interfaceFailed(ifc *iface, err error) {
	err = fmt.Errorf("capture: interface %s: read: %w", ifc.cfg.Name, err)
	ifc.sockMu.Lock()
	ifc.err = err
	ifc.sockMu.Unlock()
	mono, wall := eventlog.Now()
	_ = c.Annotate(eventlog.Event{Agent: "capture", MonoNS: mono, WallNS: wall, Kind: KindCaptureError,
		Link: ifc.cfg.Name, Detail: err.Error()})
}
