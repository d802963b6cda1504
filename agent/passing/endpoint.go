package passing

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"tokenbed/agent/wire"
)

// Msg is an authenticated datagram as the machines see it: decoding,
// signatures and certificates are the caller's business.
type Msg struct {
	Type    wire.Type
	From    string
	To      string
	Token   wire.TokenID
	Session uint64
	PassID  uint64 // the pass's random id (3-way exchange, 004 §4); 0: none
	Cert    bool   // carries (received) or must carry (sent) a certificate
	Attempt int    // sent messages: 1 for the first send of this type in the session
}

func (m Msg) String() string {
	c := ""
	if m.Cert {
		c = "+cert"
	}
	id := ""
	if m.PassID != 0 {
		id = fmt.Sprintf(" id=%016x", m.PassID)
	}
	return fmt.Sprintf("%s%s %s→%s %v/%d%s #%d", m.Type, c, m.From, m.To, m.Token, m.Session, id, m.Attempt)
}

// EffectKind says what an Effect asks for or reports.
type EffectKind uint8

const (
	// SendMsg: send Msg to Msg.To.
	SendMsg EffectKind = iota + 1
	// Received: Msg was accepted.
	Received
	// Rejected: Msg was dropped silently (no reply); Reason says why.
	Rejected
	// PassStarted: a pass of Token to Peer began with Session.
	PassStarted
	// PassSucceeded: the sender got the Ack; TokenReleased came just before.
	PassSucceeded
	// PassCompleted: the sender is done; Reason "earlystop" or
	// "commit_retries" (4-way), "commit_sent" (3-way: right after
	// PassSucceeded and its Commit); Latency from the first Move.
	PassCompleted
	// PassFailed: Reason "ack_timeout" (sender, keeps the token) or
	// "commit_timeout" (receiver, the sender is considered to keep it:
	// its Ack retries ran out, or a newer session of the token arrived
	// first, see Receiver.Supersede).
	PassFailed
	// TokenAcquired: this agent now holds Token; Reason "commit" (Late if
	// the Commit came after the receiver gave up) or "hold".
	TokenAcquired
	// TokenReleased: this agent no longer holds Token; Reason "passed" or
	// "discarded".
	TokenReleased
)

var effectNames = [...]string{"", "send", "received", "rejected", "pass-started", "pass-succeeded",
	"pass-completed", "pass-failed", "token-acquired", "token-released"}

func (k EffectKind) String() string { return effectNames[k] }

// Effect is one output of the Endpoint, to be carried out in order.
type Effect struct {
	Kind    EffectKind
	Msg     Msg
	Token   wire.TokenID
	Session uint64
	Peer    string
	Reason  string
	Latency time.Duration
	Late    bool
}

type key struct {
	token   wire.TokenID
	session uint64
	peer    string
}

func (a key) compare(b key) int {
	if c := a.token.Compare(b.token); c != 0 {
		return c
	}
	if c := cmp.Compare(a.session, b.session); c != 0 {
		return c
	}
	return cmp.Compare(a.peer, b.peer)
}

// soft is the soft state of a token at this agent (002 §3): the sessions
// seen, used to reject replayed and stale datagrams.
type soft struct {
	last      uint64 // highest session taken part in, in any role
	lastPeer  string // the other party of session last
	lastSent  bool   // this agent started session last
	completed uint64 // highest session in which this agent acquired the token
	// passIDs are the ids of the last passes received in session last
	// from lastPeer (3-way exchange), newest last, at most maxPassIDs:
	// a Move of one of them is a late copy of a pass this agent has left.
	passIDs []uint64
}

// maxPassIDs bounds soft.passIDs. A receiver takes at most AckRetries+1
// Moves per wait, and a sender retries a peer in one session only after
// each pass failed, so a late copy older than the last few passes is past
// every timeout; the session rules refuse it once the token moves on.
const maxPassIDs = 8

// sawPass records the pass of m, a Move accepted in the soft state's
// session last from lastPeer.
func (sf *soft) sawPass(m Msg) {
	id := m.PassID
	if id == 0 || m.Session != sf.last || m.From != sf.lastPeer || sf.lastSent || slices.Contains(sf.passIDs, id) {
		return
	}
	if len(sf.passIDs) == maxPassIDs {
		sf.passIDs = slices.Delete(sf.passIDs, 0, 1)
	}
	sf.passIDs = append(sf.passIDs, id)
}

// seenPass reports whether m is the Move of a pass this agent received
// before in m's session from m's sender.
func (sf *soft) seenPass(m Msg) bool {
	return sf != nil && m.PassID != 0 && m.Session == sf.last &&
		m.From == sf.lastPeer && !sf.lastSent && slices.Contains(sf.passIDs, m.PassID)
}

// Endpoint is one agent's side of every passing operation: the tokens it
// holds, the sessions in progress and the soft state of the tokens it has
// seen. It is not safe for concurrent use.
type Endpoint struct {
	cfg       Config
	exchange  Exchange
	self      string
	held      map[wire.TokenID]uint64 // token → session in which it was received
	soft      map[wire.TokenID]*soft
	senders   map[key]SenderMachine   // passes in progress: awaiting the Ack, or committing
	finished  map[key]SenderMachine   // done or failed passes, kept to refuse late datagrams by name
	gcQueue   []gcEntry               // when finished passes may be forgotten, in time order
	receivers map[key]ReceiverMachine // waiting for a Commit, or lingering after giving up
	effects   []Effect
	// ids draws the passes' random ids (Exchange.PassIDs): seeded by
	// Config.Seed and the agent's name, so that a run with the same seed
	// replays with the same ids and the machines stay deterministic.
	ids rand.PCG
}

type gcEntry struct {
	k  key
	s  SenderMachine
	at time.Time
}

// gcDelay is how long a finished pass is remembered: past every datagram
// of the session that may still be in flight.
func (c Config) gcDelay() time.Duration {
	return c.Linger + c.MoveTimeout*time.Duration(c.MoveRetries+1) + c.AckTimeout*time.Duration(c.AckRetries+1)
}

// NewEndpoint returns the endpoint of the member named self.
func NewEndpoint(cfg Config, self string) (*Endpoint, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	x, err := LookupExchange(cfg.Exchange)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(self))
	return &Endpoint{
		cfg: cfg, exchange: x, self: self,
		held:      map[wire.TokenID]uint64{},
		soft:      map[wire.TokenID]*soft{},
		senders:   map[key]SenderMachine{},
		finished:  map[key]SenderMachine{},
		receivers: map[key]ReceiverMachine{},
		ids:       *rand.NewPCG(cfg.Seed, h.Sum64()),
	}, nil
}

// newPassID draws a pass's random id; 0 is kept for "none".
func (e *Endpoint) newPassID() uint64 {
	for {
		if id := e.ids.Uint64(); id != 0 {
			return id
		}
	}
}

// Config returns the endpoint's configuration.
func (e *Endpoint) Config() Config { return e.cfg }

// Exchange returns the variant of the passing operation the endpoint runs.
func (e *Endpoint) Exchange() Exchange { return e.exchange }

// Effects returns and clears the effects produced since the last call.
func (e *Endpoint) Effects() []Effect {
	f := e.effects
	e.effects = nil
	return f
}

func (e *Endpoint) emit(f Effect) { e.effects = append(e.effects, f) }

// Holds reports whether this agent holds t. A token is held from its
// acquisition until the Ack of a pass (002 §3), so at most one agent holds
// a given token at any time.
func (e *Endpoint) Holds(t wire.TokenID) bool {
	_, ok := e.held[t]
	return ok
}

// Held returns the tokens held, in id order.
func (e *Endpoint) Held() []wire.TokenID {
	ts := make([]wire.TokenID, 0, len(e.held))
	for t := range e.held {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, wire.TokenID.Compare)
	return ts
}

// Passing reports whether a pass of t is waiting for its Ack.
func (e *Endpoint) Passing(t wire.TokenID) bool {
	for k, s := range e.senders {
		if k.token == t && s.Status() == AwaitAck {
			return true
		}
	}
	return false
}

// Knows reports whether this agent has soft state for t: it has held,
// passed or been offered t before. A Move for a token it does not know
// introduces a new token (a join or a regeneration, 002 §3.2).
func (e *Endpoint) Knows(t wire.TokenID) bool { return e.soft[t] != nil }

func (e *Endpoint) softOf(t wire.TokenID) *soft {
	s := e.soft[t]
	if s == nil {
		s = &soft{}
		e.soft[t] = s
	}
	return s
}

// Hold makes this agent the holder of t without a pass: a token it
// generated (session 0) or one it starts a join with (002 §3.2).
func (e *Endpoint) Hold(t wire.TokenID, session uint64) error {
	if _, ok := e.held[t]; ok {
		return fmt.Errorf("token %v is already held", t)
	}
	e.held[t] = session
	e.emit(Effect{Kind: TokenAcquired, Token: t, Session: session, Reason: "hold"})
	return nil
}

// Discard gives up a held token that is not being passed (the sandwich
// rule, 002 §3.2).
func (e *Endpoint) Discard(t wire.TokenID, reason string) error {
	if _, ok := e.held[t]; !ok {
		return fmt.Errorf("token %v is not held", t)
	}
	if e.Passing(t) {
		return fmt.Errorf("token %v is being passed", t)
	}
	delete(e.held, t)
	e.emit(Effect{Kind: TokenReleased, Token: t, Reason: reason})
	return nil
}

// Pass starts passing the held token t to peer. The session id is the one
// in which t was received, plus one (002 §3).
func (e *Endpoint) Pass(now time.Time, t wire.TokenID, peer string) error {
	recv, ok := e.held[t]
	if !ok {
		return fmt.Errorf("token %v is not held", t)
	}
	if peer == e.self {
		return fmt.Errorf("cannot pass token %v to self", t)
	}
	if e.Passing(t) {
		return fmt.Errorf("token %v is already being passed", t)
	}
	session := recv + 1
	k := key{t, session, peer}
	var id uint64
	if e.exchange.PassIDs() {
		id = e.newPassID()
	}
	s, out := e.exchange.NewSender(&e.cfg, now, id)
	e.senders[k] = s
	delete(e.finished, k) // a failed attempt to the same peer: this one replaces it
	sf := e.softOf(t)
	if session >= sf.last {
		sf.last, sf.lastPeer, sf.lastSent = session, peer, true
	}
	e.emit(Effect{Kind: PassStarted, Token: t, Session: session, Peer: peer})
	e.apply(now, k, out, true)
	if e.cfg.Fault == FaultSkipAckCheck {
		e.apply(now, k, s.skipAck(now), true)
	}
	return nil
}

func (e *Endpoint) reject(m Msg, reason string) {
	e.emit(Effect{Kind: Rejected, Msg: m, Token: m.Token, Session: m.Session, Peer: m.From, Reason: reason})
}

// Deliver handles an authenticated datagram addressed to this agent.
func (e *Endpoint) Deliver(now time.Time, m Msg) {
	if m.To != e.self || m.From == e.self {
		e.reject(m, "misaddressed")
		return
	}
	k := key{m.Token, m.Session, m.From}
	switch m.Type {
	case wire.Ack, wire.EarlyStop:
		s := e.senders[k]
		if s == nil {
			s = e.finished[k]
		}
		if s == nil {
			e.reject(m, "no-session")
			return
		}
		out := s.Step(now, m)
		if out.Ignored != "" {
			e.reject(m, out.Ignored)
			return
		}
		e.emit(Effect{Kind: Received, Msg: m, Token: m.Token, Session: m.Session, Peer: m.From})
		e.apply(now, k, out, true)
	case wire.Move, wire.Commit:
		r := e.receivers[k]
		if r == nil {
			if reason := e.admit(m); reason != "" {
				e.reject(m, reason)
				return
			}
			if m.Type == wire.Commit {
				e.reject(m, "no-session")
				return
			}
			e.emit(Effect{Kind: Received, Msg: m, Token: m.Token, Session: m.Session, Peer: m.From})
			e.openReceiver(now, k, m)
			return
		}
		if m.Type == wire.Move && !r.Waits(m.PassID) && e.soft[m.Token].seenPass(m) {
			// A late copy of a pass whose wait ended here (004 §4): it
			// would add a pass whose Commit cannot come.
			e.reject(m, "other-pass")
			return
		}
		out := r.Step(now, m)
		if out.Ignored != "" {
			e.reject(m, out.Ignored)
			return
		}
		if m.Type == wire.Move {
			e.soft[m.Token].sawPass(m)
		}
		e.emit(Effect{Kind: Received, Msg: m, Token: m.Token, Session: m.Session, Peer: m.From})
		e.apply(now, k, out, false)
	default:
		e.reject(m, "bad-type")
	}
}

// admit checks a Move or Commit that matches no receiver against the soft
// state; it returns the rejection reason, or "" to admit a new session.
func (e *Endpoint) admit(m Msg) string {
	sf := e.soft[m.Token]
	if sf != nil && m.Session <= sf.completed && sf.completed > 0 {
		// At or below the session in which we last acquired the token: a
		// replay or a late copy (002 §3.1).
		return "stale-session"
	}
	if _, ok := e.held[m.Token]; ok {
		return "token-held"
	}
	if sf == nil {
		return ""
	}
	if m.Type == wire.Move && sf.seenPass(m) {
		// A late copy of a pass whose wait ended here (004 §4).
		return "other-pass"
	}
	switch {
	case m.Session < sf.last:
		return "stale-session"
	case m.Session == sf.last:
		// Only the sender of a session we gave up on may start it again.
		if sf.lastSent || sf.lastPeer != m.From {
			return "session-conflict"
		}
	}
	return ""
}

func (e *Endpoint) openReceiver(now time.Time, k key, move Msg) {
	// A newer session of the token makes older receivers moot: their
	// senders passed the token elsewhere. One still waiting for its Commit
	// reports the failure it detected (Receiver.Supersede), in key order
	// so that the effects do not depend on map order.
	var moot []key
	for ok := range e.receivers {
		if ok.token == k.token && ok.session < k.session {
			moot = append(moot, ok)
		}
	}
	slices.SortFunc(moot, key.compare)
	for _, ok := range moot {
		e.apply(now, ok, e.receivers[ok].Supersede(), false)
	}
	sf := e.softOf(k.token)
	if sf.last != k.session || sf.lastPeer != k.peer || sf.lastSent {
		sf.passIDs = nil
	}
	sf.last, sf.lastPeer, sf.lastSent = k.session, k.peer, false
	sf.sawPass(move)
	r, out := e.exchange.NewReceiver(&e.cfg, now, move)
	e.receivers[k] = r
	e.apply(now, k, out, false)
}

// apply carries out a machine's output, emitting effects in the order the
// package doc requires.
func (e *Endpoint) apply(now time.Time, k key, out Output, sender bool) {
	switch out.Outcome {
	case Succeeded:
		delete(e.held, k.token)
		e.emit(Effect{Kind: TokenReleased, Token: k.token, Session: k.session, Peer: k.peer, Reason: "passed"})
		e.emit(Effect{Kind: PassSucceeded, Token: k.token, Session: k.session, Peer: k.peer})
	case Acquired:
		e.held[k.token] = k.session
		sf := e.softOf(k.token)
		sf.completed = max(sf.completed, k.session)
		e.emit(Effect{Kind: TokenAcquired, Token: k.token, Session: k.session, Peer: k.peer, Reason: "commit", Late: out.Late})
	}
	if out.Send != nil {
		m := Msg{Type: out.Send.Type, From: e.self, To: k.peer, Token: k.token, Session: k.session,
			PassID: out.Send.PassID, Cert: out.Send.WithCert, Attempt: out.Send.Attempt}
		e.emit(Effect{Kind: SendMsg, Msg: m, Token: k.token, Session: k.session, Peer: k.peer})
	}
	switch out.Outcome {
	case Completed, Succeeded:
		if out.Outcome == Succeeded && out.Reason == "" {
			break // the sender goes on committing (4-way)
		}
		s := e.senders[k]
		e.emit(Effect{Kind: PassCompleted, Token: k.token, Session: k.session, Peer: k.peer, Reason: out.Reason, Latency: now.Sub(s.Started())})
		e.finish(now, k)
	case Failed:
		e.emit(Effect{Kind: PassFailed, Token: k.token, Session: k.session, Peer: k.peer, Reason: out.Reason})
		if sender {
			// Keep the failed sender a while so late Acks are refused by name.
			e.finish(now, k)
		}
	case Acquired:
		delete(e.receivers, k)
	case Expired:
		delete(e.receivers, k)
	}
	if !sender {
		if r := e.receivers[k]; r != nil && r.Status() == ReceiverExpired {
			delete(e.receivers, k)
		}
	}
}

func (e *Endpoint) finish(now time.Time, k key) {
	s := e.senders[k]
	delete(e.senders, k)
	e.finished[k] = s
	e.gcQueue = append(e.gcQueue, gcEntry{k, s, now.Add(e.cfg.gcDelay())})
}

// Deadline returns when Tick must be called next, if ever. Its cost is in
// the number of passes in progress, not in those remembered.
func (e *Endpoint) Deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	consider := func(t time.Time, has bool) {
		if has && (!ok || t.Before(d)) {
			d, ok = t, true
		}
	}
	for _, s := range e.senders {
		consider(s.Deadline())
	}
	for _, r := range e.receivers {
		consider(r.Deadline())
	}
	if len(e.gcQueue) > 0 {
		consider(e.gcQueue[0].at, true)
	}
	return d, ok
}

// Tick fires every timer whose deadline has passed, in a deterministic
// order (by token, session, peer).
func (e *Endpoint) Tick(now time.Time) {
	var due []key
	for k, s := range e.senders {
		if d, ok := s.Deadline(); ok && !now.Before(d) {
			due = append(due, k)
		}
	}
	nsend := len(due)
	for k, r := range e.receivers {
		if d, ok := r.Deadline(); ok && !now.Before(d) {
			due = append(due, k)
		}
	}
	slices.SortFunc(due[:nsend], key.compare)
	slices.SortFunc(due[nsend:], key.compare)
	for i, k := range due {
		if i < nsend {
			if s := e.senders[k]; s != nil {
				e.apply(now, k, s.Tick(now), true)
			}
		} else if r := e.receivers[k]; r != nil {
			e.apply(now, k, r.Tick(now), false)
		}
	}
	for len(e.gcQueue) > 0 && !now.Before(e.gcQueue[0].at) {
		g := e.gcQueue[0]
		e.gcQueue = e.gcQueue[1:]
		if e.finished[g.k] == g.s {
			delete(e.finished, g.k)
		}
	}
}

// Sessions returns the number of sender and receiver machines alive, and of
// finished passes remembered.
func (e *Endpoint) Sessions() (senders, receivers, finished int) {
	return len(e.senders), len(e.receivers), len(e.finished)
}
