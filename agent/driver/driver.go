// Package driver runs a node.Node: it owns the UDP socket, the timer and
// the event log, and is the only part of the agent that does I/O or reads
// the clock. One goroutine does everything: it reads the socket with a
// deadline at the node's next timer, so a datagram reaches the node
// without a hand-off between goroutines (each hop costs microseconds on
// the pass latency, 002 requirement iii).
//
// After every input the driver writes the node's events to the log with a
// single write(2) and only then sends its datagrams, so an event log that
// survives a SIGKILL never shows a datagram without the events before it.
package driver

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"tokenbed/agent/clock"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/node"
	"tokenbed/agent/resource"
	"tokenbed/agent/wire"
)

// Transport is a datagram socket.
type Transport interface {
	ReadFrom(b []byte) (int, netip.AddrPort, error)
	// SetReadDeadline makes a blocked or later ReadFrom return an error
	// satisfying os.ErrDeadlineExceeded at t.
	SetReadDeadline(t time.Time) error
	WriteTo(b []byte, to netip.AddrPort) error
	Close() error
}

// UDP is a Transport on a UDP socket.
type UDP struct{ c *net.UDPConn }

// ListenUDP binds addr.
func ListenUDP(addr netip.AddrPort) (*UDP, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, err
	}
	return &UDP{c: c}, nil
}

// ReadFrom implements Transport.
func (u *UDP) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	n, ap, err := u.c.ReadFromUDPAddrPort(b)
	return n, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), err
}

// SetReadDeadline implements Transport.
func (u *UDP) SetReadDeadline(t time.Time) error { return u.c.SetReadDeadline(t) }

// WriteTo implements Transport.
func (u *UDP) WriteTo(b []byte, to netip.AddrPort) error {
	_, err := u.c.WriteToUDPAddrPort(b, to)
	return err
}

// Close implements Transport.
func (u *UDP) Close() error { return u.c.Close() }

// Lossy wraps a Transport and drops each outgoing datagram with
// probability Loss, from a seeded source: the test transport used to check
// requirement (i) without an emulated network.
type Lossy struct {
	Transport
	Loss    float64
	mu      sync.Mutex
	rnd     *rand.Rand
	dropped atomic.Uint64
	sent    atomic.Uint64
}

// NewLossy returns a lossy wrapper of t.
func NewLossy(t Transport, loss float64, seed uint64) *Lossy {
	return &Lossy{Transport: t, Loss: loss, rnd: rand.New(rand.NewPCG(seed, 0x7e57))}
}

// WriteTo implements Transport.
func (l *Lossy) WriteTo(b []byte, to netip.AddrPort) error {
	l.mu.Lock()
	drop := l.rnd.Float64() < l.Loss
	l.mu.Unlock()
	l.sent.Add(1)
	if drop {
		l.dropped.Add(1)
		return nil
	}
	return l.Transport.WriteTo(b, to)
}

// Counts returns datagrams offered and dropped.
func (l *Lossy) Counts() (sent, dropped uint64) { return l.sent.Load(), l.dropped.Load() }

// Driver runs one node.
type Driver struct {
	Node *node.Node
	T    Transport
	Log  *eventlog.Writer
	// Now is the reference clock, stamped on the log; nil means time.Now.
	Now func() time.Time
	// Clock is the agent's own clock against Now (agent/clock), anchored
	// at Run's start: what the node reads. The zero Skew is Now itself.
	Clock clock.Skew
	// OnReady, if set, sees every batch after it is carried out (tests).
	OnReady func(node.Ready)
	// Rejections bounds the log lines of rejected datagrams (a flood);
	// the zero value samples with the defaults.
	Rejections RejectionSampler
	// Op is the protected operation, started on the node's op_started
	// event and ended on its op_finished (both keyed by token); nil means
	// the operation is only the node's hold. The driver closes it when
	// Run returns.
	Op resource.Operation
}

// Run runs the node until ctx is done or the socket fails. On ctx done it
// logs the tokens held as lost (a leave is a silent failure, 002 §3.2),
// closes the socket and returns nil.
func (d *Driver) Run(ctx context.Context) error {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	// Cancellation wakes the blocked read by moving its deadline.
	stop := context.AfterFunc(ctx, func() { d.T.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	defer d.T.Close()
	if d.Op != nil {
		defer d.Op.Close()
	}
	// One clock read per step: in User Mode Linux a read costs a system
	// call of tens of microseconds. The events of a step are stamped with
	// the step's time, read before the node saw its input: a receiver's
	// stamp is therefore always after the sender's stamp of the datagram
	// that caused it. t is that reference time, which the log and the
	// socket's deadlines use; the node reads the agent's own clock at t.
	t := now()
	clk := d.Clock.At(t)
	d.Node.Start(clk.Local(t))
	if err := d.flush(t, clk); err != nil {
		return err
	}
	buf := make([]byte, wire.MaxSize+1)
	for {
		if ctx.Err() != nil {
			t = now()
			d.Node.Stop(context.Cause(ctx).Error())
			if err := d.flush(t, clk); err != nil {
				return err
			}
			return d.Log.WriteAt(t, d.Rejections.Final()...)
		}
		dl, ok := d.Node.Deadline()
		if ok {
			dl = clk.Ref(dl)
		}
		// A pending rejections summary is a timer of the driver's own.
		if sd, sok := d.Rejections.Due(); sok && (!ok || sd.Before(dl)) {
			dl, ok = sd, true
		}
		if !ok {
			dl = time.Time{} // no timer: block until a datagram or cancellation
		}
		if t = now(); ok && !t.Before(dl) {
			d.tick(clk.Local(t))
		} else {
			if err := d.T.SetReadDeadline(dl); err != nil {
				return err
			}
			n, from, err := d.T.ReadFrom(buf)
			t = now()
			switch {
			case err == nil:
				d.Node.Receive(clk.Local(t), from, buf[:n])
			case errors.Is(err, os.ErrDeadlineExceeded):
				if ctx.Err() != nil {
					continue
				}
				d.tick(clk.Local(t))
			default:
				return err
			}
		}
		if err := d.flush(t, clk); err != nil {
			return err
		}
		d.Node.Prepare(clk.Local(t))
	}
}

// tick runs the node's timers if they are due at local time lt (the
// deadline may have been the rejections summary's).
func (d *Driver) tick(lt time.Time) {
	if nd, ok := d.Node.Deadline(); ok && !lt.Before(nd) {
		d.Node.Tick(lt)
	}
}

// flush logs, then sends. A failed send is logged, not fatal: UDP may
// refuse a datagram (ICMP unreachable from an earlier send) and the
// protocol's retries cover it.
func (d *Driver) flush(t time.Time, clk clock.Clock) error {
	r := d.Node.Ready()
	evs := d.Rejections.Filter(t, r.Events)
	eventlog.SetLocal(evs, t, clk.Local(t))
	if err := d.Log.WriteAt(t, evs...); err != nil {
		return err
	}
	d.operate(r.Events)
	var errs []eventlog.Event
	for _, p := range r.Packets {
		if err := d.T.WriteTo(p.Data, p.To); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, eventlog.Event{Kind: eventlog.AgentNotice, Reason: "send_error", Addr: p.To.String(), Detail: err.Error()})
		}
	}
	if d.OnReady != nil {
		d.OnReady(r)
	}
	return d.Log.WriteAt(t, errs...)
}

// operate starts and ends the protected operation as the node's events
// say, after they are logged: the log shows op_started before the
// operation's first packet. Start and Finish do not block (the node is a
// pure machine and the driver's loop carries the passes).
func (d *Driver) operate(evs []eventlog.Event) {
	if d.Op == nil {
		return
	}
	for _, e := range evs {
		switch e.Kind {
		case eventlog.OpStarted:
			d.Op.Start(e.Token)
		case eventlog.OpFinished:
			d.Op.Finish(e.Token)
		}
	}
}
