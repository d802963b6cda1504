// Package driver runs an FTN host (agent/ftn/host) on a UDP socket and
// the wall clock: the only part of an FTN process that does I/O or reads
// the clock. After every input it writes the host's events to the log,
// then sends its datagrams, so that a log that survives a SIGKILL never
// shows a datagram without the events that led to it.
package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/host"
)

// Driver runs one host.
type Driver struct {
	H   *host.Host
	T   driver.Transport // agent/driver's: a UDP socket, or a test double
	Log *eventlog.Writer
	// OnDone, if set, hears every client operation that completes (from
	// the driver's goroutine).
	OnDone func(client.Result)
	// Invoke, if set, carries operations to start (a CLI, a Go client).
	Invoke <-chan client.Op
}

type datagram struct {
	from netip.AddrPort
	data []byte
}

// Run runs until ctx ends (a clean stop: the host's last events are
// logged) or the socket fails.
func (d *Driver) Run(ctx context.Context) error {
	in := make(chan datagram, 256)
	rerr := make(chan error, 1)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := d.T.ReadFrom(buf)
			if err != nil {
				rerr <- err
				return
			}
			in <- datagram{from, append([]byte(nil), buf[:n]...)}
		}
	}()
	defer d.T.Close()
	if err := d.flush(d.H.Start(time.Now())); err != nil {
		return err
	}
	armed := d.H.Deadline()
	timer := time.NewTimer(time.Until(armed))
	defer timer.Stop()
	for {
		var out host.Output
		select {
		case <-ctx.Done():
			return d.flush(d.H.Stop(time.Now(), "stopped"))
		case err := <-rerr:
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			d.flush(d.H.Stop(time.Now(), err.Error()))
			return err
		case g := <-in:
			out = d.H.Receive(time.Now(), g.from, g.data)
		case op := <-d.Invoke:
			out = d.H.Invoke(time.Now(), op)
		case <-timer.C:
			out = d.H.Tick(time.Now())
			armed = time.Time{}
		}
		if err := d.flush(out); err != nil {
			return err
		}
		// A datagram may bring the deadline forward (a rejections summary
		// now pending); Reset on a Go 1.23+ timer needs no draining.
		if dl := d.H.Deadline(); !dl.Equal(armed) {
			armed = dl
			timer.Reset(time.Until(dl))
		}
	}
}

func (d *Driver) flush(o host.Output) error {
	if err := d.Log.Write(o.Events...); err != nil {
		return err
	}
	for _, p := range o.Packets {
		if err := d.T.WriteTo(p.Data, p.To); err != nil && !errors.Is(err, net.ErrClosed) {
			// A send error (no route during a partition) is the network's
			// loss, not the process's failure.
			continue
		}
	}
	if d.OnDone != nil {
		for _, r := range o.Done {
			d.OnDone(r)
		}
	}
	return nil
}
