// Package server is the FTN token server (seed 001) as a pure state
// machine: no I/O, no clock. Its driver calls Step with every
// authenticated message, Tick at a fixed interval, and after each call
// sends the messages and logs the events that Ready returns, in that
// order: events first, so that a log that survives a crash never shows a
// message without what led to it.
//
// # Roles
//
// Every server runs the same machine; one of them is the leader. The
// leader keeps the global state (001 "Global state": the leader, each
// server's state DOWN/BOOTING/READY with its incarnation, the client
// list) and broadcasts it every HeartbeatTicks; the broadcast is its
// heartbeat. Servers send the leader their heartbeats; the leader
// declares DOWN a server silent for ServerDownTicks and drops a client
// silent for ClientDownTicks.
//
// Election (001 says only "elect a new leader"; this is how): a server
// that hears no broadcast for ElectionTicks (randomised up to twice that,
// from the seeded generator) asks for pre-votes for the next term, and
// only with a majority of them starts the election in that term; it
// becomes leader with the votes of a majority of the configured servers.
// The pre-vote (etcd raft's) keeps a server cut off from the others
// from raising its term, which would make it deaf to the leader's
// broadcasts when the partition heals.
// A voter grants one vote per term, only to a candidate whose latest
// global state is at least as new as its own (so the new leader inherits
// the client list and the servers' states) and only if it has heard no
// leader for ElectionTicks (so that a server cut off from the others
// cannot depose a working leader). A majority means at most one leader
// per term, and a minority side of a partition elects none. A leader
// that has not heard a majority of servers for ServerDownTicks steps
// down.
//
// # Serving, and leases
//
// A server answers client requests only when it is READY, has no client
// query round in progress, and has heard the leader within LeaseTicks
// (the leader: while it leads). LeaseTicks < ServerDownTicks, so a server
// cut off from the leader stops serving before the leader can declare it
// DOWN and let others reclaim its tokens: beyond the seed, which relies
// on the clients alone to discard late messages (001 "When a Server
// Crashes"); both guards are kept. Nor does a server serve while it holds
// a global state that moves names (a server newly DOWN or not, or a new
// life) that it does not yet know a majority of servers holds: see
// "Fencing numbers" and Server.act.
//
// # Fencing numbers (beyond the seed, issue 14)
//
// Every grant carries a Fence (Epoch, Counter). A server creates its
// entry for a token name, receives it by transfer, or reclaims it from
// client reports, with Epoch = the version of the global state it holds
// at that moment; each grant increments Counter. Responsibility for a
// name passes from server A to server B only through a global state
// version V in which A is DOWN or B BOOTING, and A stops creating entries
// for the name once it holds V. No server acts on V (queries the
// clients, hands off or serves names) before a majority of servers holds
// V (Server.act): V is then in the global state of every later leader,
// so every version A can hold is either lower than V or says A is DOWN
// (or B BOOTING), and every entry A creates for the name has a lower
// epoch than B's. Reported or transferred fences raise the entry's fence
// (never lower it). Hence the guarantee: for each name, the grants made
// by the servers responsible for it, in the order of the global states
// that made them responsible, carry strictly increasing fences; and a
// grant made after losing responsibility (by a server falsely declared
// DOWN, 001's late message) carries a fence lower than every grant of its
// successor. A resource that keeps the highest fence it accepted for a
// name and refuses lower ones never accepts a stale holder after its
// successor, including the case 001 calls unavoidable: a client falsely
// declared down, whose token is granted again with a higher Counter.
// What fences do not give: a resource that never saw the successor's
// fence cannot know the stale one is stale. The servers keep nothing on
// disk: if servers of the majority that held V restart before the next
// election (forgetting V), a later leader may lack V, and the guarantee
// does not hold.
//
// # Fresh requests
//
// 001 repeats unacknowledged requests and asks servers to "guard against
// late messages"; a network that duplicates and delays, or an attacker
// who replays a captured datagram (its signature stays valid for its
// address pair), delivers old requests. A request is named by the
// client's ID (unique per registration: the leader's term and count)
// and its request number, which increases within the registration; the
// client has at most one request outstanding per name. So for a client
// and a name, only the newest request can still be awaited, and the
// server applies a request only if it is at least as new as every one it
// has seen from that client for that name (token.marks). The newest one
// again is a copy: an acquire granted is answered with its grant, a
// write already applied is answered and not applied again (another
// holder may have written since). Older ones are dropped with a "stale"
// event. A newer acquire from a client the server lists as holder ends
// that hold (the client does not know of it: it never asks for a name it
// holds) and is served with a new fence.
//
// The marks of a name go with it in transfers (TokenState.Marks). A
// server that takes names over by a query round (boot, a server DOWN) has
// not seen the requests sent to their previous server, so each client's
// answer carries its newest request number and the requests it has
// outstanding (QueryReply Req, Marks): anything up to that number that
// was not outstanding had completed, and is refused (floors). A request
// the client sends after answering goes to this server or a later one,
// since the client adopts the query's global state before it answers.
// A leader change moves no names by itself; the leader's global state
// carries no request numbers (the client list keeps the IDs, and the
// round covers what moves). A client dropped from the list loses its
// marks with its ID: its requests are refused as "ID invalid".
package server

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"tokenbed/agent/ftn/msg"
)

// Config of a server. Durations are in ticks.
type Config struct {
	Self    int        // this server's index in Servers
	Servers []msg.Peer // the shared configuration file's list (001 "Configuration")
	// Inc is this life's incarnation: larger than any previous life's
	// (the driver uses its start time in ns).
	Inc  uint64
	Seed uint64 // randomises election timeouts

	HeartbeatTicks  int // broadcast and heartbeat interval (default 1)
	ElectionTicks   int // no broadcast for this long: elect (default 10)
	LeaseTicks      int // no broadcast for this long: stop serving (default 6)
	ServerDownTicks int // leader: a server silent this long is DOWN (default 10)
	// ClientDownTicks: the leader drops a client silent this long
	// (default 60, 20 client heartbeats: 001 "When a Client Crashes"
	// asks for conservative criteria, since a client dropped while alive
	// still believes it holds its tokens).
	ClientDownTicks int
	// RetryTicks: resend an unacknowledged transfer, or a query round's
	// unanswered queries, this long after their last send (default 2).
	RetryTicks int

	// SkipRecoveryQuery makes a deliberately broken server for tests: it
	// serves tokens reclaimed from a DOWN server without querying the
	// clients first (the rule of 001 "Receiving global state" it breaks).
	SkipRecoveryQuery bool
	// SkipFreshness makes a deliberately broken server for tests and
	// benchmarks: it applies every request, however old (the guard
	// against late messages of 001 "Failure model" it breaks).
	SkipFreshness bool
}

func (c *Config) validate() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.HeartbeatTicks, 1)
	def(&c.ElectionTicks, 10)
	def(&c.LeaseTicks, 6)
	def(&c.ServerDownTicks, 10)
	def(&c.ClientDownTicks, 60)
	def(&c.RetryTicks, 2)
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("servers: empty"))
	}
	if c.Self < 0 || c.Self >= len(c.Servers) {
		errs = append(errs, fmt.Errorf("self: %d not in 0..%d", c.Self, len(c.Servers)-1))
	}
	names := map[string]bool{}
	for i, p := range c.Servers {
		if p.Name == "" || names[p.Name] {
			errs = append(errs, fmt.Errorf("servers[%d].name: empty or repeated %q", i, p.Name))
		}
		names[p.Name] = true
	}
	if c.Inc == 0 {
		errs = append(errs, errors.New("inc: must be > 0"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"heartbeat_ticks", c.HeartbeatTicks}, {"election_ticks", c.ElectionTicks}, {"lease_ticks", c.LeaseTicks},
		{"server_down_ticks", c.ServerDownTicks}, {"client_down_ticks", c.ClientDownTicks}, {"retry_ticks", c.RetryTicks}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d < 0", f.name, f.v))
		}
	}
	if c.LeaseTicks >= c.ServerDownTicks {
		errs = append(errs, fmt.Errorf("lease_ticks: %d must be below server_down_ticks %d", c.LeaseTicks, c.ServerDownTicks))
	}
	if c.HeartbeatTicks >= c.LeaseTicks {
		errs = append(errs, fmt.Errorf("heartbeat_ticks: %d must be below lease_ticks %d", c.HeartbeatTicks, c.LeaseTicks))
	}
	return errors.Join(errs...)
}

type phase uint8

const (
	initial phase = iota // waiting for a leader to accept our BOOTING
	booting
	ready
)

type holder struct {
	client uint64
	mode   msg.Mode
	fence  msg.Fence
	req    uint64
}

type token struct {
	fence   msg.Fence // the last one granted (Counter 0: none yet in this epoch)
	data    []byte
	holders []holder
	queue   []msg.Waiter
	marks   map[uint64]mark // per client, its newest request for the name
}

// mark is the newest request of a client for a name (see "Fresh
// requests"); done: applied, so a copy is answered, not applied again.
type mark struct {
	req  uint64
	done bool
}

type transfer struct {
	inc     uint64 // the receiver's incarnation
	version uint64
	tokens  []msg.TokenState
	acked   bool
	dirty   bool  // not sent since it changed
	sentAt  int64 // tick of the last send
}

type round struct {
	version uint64
	pending map[uint64]bool
	sentAt  int64
}

// Server is one token server.
type Server struct {
	cfg Config
	rnd *rand.Rand
	n   int

	tick     int64
	term     uint64
	votedFor int
	votes    map[int]bool
	pre      bool // the votes counted are pre-votes for term+1
	leader   int
	// lastState is the tick of the last accepted broadcast; deadline the
	// tick at which to start an election.
	lastState int64
	deadline  int64

	g     msg.Global
	inc   uint64
	phase phase
	// committed is the highest version known to be held by a majority
	// (see "Acting on a global state"); moveAt the version of the last
	// global state that moved responsibility for names; pendingRound a
	// client query round owed once moveAt is committed.
	committed    uint64
	moveAt       uint64
	pendingRound bool

	// leader only
	heard       []int64
	acked       []uint64 // per server, the highest version of this term it acknowledged
	heardClient map[uint64]int64
	regs        map[regKey]uint64
	nextClient  uint64

	waitTransfer map[int]uint64 // booting: servers (and their incarnation) whose transfer we await
	round        *round
	tokens       map[string]*token
	outgoing     map[int]*transfer
	// floors: per client, the newest request number it had issued when
	// it answered this server's query round (see "Fresh requests").
	floors map[uint64]uint64

	out    []msg.Out
	events []msg.Event
}

type regKey struct {
	name  string
	nonce uint64
}

// New returns a server that has just started: it knows no leader and
// holds nothing.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		rnd:      rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Self))),
		n:        len(cfg.Servers),
		votedFor: -1,
		leader:   -1,
		inc:      cfg.Inc,
		tokens:   map[string]*token{},
		outgoing: map[int]*transfer{},
		floors:   map[uint64]uint64{},
	}
	s.g = msg.Global{Leader: -1, Servers: make([]msg.ServerState, s.n)}
	s.resetElection()
	return s, nil
}

// Ready returns, and forgets, what the server did since the last call:
// events to log, then messages to send.
func (s *Server) Ready() ([]msg.Out, []msg.Event) {
	o, e := s.out, s.events
	s.out, s.events = nil, nil
	return o, e
}

// Leader is the leader this server follows (-1: none).
func (s *Server) Leader() int { return s.leader }

// IsLeader reports whether this server leads.
func (s *Server) IsLeader() bool { return s.leader == s.cfg.Self }

// Global is the latest global state this server holds.
func (s *Server) Global() msg.Global { return s.g.Clone() }

// Term is the current election term.
func (s *Server) Term() uint64 { return s.term }

// Inc is the current incarnation.
func (s *Server) Inc() uint64 { return s.inc }

// State is the state this server declares.
func (s *Server) State() msg.State {
	if s.phase == ready {
		return msg.Ready
	}
	return msg.Booting
}

// Serving reports whether the server answers client requests now.
func (s *Server) Serving() bool {
	if s.phase != ready || s.round != nil || s.pendingRound || s.leader < 0 || !s.settled() {
		return false
	}
	return s.IsLeader() || s.tick-s.lastState <= int64(s.cfg.LeaseTicks)
}

// Holders lists a token's holders as this server knows them.
func (s *Server) Holders(name string) []msg.Hold {
	t := s.tokens[name]
	if t == nil {
		return nil
	}
	var hs []msg.Hold
	for _, h := range t.holders {
		hs = append(hs, msg.Hold{Client: h.client, Name: name, Mode: h.mode, Fence: h.fence, Req: h.req})
	}
	return hs
}

// Tokens lists the names this server has entries for, sorted.
func (s *Server) Tokens() []string {
	var ns []string
	for n := range s.tokens {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func (s *Server) send(to int, m msg.Msg) {
	s.out = append(s.out, msg.Out{To: s.cfg.Servers[to].Addr, Msg: m})
}

func (s *Server) event(e msg.Event) { s.events = append(s.events, e) }

func (s *Server) resetElection() {
	e := int64(s.cfg.ElectionTicks)
	s.deadline = s.tick + e + s.rnd.Int64N(e)
}

// Tick advances the server's clock by one tick.
func (s *Server) Tick() {
	s.tick++
	hb := s.tick%int64(s.cfg.HeartbeatTicks) == 0
	if s.IsLeader() {
		s.leaderTick(hb)
	} else {
		if s.tick >= s.deadline {
			s.preCampaign()
		}
		if hb {
			s.heartbeat()
		}
	}
	s.retry()
}

// Step handles one message from an authenticated sender.
func (s *Server) Step(from msg.Peer, m msg.Msg) {
	if m.Kind.FromServer() {
		i := s.serverIndex(from)
		if i < 0 || i == s.cfg.Self {
			s.event(msg.Event{Kind: "rejected", Detail: "not a server: " + from.Name})
			return
		}
		s.stepServer(i, m)
		return
	}
	switch m.Kind {
	case msg.Register:
		s.register(from, m)
	case msg.ClientHeartbeat, msg.Close:
		s.clientHeartbeat(from, m)
	case msg.Acquire, msg.Release, msg.SetData, msg.GetData:
		s.request(from, m)
	case msg.QueryReply:
		s.queryReply(from, m)
	}
}

func (s *Server) serverIndex(p msg.Peer) int {
	for i, q := range s.cfg.Servers {
		if q.Name == p.Name {
			return i
		}
	}
	return -1
}

func (s *Server) stepServer(i int, m msg.Msg) {
	if m.Term > s.term && (m.Kind == msg.StateMsg || m.Kind == msg.Heartbeat || (m.Kind == msg.VoteResp && !m.Granted)) {
		s.newTerm(m.Term)
	}
	switch m.Kind {
	case msg.VoteReq:
		s.voteReq(i, m)
	case msg.VoteResp:
		switch {
		case m.Pre && s.pre && m.Granted && m.Term == s.term+1:
			s.votes[i] = true
			if len(s.votes) > s.n/2 {
				s.campaign()
			}
		case !m.Pre && !s.pre && m.Term == s.term && m.Granted && s.leader < 0 && s.votedFor == s.cfg.Self:
			s.votes[i] = true
			if len(s.votes) > s.n/2 {
				s.becomeLeader()
			}
		}
	case msg.StateMsg:
		if m.Global == nil || len(m.Global.Servers) != s.n || m.Global.Leader != i {
			// A server with another list: the configuration file is not
			// the shared one (001 "Configuration").
			s.event(msg.Event{Kind: "rejected", Server: i, Detail: "global state of another server list"})
			return
		}
		if m.Term < s.term {
			return
		}
		known := s.leader == i
		s.leader = i
		s.lastState = s.tick
		s.resetElection()
		newer := m.Global.Version > s.g.Version
		if newer {
			s.adopt(m.Global.Clone())
		}
		if !known {
			s.event(msg.Event{Kind: "follow", Server: i, Version: s.g.Version})
		}
		if !known || newer {
			s.heartbeat() // acknowledges the version at once
		}
		if m.Commit > s.committed && m.Commit <= s.g.Version {
			s.committed = m.Commit
			s.act()
		}
	case msg.Heartbeat:
		if s.IsLeader() && m.Term == s.term {
			s.accept(i, m.State, m.Inc)
			s.ack(i, m.Version)
		}
	case msg.Transfer:
		s.receiveTransfer(i, m)
	case msg.TransferAck:
		if t := s.outgoing[i]; t != nil && t.version == m.Version && t.inc == m.Inc {
			t.acked = true
		}
	}
}

func (s *Server) newTerm(t uint64) {
	if s.IsLeader() {
		s.event(msg.Event{Kind: "step_down", Detail: fmt.Sprintf("term %d seen", t)})
	}
	s.term = t
	s.votedFor = -1
	s.leader = -1
}

// preCampaign asks whether a majority would vote for us in the next
// term, without changing any term.
func (s *Server) preCampaign() {
	s.pre = true
	s.votes = map[int]bool{s.cfg.Self: true}
	s.leader = -1
	s.resetElection()
	if len(s.votes) > s.n/2 {
		s.campaign()
		return
	}
	for i := range s.n {
		if i != s.cfg.Self {
			s.send(i, msg.Msg{Kind: msg.VoteReq, Term: s.term + 1, Version: s.g.Version, Pre: true})
		}
	}
}

func (s *Server) campaign() {
	s.pre = false
	s.term++
	s.votedFor = s.cfg.Self
	s.votes = map[int]bool{s.cfg.Self: true}
	s.leader = -1
	s.resetElection()
	s.event(msg.Event{Kind: "campaign", Detail: fmt.Sprintf("term=%d", s.term)})
	if len(s.votes) > s.n/2 {
		s.becomeLeader()
		return
	}
	for i := range s.n {
		if i != s.cfg.Self {
			s.send(i, msg.Msg{Kind: msg.VoteReq, Term: s.term, Version: s.g.Version})
		}
	}
}

func (s *Server) voteReq(i int, m msg.Msg) {
	recent := s.leader >= 0 && s.tick-s.lastState < int64(s.cfg.ElectionTicks)
	if m.Pre {
		grant := m.Term > s.term && !recent && !s.IsLeader() && m.Version >= s.g.Version
		t := m.Term
		if !grant {
			t = s.term
		}
		s.send(i, msg.Msg{Kind: msg.VoteResp, Term: t, Granted: grant, Pre: true})
		return
	}
	if m.Term < s.term || recent || s.IsLeader() {
		s.send(i, msg.Msg{Kind: msg.VoteResp, Term: s.term})
		return
	}
	if m.Term > s.term {
		s.newTerm(m.Term)
	}
	grant := (s.votedFor < 0 || s.votedFor == i) && m.Version >= s.g.Version
	if grant {
		s.votedFor = i
		s.resetElection()
	}
	s.send(i, msg.Msg{Kind: msg.VoteResp, Term: s.term, Granted: grant})
}

func (s *Server) becomeLeader() {
	s.leader = s.cfg.Self
	s.heard = make([]int64, s.n)
	for i := range s.heard {
		s.heard[i] = s.tick
	}
	s.acked = make([]uint64, s.n)
	// A grace period for every listed client: it may have been talking to
	// the old leader.
	s.heardClient = map[uint64]int64{}
	for _, c := range s.g.Clients {
		s.heardClient[c.ID] = s.tick
	}
	s.regs = map[regKey]uint64{}
	s.nextClient = 1
	g := s.g.Clone()
	g.Term = s.term
	g.Leader = s.cfg.Self
	g.Version = s.term << 32
	s.event(msg.Event{Kind: "leader", Detail: fmt.Sprintf("term=%d", s.term)})
	s.publish(g)
	s.accept(s.cfg.Self, s.State(), s.inc)
}

// publish makes g (with the next version) the global state and
// broadcasts it: leader only.
func (s *Server) publish(g msg.Global) {
	g.Version = max(g.Version, s.g.Version) + 1
	s.adopt(g)
	s.ack(s.cfg.Self, s.g.Version)
	s.broadcast()
}

// ack records that server i holds version v (leader only). Only versions
// of this term count: a follower may still hold one of a deposed leader's
// that this leader never had (etcd raft commits only its own term's
// entries by counting, for the same reason).
func (s *Server) ack(i int, v uint64) {
	if v < s.term<<32 || v <= s.acked[i] {
		return
	}
	s.acked[i] = v
	a := slices.Clone(s.acked)
	slices.Sort(a)
	if c := a[s.n-(s.n/2+1)]; c > s.committed {
		was := s.settled()
		s.committed = c
		if !was {
			s.act()
		}
	}
}

// settled reports whether the last global state that moved
// responsibility for names is known to be held by a majority.
func (s *Server) settled() bool { return s.committed >= s.moveAt }

// moves reports whether going from old to ng may move responsibility
// for a name: a server became or ceased to be DOWN, or has a new life
// (owed a transfer), or ng comes from another term's leader, whose
// history may not contain old (a deposed leader's versions that no
// majority held).
func moves(old, ng msg.Global) bool {
	if old.Version>>32 != ng.Version>>32 || len(old.Servers) != len(ng.Servers) {
		return true
	}
	for i, st := range ng.Servers {
		was := old.Servers[i]
		if (st.State == msg.Down) != (was.State == msg.Down) || st.Inc != was.Inc {
			return true
		}
	}
	return false
}

// act does what a global state that moved responsibility asks of this
// server (hand off names, query the clients, send transfers), once a
// majority holds it; until then the server serves nothing.
//
// Why (issue 14's fencing guarantee, see the package comment; 001
// "Receiving global state" and "When a Server Crashes" let survivors
// serve a DOWN server's names once they have queried the clients, and
// say nothing of a leader that is itself cut off): a leader cut off from the majority may still count a server
// it heard less than ServerDownTicks ago, declare another server DOWN,
// and serve that server's names with fences of its new version. If the
// majority never held that version, its next leader does not have it,
// and the server declared DOWN goes on granting the same names with
// fences of its older epoch: lower than the fence already issued, though
// issued later (a netns run of ftn-leader-partition did exactly this).
// Waiting for a majority makes such a fence impossible to issue: a
// version a majority held is in the global state of every later leader
// (a vote goes only to a candidate whose version is at least the
// voter's, and one voter of every majority held it), so every server
// that learns of a later version learns it is DOWN, and every entry it
// created has a lower epoch than those of its successors. The argument
// assumes the servers of that majority do not restart meanwhile (a
// restarted server has forgotten the versions it held).
func (s *Server) act() {
	if s.phase == initial || !s.settled() {
		return
	}
	s.handOff()
	if s.pendingRound {
		s.pendingRound = false
		s.startRound()
	}
	s.flushTransfers()
	s.checkBoot()
	for _, name := range s.Tokens() {
		s.grant(name)
	}
}

func (s *Server) broadcast() {
	for i := range s.n {
		if i != s.cfg.Self {
			g := s.g.Clone()
			s.send(i, msg.Msg{Kind: msg.StateMsg, Term: s.term, Global: &g, Commit: s.committed})
		}
	}
}

// leaderTick: the leader's periodic duties (001 "When a Server Crashes",
// "When a Client Crashes").
func (s *Server) leaderTick(hb bool) {
	s.accept(s.cfg.Self, s.State(), s.inc)
	if !s.IsLeader() {
		return
	}
	silent := func(i int) bool { return s.tick-s.heard[i] > int64(s.cfg.ServerDownTicks) }
	heard := 1
	for i := range s.n {
		if i != s.cfg.Self && !silent(i) {
			heard++
		}
	}
	if heard <= s.n/2 {
		// Step down before declaring anyone DOWN: a leader cut off from
		// the majority would declare the majority DOWN, and its side's
		// servers would query the clients and serve the majority's
		// tokens until their leases ran out. Leases and the majority's
		// own recovery queries keep that safe (the swarm finds no
		// violation either way), but it moves tokens for nothing.
		s.event(msg.Event{Kind: "step_down", Detail: "no majority"})
		s.leader = -1
		s.resetElection()
		return
	}
	g := s.g.Clone()
	changed := false
	for i := range s.n {
		if i != s.cfg.Self && silent(i) && g.Servers[i].State != msg.Down {
			g.Servers[i].State = msg.Down
			changed = true
			s.event(msg.Event{Kind: "declare_down", Server: i})
		}
	}
	kept := g.Clients[:0]
	for _, c := range g.Clients {
		if s.tick-s.heardClient[c.ID] > int64(s.cfg.ClientDownTicks) {
			s.event(msg.Event{Kind: "drop_client", Client: c.ID})
			changed = true
			continue
		}
		kept = append(kept, c)
	}
	g.Clients = kept
	if changed {
		s.publish(g)
	} else if hb {
		s.broadcast()
	}
}

// accept is the leader taking server i's heartbeat (001 "Server
// states": DOWN→BOOTING→READY is the server's own doing, READY→DOWN the
// leader's).
func (s *Server) accept(i int, st msg.State, inc uint64) {
	cur := s.g.Servers[i]
	if inc < cur.Inc {
		return // a previous life's late message
	}
	s.heard[i] = s.tick
	var next msg.ServerState
	switch {
	case inc > cur.Inc && st == msg.Booting:
		next = msg.ServerState{State: msg.Booting, Inc: inc}
	case inc == cur.Inc && cur.State == msg.Booting && st == msg.Ready:
		next = msg.ServerState{State: msg.Ready, Inc: inc}
	default:
		// Same life: READY stays READY, DOWN stays DOWN until the server
		// reinitialises with a new incarnation. A new life claiming READY
		// must boot first.
		return
	}
	g := s.g.Clone()
	g.Servers[i] = next
	s.publish(g)
}

// heartbeat sends this server's state to the leader.
func (s *Server) heartbeat() {
	if s.leader < 0 {
		return
	}
	if s.IsLeader() {
		s.accept(s.cfg.Self, s.State(), s.inc)
		return
	}
	s.send(s.leader, msg.Msg{Kind: msg.Heartbeat, Term: s.term, State: s.State(), Inc: s.inc, Version: s.g.Version})
}

// adopt makes ng the global state and reacts to what changed (001
// "Receiving global state").
func (s *Server) adopt(ng msg.Global) {
	old := s.g
	s.g = ng
	if moves(old, ng) {
		s.moveAt = ng.Version
	}
	me := ng.Servers[s.cfg.Self]
	if s.phase != initial && me.Inc == s.inc && me.State == msg.Down {
		s.reinit()
		return
	}
	if s.phase == initial {
		if me.Inc == s.inc && me.State == msg.Booting {
			s.startBoot()
		}
		return
	}
	downs := false
	for i, st := range ng.Servers {
		if i == s.cfg.Self {
			continue
		}
		was := old.Servers[i]
		if st.State == msg.Down && (was.State != msg.Down || was.Inc != st.Inc) {
			downs = true
			s.event(msg.Event{Kind: "server_down", Server: i, Version: ng.Version})
		}
		if w, ok := s.waitTransfer[i]; ok && (st.State == msg.Down || st.Inc != w) {
			delete(s.waitTransfer, i)
		}
		if t := s.outgoing[i]; t != nil && (st.State == msg.Down || st.Inc != t.inc) {
			delete(s.outgoing, i)
		}
		if st.State == msg.Booting && (s.outgoing[i] == nil || s.outgoing[i].inc != st.Inc) {
			// Every active server sends a BOOTING one a transfer, empty
			// or not: it waits for all of them.
			s.outgoing[i] = &transfer{inc: st.Inc, version: ng.Version, dirty: true}
		}
	}
	// Clients gone from the list lose their tokens.
	var gone []uint64
	for _, c := range old.Clients {
		if _, ok := ng.Client(c.ID); !ok {
			gone = append(gone, c.ID)
		}
	}
	if len(gone) > 0 {
		s.freeClients(gone)
	}
	if downs && !s.cfg.SkipRecoveryQuery {
		s.pendingRound = true
	}
	s.act()
}

// reinit: marked DOWN while alive, the server forgets everything and
// starts over with a new incarnation (001 "Receiving global state": it
// must NOT declare itself BOOTING or READY without reinitializing).
func (s *Server) reinit() {
	s.event(msg.Event{Kind: "reinit", Version: s.g.Version})
	s.tokens = map[string]*token{}
	s.outgoing = map[int]*transfer{}
	s.floors = map[uint64]uint64{}
	s.round = nil
	s.pendingRound = false
	s.waitTransfer = nil
	s.phase = initial
	s.inc++
	s.heartbeat()
}

func (s *Server) startBoot() {
	s.phase = booting
	s.waitTransfer = map[int]uint64{}
	for i, st := range s.g.Servers {
		if i != s.cfg.Self && st.State != msg.Down {
			s.waitTransfer[i] = st.Inc
		}
	}
	s.event(msg.Event{Kind: "boot", Version: s.g.Version, Detail: fmt.Sprintf("await=%d", len(s.waitTransfer))})
	for i, st := range s.g.Servers {
		if i != s.cfg.Self && st.State == msg.Booting {
			s.outgoing[i] = &transfer{inc: st.Inc, version: s.g.Version, dirty: true}
		}
	}
	s.pendingRound = true
	s.act()
}

func (s *Server) checkBoot() {
	if s.phase != booting || s.round != nil || s.pendingRound || !s.settled() || len(s.waitTransfer) > 0 {
		return
	}
	s.phase = ready
	s.event(msg.Event{Kind: "ready", Version: s.g.Version})
	s.heartbeat()
}

// handOff moves every entry this server no longer owns into the
// transfer to its owner; the server serves it no more.
func (s *Server) handOff() {
	for _, name := range s.Tokens() {
		o := s.g.Owner(name)
		if o == s.cfg.Self {
			continue
		}
		t := s.tokens[name]
		delete(s.tokens, name)
		tr := s.outgoing[o]
		if o < 0 || tr == nil {
			// No booting owner to send it to (every server DOWN, or the
			// owner is already READY and reclaims through its queries).
			s.event(msg.Event{Kind: "dropped", Name: name})
			continue
		}
		ts := msg.TokenState{Name: name, Data: t.data, Queue: t.queue, Fence: t.fence}
		for _, h := range t.holders {
			ts.Holders = append(ts.Holders, msg.Hold{Client: h.client, Name: name, Mode: h.mode, Fence: h.fence, Req: h.req})
		}
		for _, id := range slices.Sorted(maps.Keys(t.marks)) {
			k := t.marks[id]
			ts.Marks = append(ts.Marks, msg.ReqMark{Client: id, Name: name, Req: k.req, Done: k.done})
		}
		tr.tokens = append(tr.tokens, ts)
		tr.version = s.g.Version
		tr.acked, tr.dirty = false, true
		s.event(msg.Event{Kind: "transfer_out", Name: name, Server: o, Fence: t.fence})
	}
}

func (s *Server) flushTransfers() {
	for i := range s.n {
		if t := s.outgoing[i]; t != nil && t.dirty {
			t.dirty, t.sentAt = false, s.tick
			s.send(i, msg.Msg{Kind: msg.Transfer, Version: t.version, Inc: t.inc, Tokens: t.tokens})
		}
	}
}

func (s *Server) receiveTransfer(i int, m msg.Msg) {
	if s.phase == initial || m.Inc != s.inc || m.Version > s.g.Version {
		// For a previous life of ours, or sent under a global state we
		// have not seen yet (we might not know we own its names): the
		// sender repeats it.
		return
	}
	for _, ts := range m.Tokens {
		if s.g.Owner(ts.Name) != s.cfg.Self {
			continue
		}
		t := s.entry(ts.Name)
		s.raise(t, ts.Fence)
		if len(t.data) == 0 {
			t.data = ts.Data
		}
		for _, h := range ts.Holders {
			s.addHolder(t, h)
		}
		for _, k := range ts.Marks {
			if _, ok := s.g.Client(k.Client); ok {
				t.see(k.Client, k.Req, k.Done)
			}
		}
		for _, w := range ts.Queue {
			if !slices.ContainsFunc(t.queue, func(x msg.Waiter) bool { return x.Client == w.Client }) {
				t.queue = append(t.queue, w)
			}
		}
		s.event(msg.Event{Kind: "transfer_in", Name: ts.Name, Server: i, Fence: t.fence})
	}
	if w, ok := s.waitTransfer[i]; ok && w == s.g.Servers[i].Inc {
		delete(s.waitTransfer, i)
	}
	s.send(i, msg.Msg{Kind: msg.TransferAck, Version: m.Version, Inc: m.Inc})
	for _, ts := range m.Tokens {
		s.grant(ts.Name)
	}
	s.checkBoot()
}

// entry returns name's entry, creating it in the current epoch.
func (s *Server) entry(name string) *token {
	t := s.tokens[name]
	if t == nil {
		t = &token{fence: msg.Fence{Epoch: s.g.Version}}
		s.tokens[name] = t
	}
	return t
}

// raise keeps t's fence at or above f, so the next grant exceeds it.
func (s *Server) raise(t *token, f msg.Fence) {
	if f.Compare(t.fence) > 0 {
		t.fence = f
	}
}

func (s *Server) addHolder(t *token, h msg.Hold) {
	if _, ok := s.g.Client(h.Client); !ok {
		return
	}
	for _, x := range t.holders {
		if x.client == h.Client {
			return
		}
	}
	s.raise(t, h.Fence)
	for _, x := range t.holders {
		if x.mode == msg.Exclusive || h.Mode == msg.Exclusive {
			// Two clients believe they hold it incompatibly: only a
			// broken server or a lost transfer gets here. Keep both: the
			// checker must see it.
			s.event(msg.Event{Kind: "conflict", Name: h.Name, Client: h.Client, Detail: fmt.Sprintf("with %s", msg.IDString(x.client))})
			break
		}
	}
	t.holders = append(t.holders, holder{client: h.Client, mode: h.Mode, fence: h.Fence, req: h.Req})
	t.queue = slices.DeleteFunc(t.queue, func(w msg.Waiter) bool { return w.Client == h.Client })
}

// startRound queries every listed client for the tokens it holds (001
// "Server Initialization", "When a Server Crashes"); until all answer or
// are dropped the server serves nothing.
func (s *Server) startRound() {
	r := &round{version: s.g.Version, pending: map[uint64]bool{}}
	for _, c := range s.g.Clients {
		r.pending[c.ID] = true
	}
	s.round = r
	s.event(msg.Event{Kind: "query_round", Version: r.version, Detail: fmt.Sprintf("clients=%d", len(r.pending))})
	s.sendQueries()
	s.checkRound()
}

func (s *Server) sendQueries() {
	r := s.round
	if r == nil {
		return
	}
	r.sentAt = s.tick
	g := s.g.Clone()
	g.Clients = nil // clients need the servers' states, not each other
	for _, c := range s.g.Clients {
		if r.pending[c.ID] {
			s.out = append(s.out, msg.Out{To: c.Addr, Msg: msg.Msg{Kind: msg.Query, Version: r.version, Server: s.cfg.Self, Inc: s.inc, Global: &g}})
		}
	}
}

func (s *Server) checkRound() {
	if s.round == nil || len(s.round.pending) > 0 {
		return
	}
	s.event(msg.Event{Kind: "round_done", Version: s.round.version})
	s.round = nil
	for _, name := range s.Tokens() {
		s.grant(name)
	}
	s.checkBoot()
}

func (s *Server) queryReply(from msg.Peer, m msg.Msg) {
	if s.round == nil || m.Version != s.round.version || !s.round.pending[m.Client] {
		return
	}
	c, ok := s.g.Client(m.Client)
	if !ok || c.Name != from.Name {
		return
	}
	delete(s.round.pending, m.Client)
	s.floors[m.Client] = max(s.floors[m.Client], m.Req)
	for _, k := range m.Marks {
		if k.Client == m.Client && s.g.Owner(k.Name) == s.cfg.Self {
			s.entry(k.Name).see(k.Client, k.Req, false)
		}
	}
	for _, h := range m.Holds {
		if h.Client != m.Client || s.g.Owner(h.Name) != s.cfg.Self {
			continue
		}
		t := s.entry(h.Name)
		s.addHolder(t, h)
		if len(t.data) == 0 && len(h.Data) > 0 {
			t.data = h.Data
		}
	}
	s.checkRound()
}

// retry repeats unacknowledged transfers and unanswered queries
// (001 "Communication": unacknowledged requests are repeated).
func (s *Server) retry() {
	due := func(at int64) bool { return s.tick-at >= int64(s.cfg.RetryTicks) }
	for i := range s.n {
		if t := s.outgoing[i]; t != nil && !t.acked && due(t.sentAt) && s.settled() {
			t.sentAt = s.tick
			s.send(i, msg.Msg{Kind: msg.Transfer, Version: t.version, Inc: t.inc, Tokens: t.tokens})
		}
	}
	if s.round != nil && due(s.round.sentAt) {
		s.sendQueries()
	}
}

func (s *Server) freeClients(ids []uint64) {
	gone := func(id uint64) bool { return slices.Contains(ids, id) }
	for _, name := range s.Tokens() {
		t := s.tokens[name]
		for _, h := range t.holders {
			if gone(h.client) {
				s.event(msg.Event{Kind: "freed", Name: name, Client: h.client, Fence: h.fence})
			}
		}
		t.holders = slices.DeleteFunc(t.holders, func(h holder) bool { return gone(h.client) })
		t.queue = slices.DeleteFunc(t.queue, func(w msg.Waiter) bool { return gone(w.Client) })
		for _, id := range ids {
			delete(t.marks, id)
		}
	}
	for _, id := range ids {
		delete(s.floors, id)
	}
	if s.round != nil {
		for _, id := range ids {
			delete(s.round.pending, id)
		}
		s.checkRound()
	}
	for _, name := range s.Tokens() {
		s.grant(name)
	}
}

// Client registration and heartbeats (001 "The Client List").

func (s *Server) register(from msg.Peer, m msg.Msg) {
	if !s.IsLeader() {
		s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Redirect, Server: s.leader, Version: s.g.Version}})
		return
	}
	k := regKey{from.Name, m.Nonce}
	id, ok := s.regs[k]
	if !ok {
		id = s.term<<32 | s.nextClient
		s.nextClient++
		s.regs[k] = id
		g := s.g.Clone()
		g.Clients = append(g.Clients, msg.ClientEntry{ID: id, Name: from.Name, Addr: from.Addr, RegVersion: s.g.Version + 1})
		s.heardClient[id] = s.tick
		s.event(msg.Event{Kind: "registered", Client: id, Detail: from.Name})
		s.publish(g)
	}
	c, ok := s.g.Client(id)
	if !ok {
		return // registered, then dropped: the client will try again
	}
	g := s.g.Clone()
	g.Clients = nil
	s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Registered, Client: id, RegVersion: c.RegVersion, Version: s.g.Version, Global: &g}})
}

func (s *Server) clientHeartbeat(from msg.Peer, m msg.Msg) {
	if !s.IsLeader() {
		s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Redirect, Server: s.leader, Version: s.g.Version}})
		return
	}
	c, ok := s.g.Client(m.Client)
	if !ok || c.Name != from.Name {
		if !ok && s.g.Version >= m.RegVersion {
			s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Reply, Status: msg.IDInvalid, Client: m.Client, Inc: s.inc, Version: s.g.Version}})
		}
		return
	}
	if m.Kind == msg.Close {
		g := s.g.Clone()
		g.Clients = slices.DeleteFunc(g.Clients, func(c msg.ClientEntry) bool { return c.ID == m.Client })
		s.event(msg.Event{Kind: "closed", Client: m.Client})
		s.publish(g)
		return
	}
	s.heardClient[m.Client] = s.tick
	g := s.g.Clone()
	g.Clients = nil
	s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.HeartbeatAck, Version: s.g.Version, Global: &g}})
}

// Token requests (001 "Tokens", "Token data").

func (s *Server) request(from msg.Peer, m msg.Msg) {
	if !s.Serving() || m.Version > s.g.Version {
		return // the client repeats; by then we may serve or know more
	}
	c, ok := s.g.Client(m.Client)
	reply := func(st msg.Status, f msg.Fence, data []byte) {
		// Client and RegVersion name the registration answered: a client
		// registered again takes nothing meant for its previous life.
		s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Reply, Client: m.Client, RegVersion: c.RegVersion,
			Req: m.Req, Name: m.Name, Status: st, Fence: f, Data: data, Inc: s.inc, Server: s.cfg.Self, Version: s.g.Version}})
	}
	if !ok {
		if s.g.Version >= m.RegVersion {
			c.RegVersion = m.RegVersion
			reply(msg.IDInvalid, msg.Fence{}, nil)
		}
		return
	}
	if c.Name != from.Name {
		s.event(msg.Event{Kind: "rejected", Client: m.Client, Detail: "client id of " + c.Name + " used by " + from.Name})
		return
	}
	if s.g.Owner(m.Name) != s.cfg.Self {
		if m.Version < s.g.Version {
			g := s.g.Clone()
			g.Clients = nil
			s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.HeartbeatAck, Version: s.g.Version, Global: &g}})
		}
		return
	}
	repeat, fresh := s.fresh(m)
	if !fresh {
		return
	}
	t := s.entry(m.Name)
	t.see(m.Client, m.Req, true)
	hi := slices.IndexFunc(t.holders, func(h holder) bool { return h.client == m.Client })
	switch m.Kind {
	case msg.Acquire:
		if hi >= 0 {
			h := t.holders[hi]
			if h.req == m.Req || s.cfg.SkipFreshness {
				reply(msg.OK, h.fence, t.data) // a repeat: the grant was lost
				return
			}
			// A newer acquire from a listed holder: the client does not
			// know of this hold (it never asks for a name it holds), so
			// the hold ends and the request waits its turn for a new
			// fence; answering with the old one could hand it a fence
			// lower than one granted since.
			s.event(msg.Event{Kind: "released", Name: m.Name, Client: m.Client, Fence: h.fence, Detail: fmt.Sprintf("superseded by req=%d", m.Req)})
			t.holders = slices.Delete(t.holders, hi, hi+1)
		}
		if !slices.ContainsFunc(t.queue, func(w msg.Waiter) bool { return w.Client == m.Client }) {
			t.queue = append(t.queue, msg.Waiter{Client: m.Client, Mode: m.Mode, Req: m.Req})
		}
		s.grant(m.Name)
	case msg.Release:
		// A release names the fence of the hold it ends (zero: any), so a
		// replayed or late release cannot end a later hold.
		if hi >= 0 && (m.Fence.IsZero() || m.Fence == t.holders[hi].fence) {
			s.event(msg.Event{Kind: "released", Name: m.Name, Client: m.Client, Fence: t.holders[hi].fence})
			t.holders = slices.Delete(t.holders, hi, hi+1)
		}
		t.queue = slices.DeleteFunc(t.queue, func(w msg.Waiter) bool { return w.Client == m.Client })
		reply(msg.OK, msg.Fence{}, nil)
		s.grant(m.Name)
	case msg.SetData:
		if hi < 0 {
			reply(msg.NotHolder, msg.Fence{}, nil)
			return
		}
		if !repeat {
			// FCFS among shared holders: the order of arrival here. A
			// copy of a write already applied is answered, not applied
			// again: another holder may have written since.
			t.data = append([]byte(nil), m.Data...)
		}
		reply(msg.OK, t.holders[hi].fence, nil)
	case msg.GetData:
		if hi < 0 {
			reply(msg.NotHolder, msg.Fence{}, nil)
			return
		}
		reply(msg.OK, t.holders[hi].fence, append([]byte{}, t.data...))
	}
}

// fresh tells a request m to apply (fresh), a copy of the one applied
// last (repeat and fresh: answered again, not applied again), or an old
// one (not fresh: dropped with a "stale" event). A client numbers its
// requests in increasing order and has at most one outstanding per name
// (client.Invoke), so for a name only its newest request can still be
// awaited; anything older is a late copy (001 "Communication":
// unacknowledged requests are repeated) or a replay. The server knows
// the newest request per client and name it has seen (token.marks,
// carried by transfers), and, for the names it took over by a query
// round, the client's newest request number at its answer (floors) with
// the requests then outstanding (marks): a request at or below the floor
// that was not outstanding had completed, elsewhere.
func (s *Server) fresh(m msg.Msg) (repeat, fresh bool) {
	if s.cfg.SkipFreshness {
		return false, true
	}
	var k mark
	if t := s.tokens[m.Name]; t != nil {
		k = t.marks[m.Client]
	}
	floor := s.floors[m.Client]
	if m.Req < k.req || (m.Req != k.req && m.Req <= floor) {
		s.event(msg.Event{Kind: "stale", Name: m.Name, Client: m.Client, Req: m.Req,
			Detail: fmt.Sprintf("%s newest=%d", m.Kind, max(k.req, floor))})
		return false, false
	}
	return m.Req == k.req && k.done, true
}

// see records request req of client c for t's name.
func (t *token) see(c, req uint64, done bool) {
	if t.marks == nil {
		t.marks = map[uint64]mark{}
	}
	k := t.marks[c]
	if req > k.req || (req == k.req && done) {
		t.marks[c] = mark{req: req, done: done || (req == k.req && k.done)}
	}
}

// grant serves name's queue in order: the head when compatible with the
// holders, then every following shared request while the head is shared.
func (s *Server) grant(name string) {
	t := s.tokens[name]
	if t == nil || !s.Serving() {
		return
	}
	for len(t.queue) > 0 {
		w := t.queue[0]
		excl := slices.ContainsFunc(t.holders, func(h holder) bool { return h.mode == msg.Exclusive })
		if excl || (w.Mode == msg.Exclusive && len(t.holders) > 0) {
			return
		}
		c, ok := s.g.Client(w.Client)
		t.queue = t.queue[1:]
		if !ok {
			continue
		}
		t.fence.Counter++
		t.holders = append(t.holders, holder{client: w.Client, mode: w.Mode, fence: t.fence, req: w.Req})
		s.event(msg.Event{Kind: "granted", Name: name, Client: w.Client, Mode: w.Mode, Fence: t.fence})
		s.out = append(s.out, msg.Out{To: c.Addr, Msg: msg.Msg{Kind: msg.Reply, Client: w.Client, RegVersion: c.RegVersion, Req: w.Req, Name: name,
			Status: msg.OK, Fence: t.fence, Data: append([]byte{}, t.data...), Inc: s.inc, Server: s.cfg.Self, Version: s.g.Version}})
	}
}
