// Package client is the FTN token service's client (seed 001) as a pure
// state machine: no I/O, no clock. The caller invokes operations, feeds
// authenticated messages to Step and timer ticks to Tick, and after each
// call sends the messages, logs the events and reports the results that
// Ready returns.
//
// The client registers through any server (a non-leader answers with
// the leader), heartbeats the leader, sends each operation to the token's
// server (msg.Owner over the servers' states it knows) and repeats it
// until answered (001 "Communication"): each operation on its own
// timer, RetryTicks after it was last sent (the first send, a repeat or
// a redirect), so a round trip shorter than RetryTicks is never repeated
// whatever the tick at which the operation started. When it learns
// a newer global state (from a server's query, a heartbeat
// acknowledgement or a registration) it recomputes the destination of
// every outstanding operation and redirects it (001 "When a Server
// Crashes"). A global state that does not fit its server list
// (msg.Global.Check: another number of servers, 001 "Configuration") is
// refused with a "rejected" event: its placement is not this client's.
//
// Registration and heartbeats stay on the tick grid (every RetryTicks
// and every HeartbeatTicks from the client's start): they are periodic,
// and a repeated registration is answered with the same ID.
//
// Late messages (001 "When a Server Crashes"): every server message
// carries the sender's incarnation. The client discards a message from
// an incarnation older than the one its global state lists, or from the
// listed incarnation when that is DOWN. Before it answers a recovery
// query it adopts the query's global state, so every message of the dead
// server that arrives after the answer is discarded, and every one that
// arrived before is in the answer.
//
// Fresh replies: a reply names the registration (client ID and
// RegVersion) and the request it answers. The client takes it only for
// an outstanding request of its current registration: a client
// registered again (a new machine in the same process, whose request
// numbers start again at 1) takes nothing meant for its previous life.
// Its answer to a query carries its newest request number and its
// outstanding requests, so that a server taking names over refuses late
// copies of the others (the server package's "Fresh requests").
package client

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"tokenbed/agent/ftn/msg"
)

// Config of a client. Durations are in ticks.
type Config struct {
	Servers []msg.Peer // the servers' list (the shared configuration file)
	// Nonce identifies this life's registration: repeats of it get the
	// same ID from the same leader (the driver draws it from its seed).
	Nonce          uint64
	HeartbeatTicks int // heartbeat interval (default 3)
	// RetryTicks: resend an unanswered operation this long after its
	// last send; unregistered, repeat the registration this often
	// (default 2).
	RetryTicks        int
	LeaderSilentTicks int // no answer from the leader this long: ask another server (default 6)
}

// Validate reports every invalid field of c, with its defaults filled
// in, each error as "field: reason" (the field's name in the
// configuration file, e.g. "retry_ticks"); c itself is not changed.
func (c Config) Validate() error { return c.validate() }

func (c *Config) validate() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.HeartbeatTicks, 3)
	def(&c.RetryTicks, 2)
	def(&c.LeaderSilentTicks, 6)
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("servers: empty"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"heartbeat_ticks", c.HeartbeatTicks}, {"retry_ticks", c.RetryTicks}, {"leader_silent_ticks", c.LeaderSilentTicks}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d < 0", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// Op is an operation a user invokes.
type Op struct {
	Kind msg.Kind // msg.Acquire, msg.Release, msg.SetData or msg.GetData
	Name string
	Mode msg.Mode // Acquire
	Data []byte   // SetData
}

func (o Op) String() string {
	switch o.Kind {
	case msg.Acquire:
		return fmt.Sprintf("acquire %s %s", o.Name, o.Mode)
	case msg.SetData:
		return fmt.Sprintf("set-data %s %q", o.Name, o.Data)
	}
	return fmt.Sprintf("%s %s", map[msg.Kind]string{msg.Release: "release", msg.GetData: "get-data"}[o.Kind], o.Name)
}

// Result is an operation's completion.
type Result struct {
	Req    uint64
	Op     Op
	Status msg.Status
	// Err, when not "", says the operation failed in the client itself
	// (e.g. "held": acquiring a token it holds).
	Err   string
	Fence msg.Fence
	Data  []byte
}

// OK reports whether the operation succeeded.
func (r Result) OK() bool { return r.Status == msg.OK && r.Err == "" }

// Hold is a token this client holds.
type Hold struct {
	Mode  msg.Mode
	Fence msg.Fence
	Data  []byte
	Req   uint64 // the acquire that obtained it
}

type op struct {
	Op
	req    uint64
	target int   // server it was last sent to (-1: none yet)
	sentAt int64 // tick of its last send (-1: none yet)
}

// Ready is what the client did since the last call of Client.Ready.
type Ready struct {
	Out    []msg.Out
	Events []msg.Event
	Done   []Result
}

// Client is one client.
type Client struct {
	cfg  Config
	tick int64

	id         uint64
	regVersion uint64
	invalid    bool
	closed     bool

	g       msg.Global
	leader  int   // where heartbeats and registration go
	lastAck int64 // tick of the last answer from the leader
	// beatTerm and beat: the newest heartbeat acknowledgement's term and
	// leader tick, which the next heartbeat echoes (msg.Msg.Beat).
	beatTerm, beat uint64

	nextReq uint64
	ops     map[uint64]*op
	holds   map[string]*Hold

	rd Ready
}

// New returns a client that starts registering at its first tick.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, ops: map[uint64]*op{}, holds: map[string]*Hold{}}
	c.leader = int(cfg.Nonce % uint64(len(cfg.Servers)))
	c.g = msg.Global{Leader: -1, Servers: make([]msg.ServerState, len(cfg.Servers))}
	return c, nil
}

// Ready returns, and forgets, what the client did since the last call.
func (c *Client) Ready() Ready {
	r := c.rd
	c.rd = Ready{}
	return r
}

// ID is the client's ID (0 until registered).
func (c *Client) ID() uint64 { return c.id }

// Registered reports whether the client has a valid ID.
func (c *Client) Registered() bool { return c.id != 0 && !c.invalid }

// Invalid reports whether the client's ID was declared invalid (or it
// closed): it can take no more token actions.
func (c *Client) Invalid() bool { return c.invalid }

// Holds returns the tokens the client holds.
func (c *Client) Holds() map[string]Hold {
	m := map[string]Hold{}
	for n, h := range c.holds {
		m[n] = *h
	}
	return m
}

// Global is the global state the client knows (without the client list).
func (c *Client) Global() msg.Global { return c.g.Clone() }

// Pending is the number of outstanding operations.
func (c *Client) Pending() int { return len(c.ops) }

func (c *Client) event(e msg.Event) { c.rd.Events = append(c.rd.Events, e) }

func (c *Client) done(r Result) { c.rd.Done = append(c.rd.Done, r) }

func (c *Client) send(to int, m msg.Msg) {
	c.rd.Out = append(c.rd.Out, msg.Out{To: c.cfg.Servers[to].Addr, Msg: m})
}

// Invoke starts an operation and returns its request number; its result
// comes in a later Ready.Done (or in the next one, if it fails at once).
func (c *Client) Invoke(o Op) uint64 {
	c.nextReq++
	req := c.nextReq
	switch {
	case c.invalid:
		c.done(Result{Req: req, Op: o, Status: msg.IDInvalid})
		return req
	case o.Kind == msg.Acquire && c.holds[o.Name] != nil:
		c.done(Result{Req: req, Op: o, Err: "held"})
		return req
	case slices.ContainsFunc(slices.Collect(maps.Values(c.ops)), func(p *op) bool { return p.Name == o.Name }):
		// One operation per name at a time keeps the server's per-client
		// state one holder or one waiter.
		c.done(Result{Req: req, Op: o, Err: "busy"})
		return req
	}
	p := &op{Op: o, req: req, target: -1, sentAt: -1}
	c.ops[req] = p
	c.sendOp(p)
	return req
}

// Close tells the leader the client closes down (001 "The Client
// List"); every later operation fails.
func (c *Client) Close() {
	if c.Registered() {
		c.send(c.leader, msg.Msg{Kind: msg.Close, Client: c.id, RegVersion: c.regVersion})
	}
	c.invalidate("closed")
}

func (c *Client) sendOp(p *op) {
	if !c.Registered() {
		return
	}
	o := c.g.Owner(p.Name)
	if o < 0 {
		return
	}
	if p.target >= 0 && p.target != o {
		c.event(msg.Event{Kind: "redirect", Req: p.req, Name: p.Name, Server: o, Version: c.g.Version})
	}
	p.target, p.sentAt = o, c.tick
	m := msg.Msg{Kind: p.Kind, Client: c.id, RegVersion: c.regVersion, Version: c.g.Version,
		Req: p.req, Name: p.Name, Mode: p.Mode, Data: p.Data}
	if h := c.holds[p.Name]; h != nil && p.Kind == msg.Release {
		m.Fence = h.Fence
	}
	c.send(o, m)
}

// Tick advances the client's clock by one tick.
func (c *Client) Tick() {
	c.tick++
	if c.invalid {
		return
	}
	if c.tick-c.lastAck > int64(c.cfg.LeaderSilentTicks) {
		// No answer from whom we think leads: ask the next server, which
		// redirects us (001 "The Client List": contact any server).
		c.leader = (c.leader + 1) % len(c.cfg.Servers)
		c.lastAck = c.tick
	}
	if c.id == 0 {
		if c.tick%int64(c.cfg.RetryTicks) == 1 || c.cfg.RetryTicks == 1 {
			c.contactLeader()
		}
		return
	}
	if c.tick%int64(c.cfg.HeartbeatTicks) == 0 {
		c.contactLeader()
	}
	for _, req := range c.reqs() {
		// Repeat what has gone unanswered for RetryTicks since its last
		// send (001 "Communication"); one never sent (no server to send
		// it to) is tried at every tick, which sends nothing until one
		// is known.
		if p := c.ops[req]; p.sentAt < 0 || c.tick-p.sentAt >= int64(c.cfg.RetryTicks) {
			c.sendOp(p)
		}
	}
}

// contactLeader registers with, or heartbeats, whom we think leads.
func (c *Client) contactLeader() {
	if c.id == 0 {
		c.send(c.leader, msg.Msg{Kind: msg.Register, Nonce: c.cfg.Nonce})
		return
	}
	c.send(c.leader, msg.Msg{Kind: msg.ClientHeartbeat, Client: c.id, RegVersion: c.regVersion, Version: c.g.Version, Term: c.beatTerm, Beat: c.beat})
}

func (c *Client) reqs() []uint64 {
	r := slices.Collect(maps.Keys(c.ops))
	slices.Sort(r)
	return r
}

func (c *Client) serverIndex(p msg.Peer) int {
	for i, q := range c.cfg.Servers {
		if q.Name == p.Name {
			return i
		}
	}
	return -1
}

// Step handles one message from an authenticated sender.
func (c *Client) Step(from msg.Peer, m msg.Msg) {
	i := c.serverIndex(from)
	if i < 0 || c.invalid {
		return
	}
	switch m.Kind {
	case msg.Redirect:
		if m.Server >= 0 && m.Server < len(c.cfg.Servers) && m.Server != c.leader {
			// Ask the leader at once: a heartbeat late by a period is a
			// step toward being dropped as crashed.
			c.leader, c.lastAck = m.Server, c.tick
			c.contactLeader()
		}
	case msg.Registered:
		if c.id != 0 || m.Global == nil {
			return
		}
		c.id, c.regVersion = m.Client, m.RegVersion
		c.lastAck = c.tick
		c.event(msg.Event{Kind: "registered", Client: c.id, Version: m.RegVersion})
		c.learn(m.Global)
		for _, req := range c.reqs() {
			c.sendOp(c.ops[req])
		}
	case msg.HeartbeatAck:
		if m.Global != nil && i == m.Global.Leader {
			c.lastAck = c.tick
		}
		if m.Term > c.beatTerm || (m.Term == c.beatTerm && m.Beat > c.beat) {
			c.beatTerm, c.beat = m.Term, m.Beat // echoed by the next heartbeat
		}
		c.learn(m.Global)
	case msg.Query:
		c.query(i, m)
	case msg.Reply:
		c.reply(i, m)
	}
}

// late reports whether a message from server i's incarnation inc must be
// discarded (001 "must guard against late messages").
func (c *Client) late(i int, inc uint64) bool {
	k := c.g.Servers[i]
	return inc < k.Inc || (inc == k.Inc && k.State == msg.Down)
}

// learn adopts g if it is newer, and redirects outstanding operations.
func (c *Client) learn(g *msg.Global) {
	if g == nil || g.Version <= c.g.Version {
		return
	}
	if err := g.Check(len(c.cfg.Servers)); err != nil {
		// Another server list than ours (001 "Configuration": one shared
		// file): its placement is not ours.
		c.event(msg.Event{Kind: "rejected", Version: g.Version, Detail: "global state: " + err.Error()})
		return
	}
	c.g = g.Clone()
	if g.Leader >= 0 && g.Leader != c.leader {
		// A new leader gets a full LeaderSilentTicks before we look
		// elsewhere.
		c.leader, c.lastAck = g.Leader, c.tick
	}
	c.event(msg.Event{Kind: "global", Version: g.Version, Detail: g.String()})
	for _, req := range c.reqs() {
		p := c.ops[req]
		if c.g.Owner(p.Name) != p.target {
			c.sendOp(p)
		}
	}
}

func (c *Client) query(i int, m msg.Msg) {
	if !c.Registered() {
		return
	}
	c.learn(m.Global)
	if c.late(i, m.Inc) {
		return
	}
	// Req and Marks tell the querier which of our requests may still come
	// (those outstanding) and that every other one up to Req is done: it
	// refuses their late copies, whichever server they were sent to.
	r := msg.Msg{Kind: msg.QueryReply, Client: c.id, RegVersion: c.regVersion, Version: m.Version, Req: c.nextReq}
	names := slices.Sorted(maps.Keys(c.holds))
	for _, n := range names {
		h := c.holds[n]
		r.Holds = append(r.Holds, msg.Hold{Client: c.id, Name: n, Mode: h.Mode, Fence: h.Fence, Data: h.Data, Req: h.Req})
	}
	for _, req := range c.reqs() {
		r.Marks = append(r.Marks, msg.ReqMark{Client: c.id, Name: c.ops[req].Name, Req: req})
	}
	c.send(i, r)
}

func (c *Client) reply(i int, m msg.Msg) {
	if c.late(i, m.Inc) {
		c.event(msg.Event{Kind: "late", Server: i, Req: m.Req, Name: m.Name, Detail: fmt.Sprintf("inc=%d", m.Inc)})
		return
	}
	if m.Status == msg.IDInvalid {
		if m.Client == c.id {
			c.invalidate("id-invalid")
		}
		return
	}
	if m.Client != c.id || m.RegVersion != c.regVersion {
		// Meant for a previous registration of this process: its request
		// numbers started again at 1 in this one.
		c.event(msg.Event{Kind: "stale", Server: i, Req: m.Req, Name: m.Name, Detail: "reply to " + msg.IDString(m.Client)})
		return
	}
	p := c.ops[m.Req]
	if p == nil || p.Name != m.Name {
		return // a repeat's answer
	}
	delete(c.ops, m.Req)
	r := Result{Req: p.req, Op: p.Op, Status: m.Status, Fence: m.Fence}
	if m.Status == msg.OK {
		switch p.Kind {
		case msg.Acquire:
			c.holds[p.Name] = &Hold{Mode: p.Mode, Fence: m.Fence, Data: m.Data, Req: p.req}
			r.Data = m.Data
		case msg.Release:
			delete(c.holds, p.Name)
		case msg.SetData:
			if h := c.holds[p.Name]; h != nil {
				h.Data = p.Data
			}
		case msg.GetData:
			if h := c.holds[p.Name]; h != nil {
				h.Data = m.Data
			}
			r.Data = m.Data
		}
	}
	c.done(r)
}

// invalidate: the ID is no longer valid (001 "When a Client Crashes":
// it can perform no more token actions); every outstanding operation
// fails and the client holds nothing.
func (c *Client) invalidate(why string) {
	if c.invalid {
		return
	}
	c.invalid = true
	c.event(msg.Event{Kind: "invalid", Client: c.id, Detail: why})
	for _, req := range c.reqs() {
		p := c.ops[req]
		c.done(Result{Req: req, Op: p.Op, Status: msg.IDInvalid})
	}
	c.ops = map[uint64]*op{}
	c.holds = map[string]*Hold{}
}
