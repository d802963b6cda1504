package validate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Probe is how one profile is probed: Count UDP datagrams of Size payload
// bytes, Burst of them every Interval, Spacing apart within a burst (0:
// back to back). Spacing is kept by spinning on the clock, so that both
// sides send a burst at the same pace: a UML guest's send system call
// alone takes 15–60 µs, and packets queued behind each other (rate) wait
// by how much later they were sent.
type Probe struct {
	Count    int
	Interval time.Duration
	Burst    int
	Size     int
	Spacing  time.Duration
	// FromBurstStart measures each probe's delay from its burst's first
	// send instead of its own (see Delays).
	FromBurstStart bool
}

// DefaultProbe: 2000 probes, one every 2 ms, 64 bytes of payload.
var DefaultProbe = Probe{Count: 2000, Interval: 2 * time.Millisecond, Burst: 1, Size: 64}

// spinWindow is how long before a replayed send time the sender stops
// sleeping and spins on the clock.
const spinWindow = 700 * time.Microsecond

// headerLen is the probe header: magic, sequence number, send time, CRC.
const headerLen = 20

var magic = [4]byte{'T', 'B', 'V', 'P'}

// Arrival is one datagram received intact.
type Arrival struct {
	Seq    uint32
	RecvNS int64 // receive time, ns since the trace's start (see Trace.Clock)
}

// Trace is what one side measured for one profile.
type Trace struct {
	Side    string // "kernel" or "userspace"
	Profile string // the netem profile applied, tc syntax
	Probe   Probe
	Seed    uint64 // seed of the probes' random padding
	// SentNS is each probe's send time, by sequence number, ns since the
	// start, read just before the send system call.
	SentNS   []int64
	Arrivals []Arrival // in arrival order, duplicates included
	// Clock says where receive times come from: "kernel" (SO_TIMESTAMPNS,
	// the time the receiver's kernel took the packet in: when netem or the
	// relay released it, without the receiving process's wake-up; a
	// CLOCK_REALTIME time, converted to CLOCK_MONOTONIC with the offset
	// between the two clocks read at the last send before it) or "process"
	// (CLOCK_MONOTONIC after the read returned; only where the kernel gave
	// no timestamp). SentNS and RecvNS are CLOCK_MONOTONIC either way.
	Clock string
	// Damaged counts datagrams received whose CRC or header was wrong.
	Damaged int
	// CsumErrors is the receiver namespace's UDP InCsumErrors plus IP
	// InHdrErrors during the trace: corrupted datagrams the kernel dropped.
	CsumErrors uint64
	// Notes from the side (engine counters).
	Notes string
}

// encode writes probe seq into b (len(b) = payload size).
func encode(b []byte, seq uint32, sent int64, pad *rand.Rand) {
	copy(b[0:4], magic[:])
	binary.BigEndian.PutUint32(b[4:8], seq)
	binary.BigEndian.PutUint64(b[8:16], uint64(sent))
	for i := headerLen; i < len(b); i++ {
		b[i] = byte(pad.Uint32())
	}
	binary.BigEndian.PutUint32(b[16:20], crc(b))
}

func crc(b []byte) uint32 {
	c := crc32.ChecksumIEEE(b[:16])
	return crc32.Update(c, crc32.IEEETable, b[headerLen:])
}

// decode checks a received probe and returns its sequence number.
func decode(b []byte) (uint32, bool) {
	if len(b) < headerLen || [4]byte(b[0:4]) != magic || binary.BigEndian.Uint32(b[16:20]) != crc(b) {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[4:8]), true
}

// RunProbes sends pr's probes from send to dst, where recv receives them,
// and returns the trace. Both sockets belong to this process, so send and
// receive times come from one clock (see Trace.Clock). After the last
// probe the receiver waits drain for stragglers.
//
// With replay (one offset per probe, ns from the start), each probe is
// sent at that offset instead of on pr's schedule: the userspace side
// replays the kernel side's actual send times. A UML guest's sleeps end
// 0.2 ms late or more, irregularly, and the spacing of the sends alone
// changes how often jitter reorders packets (more variance, more
// reordering) and how long packets queue behind a rate limiter; replayed,
// both sides see the same spacing.
func RunProbes(send, recv *net.UDPConn, dst netip.AddrPort, pr Probe, seed uint64, drain time.Duration, replay []int64) (*Trace, error) {
	if pr.Size < headerLen || pr.Count <= 0 || pr.Burst <= 0 || (replay != nil && len(replay) != pr.Count) {
		return nil, fmt.Errorf("validate: bad probe %+v (replay of %d)", pr, len(replay))
	}
	tr := &Trace{Probe: pr, Seed: seed, SentNS: make([]int64, pr.Count)}
	kernelTS := true
	if rc, err := recv.SyscallConn(); err != nil {
		kernelTS = false
	} else {
		rc.Control(func(fd uintptr) {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) != nil {
				kernelTS = false
			}
		})
	}
	start := time.Now()
	startWall := start.UnixNano()
	// mono: since start on CLOCK_MONOTONIC; wall: on CLOCK_REALTIME.
	mono := func() int64 { return int64(time.Since(start)) }
	wall := func() int64 { return time.Now().UnixNano() - startWall }
	var monoSent, monoRecv []int64 // the process's own times, the fallback
	recvDone := make(chan error, 1)
	sendDone := make(chan struct{})
	go func() {
		buf := make([]byte, 65536)
		oob := make([]byte, 128)
		var deadline time.Time
		for {
			select {
			case <-sendDone:
				if deadline.IsZero() {
					deadline = time.Now().Add(drain)
					recv.SetReadDeadline(deadline)
				}
			default:
				recv.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			}
			n, oobn, _, _, err := recv.ReadMsgUDP(buf, oob)
			t := mono()
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					if !deadline.IsZero() && !time.Now().Before(deadline) {
						recvDone <- nil
						return
					}
					continue
				}
				recvDone <- err
				return
			}
			seq, ok := decode(buf[:n])
			if !ok || int(seq) >= pr.Count || n != pr.Size {
				tr.Damaged++
				continue
			}
			kt, kok := rxTimestamp(oob[:oobn])
			if !kok {
				kernelTS = false
			}
			tr.Arrivals = append(tr.Arrivals, Arrival{Seq: seq, RecvNS: kt - startWall})
			monoRecv = append(monoRecv, t)
		}
	}()
	monoSent = make([]int64, pr.Count)
	pad := rand.New(rand.NewPCG(seed, 0x70726f6265))
	pkt := make([]byte, pr.Size)
	var sendErr error
	for seq := 0; seq < pr.Count; {
		tick := start.Add(time.Duration(seq/pr.Burst) * pr.Interval)
		if replay != nil {
			// Replaying another trace's send times: sleep to just
			// before, then spin, to hit them within microseconds.
			tick = start.Add(time.Duration(replay[seq]))
			if d := time.Until(tick) - spinWindow; d > 0 {
				time.Sleep(d)
			}
			for time.Now().Before(tick) {
			}
			m, t := mono(), wall()
			encode(pkt, uint32(seq), t, pad)
			tr.SentNS[seq], monoSent[seq] = t, m
			if _, err := send.WriteToUDPAddrPort(pkt, dst); err != nil && sendErr == nil {
				sendErr = fmt.Errorf("validate: sending probe %d: %w", seq, err)
			}
			seq++
			continue
		}
		if d := time.Until(tick); d > 0 {
			time.Sleep(d)
		}
		var first time.Time // the burst's first send: spacing counts from it
		for b := 0; b < pr.Burst && seq < pr.Count; b++ {
			if b == 0 {
				first = time.Now()
			} else if pr.Spacing > 0 {
				for at := first.Add(time.Duration(b) * pr.Spacing); time.Now().Before(at); {
				}
			}
			m, t := mono(), wall()
			encode(pkt, uint32(seq), t, pad)
			tr.SentNS[seq], monoSent[seq] = t, m
			if _, err := send.WriteToUDPAddrPort(pkt, dst); err != nil && sendErr == nil {
				sendErr = fmt.Errorf("validate: sending probe %d: %w", seq, err)
			}
			seq++
		}
	}
	close(sendDone)
	if err := <-recvDone; err != nil {
		return nil, err
	}
	if !kernelTS {
		tr.Clock = "process"
		copy(tr.SentNS, monoSent)
		for i := range tr.Arrivals {
			tr.Arrivals[i].RecvNS = monoRecv[i]
		}
		return tr, sendErr
	}
	// Kernel receive times are CLOCK_REALTIME, which may move against
	// CLOCK_MONOTONIC during the trace (a UML guest's wall clock does
	// under host load). Every send read both clocks: each receive time is
	// converted to the monotonic clock with the offset of the last send
	// before it, and all times are monotonic from here on.
	tr.Clock = "kernel"
	wallSent := slices.Clone(tr.SentNS)
	var maxSkew int64
	for i := range wallSent {
		off := wallSent[i] - monoSent[i]
		maxSkew = max(maxSkew, off-(wallSent[0]-monoSent[0]), (wallSent[0]-monoSent[0])-off)
	}
	for i, a := range tr.Arrivals {
		j, _ := slices.BinarySearch(wallSent, a.RecvNS+1) // first send after it
		j = max(j-1, 0)
		tr.Arrivals[i].RecvNS = a.RecvNS - (wallSent[j] - monoSent[j])
	}
	copy(tr.SentNS, monoSent)
	if maxSkew > 50e3 {
		tr.Clock = fmt.Sprintf("kernel (wall clock moved %.3f ms against the monotonic one; corrected)", float64(maxSkew)/1e6)
	}
	return tr, sendErr
}

// rxTimestamp finds SCM_TIMESTAMPNS in a control message (ns since the
// epoch).
func rxTimestamp(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return sec*1e9 + nsec, true
		}
	}
	return 0, false
}
