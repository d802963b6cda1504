package capture

import (
	"bytes"
	"cmp"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// arenaSize is the chunk packet data is copied into while it waits in
// the reorder buffer.
const arenaSize = 1 << 20

// sink is what the pcapng writer writes into: whole blocks accumulate in
// buf until a flush swaps it for an empty one and writes them to the file
// in one write.
type sink struct{ buf *bytes.Buffer }

func (s *sink) Write(p []byte) (int, error) { return s.buf.Write(p) }

// pending is a record in the reorder buffer.
type pending struct {
	ci      gopacket.CaptureInfo
	data    []byte
	comment string
}

// writeRecord queues one record: flush writes it in time order.
func (c *Capture) writeRecord(ci gopacket.CaptureInfo, data []byte, comment string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pendingLen >= c.cfg.MaxPending && !c.stopped && !c.failed {
		c.drained.Wait()
	}
	if c.stopped || c.failed {
		return ErrStopped
	}
	c.pendingLen += len(data)
	// data may live in the kernel ring, which the next read reuses.
	if cap(c.arena)-len(c.arena) < len(data) {
		c.arena = make([]byte, 0, max(arenaSize, len(data)))
	}
	at := len(c.arena)
	c.arena = append(c.arena, data...)
	c.pending = append(c.pending, pending{ci: ci, data: c.arena[at:len(c.arena):len(c.arena)], comment: comment})
	return nil
}

// flush encodes the records older than the reorder window (all of them if
// final) in timestamp order, and writes them to the file in one write.
//
// Packets reach user space up to blockTimeout after their kernel
// timestamp, and from several rings: holding records for half the flush
// interval and sorting them makes the file chronological, as readers
// expect (Wireshark shows frames in file order). A record that arrives
// later than that is written anyway, out of order, and counted.
func (c *Capture) flush(final bool) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	if c.failed {
		c.mu.Unlock()
		return c.firstErr()
	}
	n := len(c.pending)
	if !final {
		horizon := time.Now().Add(-c.cfg.FlushInterval / 2).UnixNano()
		slices.SortStableFunc(c.pending, func(a, b pending) int {
			return cmp.Compare(a.ci.Timestamp.UnixNano(), b.ci.Timestamp.UnixNano())
		})
		n, _ = slices.BinarySearchFunc(c.pending, horizon, func(p pending, h int64) int {
			return cmp.Compare(p.ci.Timestamp.UnixNano(), h+1)
		})
	} else {
		slices.SortStableFunc(c.pending, func(a, b pending) int {
			return cmp.Compare(a.ci.Timestamp.UnixNano(), b.ci.Timestamp.UnixNano())
		})
	}
	var err error
	for _, p := range c.pending[:n] {
		c.pendingLen -= len(p.data)
		ts := p.ci.Timestamp.UnixNano()
		if ts < c.lastTS {
			c.outOfOrder++
		}
		c.lastTS = max(c.lastTS, ts)
		if p.comment != "" {
			err = c.ng.WritePacketWithOptions(p.ci, p.data, pcapgo.NgPacketOptions{Comments: []string{p.comment}})
		} else {
			err = c.ng.WritePacket(p.ci, p.data)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		// Out of the writer's bufio: the sink holds whole blocks only.
		err = c.ng.Flush()
	}
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	if rest == 0 {
		// Nothing refers to the arena any more (the writer copied the
		// data): reuse it.
		c.arena = c.arena[:0]
	}
	buf := c.sink.buf
	c.sink.buf = c.spare
	c.drained.Broadcast()
	c.mu.Unlock()
	if err != nil {
		return c.fail(err)
	}
	if buf.Len() == 0 {
		c.spare = buf
		return nil
	}
	wn, err := c.out.Write(buf.Bytes())
	c.bytesWritten.Add(int64(wn))
	c.flushes.Add(1)
	buf.Reset()
	c.spare = buf
	if err != nil {
		return c.fail(err)
	}
	return nil
}

// flusher flushes periodically until finish has drained the readers (they
// may wait for it, see MaxPending).
func (c *Capture) flusher() {
	defer close(c.flusherDone)
	t := time.NewTicker(max(c.cfg.FlushInterval/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.flusherStop:
			return
		case <-t.C:
		}
		if c.flush(false) != nil {
			return
		}
	}
}
