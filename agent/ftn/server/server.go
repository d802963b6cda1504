package server

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"tokenbed/agent/ftn/msg"
)

type phase uint8

const (
	initial phase = iota // waiting for a leader to accept our BOOTING
	booting
	ready
)

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

// foreign reports (and logs) a State whose global state does not fit
// this server's list, or names another leader than its sender: a server
// with another configuration file (001 "Configuration": one shared
// file). It is refused before its term counts, so it cannot depose the
// leader either.
func (s *Server) foreign(i int, m msg.Msg) bool {
	if m.Global == nil {
		return true
	}
	err := m.Global.Check(s.n)
	if err == nil && m.Global.Leader != i {
		err = fmt.Errorf("leader: %d, sent by server %d", m.Global.Leader, i)
	}
	if err != nil {
		s.event(msg.Event{Kind: "rejected", Server: i, Detail: "global state: " + err.Error()})
	}
	return err != nil
}

func (s *Server) stepServer(i int, m msg.Msg) {
	if m.Kind == msg.StateMsg && s.foreign(i, m) {
		return
	}
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
