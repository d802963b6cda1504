// Package host wraps an FTN machine (agent/ftn/server or agent/ftn/client)
// with what turns messages into datagrams and ticks into time: the codec
// (signatures), the tick interval, the event log's records and, for a
// client, the workload. It reads no clock (time comes in as now) and does
// no I/O: the real driver (agent/ftn/driver) and the simulator
// (harness/protocol/ftn, a sim.Process) both run it, so both run the
// same code.
package host

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
	"tokenbed/agent/ftn/server"
)

// Packet is a datagram to send.
type Packet struct {
	To   netip.AddrPort
	Data []byte
}

// Output is what the host did: log Events, then send Packets; Done are
// the client operations that completed.
type Output struct {
	Events  []eventlog.Event
	Packets []Packet
	Done    []client.Result
}

// Config of a host.
type Config struct {
	Self  netip.AddrPort
	Codec *codec.Codec
	Tick  time.Duration // one machine tick in real (scaled) time
	Role  string        // logged in agent_started
	Seed  uint64
	// Exactly one of Server and Client.
	Server *server.Server
	Client *client.Client
	// Workload, for a client: nil for none. A workload client whose ID
	// becomes invalid registers again as a new client, from ClientConfig
	// with the next nonce.
	Workload     *Workload
	ClientConfig client.Config
}

// Host is one running process.
type Host struct {
	cfg  Config
	next time.Time
	wl   *workload
	ops  map[uint64]client.Op // a client's outstanding operations

	stopping bool
}

// New returns a host; Start starts it.
func New(cfg Config) (*Host, error) {
	if (cfg.Server == nil) == (cfg.Client == nil) {
		return nil, errors.New("host: want exactly one of a server and a client")
	}
	if cfg.Tick <= 0 {
		return nil, errors.New("host: tick must be positive")
	}
	h := &Host{cfg: cfg, ops: map[uint64]client.Op{}}
	if cfg.Workload != nil {
		if cfg.Client == nil {
			return nil, errors.New("host: a workload needs a client")
		}
		h.wl = newWorkload(*cfg.Workload, rand.New(rand.NewPCG(cfg.Seed, 0x776c)))
	}
	return h, nil
}

// Client is the host's client machine (nil for a server).
func (h *Host) Client() *client.Client { return h.cfg.Client }

// Server is the host's server machine (nil for a client).
func (h *Host) Server() *server.Server { return h.cfg.Server }

// Start logs the start record and arms the first tick.
func (h *Host) Start(now time.Time) Output {
	h.next = now.Add(h.cfg.Tick)
	return Output{Events: []eventlog.Event{{Kind: eventlog.AgentStarted, Role: h.cfg.Role, Addr: h.cfg.Self.String(),
		Seed: h.cfg.Seed, Version: eventlog.SchemaVersion}}}
}

// Deadline is when Tick is due.
func (h *Host) Deadline() time.Time { return h.next }

// Receive handles a datagram from src.
func (h *Host) Receive(now time.Time, src netip.AddrPort, data []byte) Output {
	from, m, err := h.cfg.Codec.Decode(data, src, h.cfg.Self, now)
	if err != nil {
		var ce *codec.Error
		reason := err.Error()
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		return Output{Events: []eventlog.Event{{Kind: eventlog.DatagramRejected, Addr: src.String(), Reason: reason}}}
	}
	if s := h.cfg.Server; s != nil {
		s.Step(from, m)
	} else {
		h.cfg.Client.Step(from, m)
	}
	return h.drain(now)
}

// Tick runs every machine tick due by now, and the workload.
func (h *Host) Tick(now time.Time) Output {
	var o Output
	for !h.next.After(now) {
		h.next = h.next.Add(h.cfg.Tick)
		if s := h.cfg.Server; s != nil {
			s.Tick()
		} else {
			h.cfg.Client.Tick()
		}
		o.merge(h.drain(now))
	}
	if h.wl != nil && h.cfg.Client.Invalid() && len(h.ops) == 0 {
		h.cfg.ClientConfig.Nonce++
		if c, err := client.New(h.cfg.ClientConfig); err == nil {
			o.Events = append(o.Events, eventlog.Event{Kind: "ftn_reregister"})
			h.cfg.Client = c
			h.wl.st, h.wl.next = idle, time.Time{}
		}
	}
	if h.wl != nil && h.cfg.Client.Registered() {
		for _, op := range h.wl.step(now, h.cfg.Client) {
			o.merge(h.Invoke(now, op))
		}
	}
	return o
}

// Invoke starts a client operation, logging its invocation.
func (h *Host) Invoke(now time.Time, op client.Op) Output {
	c := h.cfg.Client
	req := c.Invoke(op)
	h.ops[req] = op
	o := Output{Events: []eventlog.Event{ftnlog.Invocation(c.ID(), req, op.Kind, op.Name, op.Mode, op.Data).Event(ftnlog.Invoke)}}
	o.merge(h.drain(now))
	return o
}

// Stop is a clean exit: a client closes (the leader drops it at once)
// and logs its outstanding operations as unknown.
func (h *Host) Stop(now time.Time, reason string) Output {
	var o Output
	if c := h.cfg.Client; c != nil {
		// Closing fails every outstanding operation in the machine; for
		// the history they are unknown: a grant may be on its way.
		h.stopping = true
		c.Close()
		o.merge(h.drain(now))
		o.Done = nil
	}
	o.Events = append(o.Events, eventlog.Event{Kind: eventlog.AgentStopping, Reason: reason})
	return o
}

func (o *Output) merge(p Output) {
	o.Events = append(o.Events, p.Events...)
	o.Packets = append(o.Packets, p.Packets...)
	o.Done = append(o.Done, p.Done...)
}

func (h *Host) drain(now time.Time) Output {
	var o Output
	var outs []msg.Out
	var evs []msg.Event
	if s := h.cfg.Server; s != nil {
		outs, evs = s.Ready()
	} else {
		rd := h.cfg.Client.Ready()
		outs, evs = rd.Out, rd.Events
		o.Done = rd.Done
	}
	for _, e := range evs {
		if e.Kind == "global" {
			continue // every global state a client learns: the servers log them
		}
		o.Events = append(o.Events, ftnlog.Machine(e))
	}
	c := h.cfg.Client
	for _, r := range o.Done {
		op, ok := h.ops[r.Req]
		if !ok {
			op = r.Op
		}
		delete(h.ops, r.Req)
		res, st := ftnlog.Fail, r.Status.String()
		switch {
		case h.stopping:
			res, st = ftnlog.Unknown, "stopped"
		case r.OK():
			res = ftnlog.OK
		}
		if r.Err != "" && !h.stopping {
			st = r.Err
		}
		o.Events = append(o.Events, ftnlog.Completion(c.ID(), r.Req, op.Kind, op.Name, op.Mode, res, st, r.Fence, r.Data).Event(ftnlog.Complete))
		if h.wl != nil {
			h.wl.done(now, r)
		}
	}
	for _, out := range outs {
		b, err := h.cfg.Codec.Encode(out.Msg, h.cfg.Self, out.To, now)
		if err != nil {
			o.Events = append(o.Events, eventlog.Event{Kind: "ftn_send_failed", Extra: nil, Reason: err.Error()})
			continue
		}
		o.Packets = append(o.Packets, Packet{To: out.To, Data: b})
	}
	return o
}
