// Package host wraps an FTN machine (agent/ftn/server or agent/ftn/client)
// with what turns messages into datagrams and ticks into time: the codec
// (signatures), the tick interval, the event log's records and, for a
// client, the workload. It reads no clock (time comes in as now) and does
// no I/O: the real driver (agent/ftn/driver) and the simulator
// (harness/protocol/ftn, a sim.Process) both run it, so both run the
// same code.
//
// Rejected datagrams (refused by the codec, or authentic but stale: a
// machine's "stale" event, a late copy or a replay of a request or reply
// it no longer awaits) are logged as the token passing agent's are: a
// datagram_rejected line for the first agent/driver.RejectionSampler
// sample per reason and interval, a rejections_summary for the rest, and
// exact counts per reason in the agent_stopping record (Rejected).
package host

import (
	"errors"
	"maps"
	"math/rand/v2"
	"net/netip"
	"time"

	agentdriver "tokenbed/agent/driver"
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
	// Rejections bounds the log lines of rejected datagrams, as the token
	// passing agent's driver does (a flood, or replays: 002 §3.1 drops
	// them without reply); the zero value samples with its defaults.
	Rejections agentdriver.RejectionSampler
}

// Host is one running process.
type Host struct {
	cfg  Config
	next time.Time
	wl   *workload
	ops  map[uint64]client.Op // a client's outstanding operations

	rej      agentdriver.RejectionSampler
	rejected map[string]uint64 // every rejection by reason, logged or not
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
	h := &Host{cfg: cfg, ops: map[uint64]client.Op{}, rej: cfg.Rejections, rejected: map[string]uint64{}}
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

// Deadline is when Tick is due: the next machine tick, or the summary
// of rejections sampled away, if that comes first.
func (h *Host) Deadline() time.Time {
	if d, ok := h.rej.Due(); ok && d.Before(h.next) {
		return d
	}
	return h.next
}

// Rejected returns the count of rejected datagrams by reason, every one
// of them (logged or summarised).
func (h *Host) Rejected() map[string]uint64 { return maps.Clone(h.rejected) }

// Receive handles a datagram from src.
func (h *Host) Receive(now time.Time, src netip.AddrPort, data []byte) Output {
	from, m, err := h.cfg.Codec.Decode(data, src, h.cfg.Self, now)
	if err != nil {
		var ce *codec.Error
		reason := err.Error()
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		return h.sample(now, Output{Events: []eventlog.Event{{Kind: eventlog.DatagramRejected, Addr: src.String(), Reason: reason}}})
	}
	if s := h.cfg.Server; s != nil {
		s.Step(from, m)
	} else {
		h.cfg.Client.Step(from, m)
	}
	return h.sample(now, h.drain(now))
}

// sample counts o's rejections and lets the sampler's share of them into
// the log.
func (h *Host) sample(now time.Time, o Output) Output {
	for _, e := range o.Events {
		if e.Kind == eventlog.DatagramRejected {
			h.rejected[e.Reason]++
		}
	}
	o.Events = h.rej.Filter(now, o.Events)
	return o
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
			o.merge(h.invoke(now, op))
		}
	}
	return h.sample(now, o)
}

// Invoke starts a client operation, logging its invocation.
func (h *Host) Invoke(now time.Time, op client.Op) Output { return h.sample(now, h.invoke(now, op)) }

func (h *Host) invoke(now time.Time, op client.Op) Output {
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
	o = h.sample(now, o)
	o.Events = append(o.Events, h.rej.Final()...)
	o.Events = append(o.Events, agentdriver.Stopping(reason, h.rejected))
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
		switch e.Kind {
		case "global":
			continue // every global state a client learns: the servers log them
		case "stale":
			// An authentic datagram too old to act on (a late copy or a
			// replay): a rejection like the codec's, sampled and counted.
			reason := "stale-reply"
			if h.cfg.Server != nil {
				reason = "stale-request"
			}
			o.Events = append(o.Events, eventlog.Event{Kind: eventlog.DatagramRejected, Reason: reason, Detail: e.String()})
			continue
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
