package node

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/circulation"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// Member is a directory entry: a member's name and UDP address.
type Member struct {
	Name string
	Addr netip.AddrPort
	// Key, when set, is the member's public key, already verified against
	// the CA by the caller (a certificate given at start): it is cached
	// as if the member had sent its certificate (002 §3).
	Key ed25519.PublicKey
}

// Config is what a Node needs. Durations are real time.
type Config struct {
	Name string
	// Addr is the agent's own UDP address. It must be the address peers
	// send to: signatures bind it (002 §3).
	Addr    netip.AddrPort
	Key     ed25519.PrivateKey
	Cert    []byte // DER, piggybacked after a timeout
	CA      *ca.Verifier
	Passing passing.Config
	Policy  circulation.Policy
	// Peers seeds the member directory.
	Peers []Member
	// DirectoryTTL forgets members not heard of, directly or through
	// directory synchronisation, for this long; 0 keeps configured
	// members for ever. Leaves are silent failures (002 §3.2), so this is
	// how they end.
	DirectoryTTL time.Duration
	// UnlistedTTL does the same for members not in Peers (joined ones and
	// candidates); 0 means DefaultUnlistedTTL. DirectoryTTL applies
	// instead when it is shorter. See "Pass targets" in the package doc.
	UnlistedTTL time.Duration
	// JoinInterval bounds the Moves of one sender that introduce a token
	// this agent has never seen (joins, regenerations elsewhere: 002
	// §3.2) to JoinBurst at once and one per JoinInterval after that;
	// the rest are rejected ("join-rate"). 0 means DefaultJoinInterval.
	JoinInterval time.Duration
	// Rand is the agent's seeded random source (peer choice, directory
	// samples, regeneration jitter).
	Rand *rand.Rand
	// MaxClockSkew is S, the most by which two members' wall clocks may
	// differ (e.g. NTP-synchronised hosts). It bounds how far back a
	// datagram's nonce may lie before the start for the datagram to be
	// surely fresh, and how far ahead a directory entry's seen-time may
	// lie. Real time, never compressed. 0 means DefaultMaxClockSkew.
	MaxClockSkew time.Duration
}

// DefaultMaxClockSkew is S when Config leaves it 0: NTP keeps hosts on a
// network within a few milliseconds to tens of milliseconds of each other.
const DefaultMaxClockSkew = 100 * time.Millisecond

// MaxMaxClockSkew bounds S: a restarted agent is deaf for up to 2·S.
const MaxMaxClockSkew = time.Hour

// Pass targets and joins (see the package doc, "Pass targets").
const (
	// DefaultUnlistedTTL is twenty return times of 002 §1's typical
	// deployment (tens of seconds): a live member re-signs its entry
	// every quarter of it and the token carries the entry to every
	// member within a few return times, so only a silent member expires.
	DefaultUnlistedTTL = 10 * time.Minute
	// MaxUnanswered is how many passes in a row (each a Move and its
	// retries, 002 §3) a target outside the configuration may leave
	// unanswered before it stops being a target.
	MaxUnanswered = 2
	// MaxVouches is how many names a configured member may vouch for
	// (by relaying an entry we cannot verify yet) per VouchWindow. Real
	// time, never compressed: a failed pass costs Move timeouts, which
	// are network time, so a budget in compressed time would let an
	// insider among the configured members starve a compressed run.
	MaxVouches  = 2
	VouchWindow = time.Minute
	// JoinBurst and DefaultJoinInterval: see Config.JoinInterval. A
	// member introduces a token when it joins or regenerates one, at most
	// once per regenerate_after return times: one a second is far above
	// that and far below a flood.
	JoinBurst           = 3
	DefaultJoinInterval = time.Second
)

// Packet is a datagram to send.
type Packet struct {
	To   netip.AddrPort
	Data []byte
}

// Ready is what the driver must do after a call: log Events, then send
// Packets, in order.
type Ready struct {
	Events  []eventlog.Event
	Packets []Packet
}

type member struct {
	addr netip.AddrPort
	// seen is the latest time the member is known to have been alive, ns
	// since the Unix epoch on the member's own clock: the nonce of a
	// datagram accepted from it, or the seen-time of its signed entry.
	seen int64
	// trusted: addr comes from the operator (Config.Peers), from the
	// member itself (a datagram it signed for that source) or from an
	// entry it signed. Unverified hearsay never replaces it.
	trusted bool
	// entry is the member's own signed entry, the newest held, relayed
	// verbatim when verified; zero if none.
	entry    wire.Entry
	verified bool
	// Pass target evidence (see targetOf): answered, the member replied
	// to one of our datagrams (an Ack, Commit or EarlyStop it signed);
	// voucher, the configured member that relayed its entry; missed,
	// passes to it that failed with no Ack since it last answered.
	answered bool
	voucher  string
	missed   int
}

type presignKey struct {
	sessionKey
	typ wire.Type
}

type presignReq struct {
	k    presignKey
	to   netip.AddrPort
	pass uint64 // the pass id of the Move that asked for it (3-way)
}

type presignedDatagram struct {
	to    netip.AddrPort
	pass  uint64
	nonce uint64
	data  []byte
}

type sessionKey struct {
	token   wire.TokenID
	session uint64
	peer    string
}

// Node is one agent. It is not safe for concurrent use.
type Node struct {
	cfg Config
	ep  *passing.Endpoint
	// configured: the names in Config.Peers, pass targets for good.
	configured map[string]bool
	// vouches: when each configured member last vouched for a name, ns.
	vouches map[string][]int64
	// joinTAT: per sender, the theoretical arrival time of its next
	// token introduction (a GCRA bucket of JoinBurst, JoinInterval).
	joinTAT  map[string]int64
	pol      circulation.Policy
	keys     map[string]ed25519.PublicKey
	certSums map[string][32]byte // hash of the certificate each cached key came from
	dir      map[string]*member
	peers    []string // dir's names, sorted; nil: to be computed (Peers)
	replyTo  map[sessionKey]netip.AddrPort
	lastGen  int64
	loseNext bool // lose.go
	nonce    uint64
	lastHit  time.Time
	gcAt     time.Time
	rejected map[string]uint64
	ready    Ready
	// Datagrams signed ahead of need (see Prepare).
	toPresign []presignReq
	presigned map[presignKey]presignedDatagram
	// cur is the datagram being handled and its source, for the effects
	// of delivering it.
	cur     *wire.Datagram
	curFrom netip.AddrPort
	// fresh: datagrams with a nonce below it may predate this start (see
	// the package doc, "Restarts").
	fresh int64
	// polStarted: the policy has been started (at fresh, or at the first
	// datagram accepted before then).
	polStarted bool
	// self is this agent's own signed directory entry.
	self wire.Entry
	// ops are the protected operations the policy started and has not
	// ended (circulation.OpStart), by token: Stop ends them in the log.
	ops []wire.TokenID
}

// New checks cfg and returns a node. Call Start before anything else.
func New(cfg Config) (*Node, error) {
	switch {
	case !wire.ValidName(cfg.Name):
		return nil, fmt.Errorf("name: %q is not a valid member name", cfg.Name)
	case !cfg.Addr.IsValid() || cfg.Addr.Addr().IsUnspecified() || cfg.Addr.Port() == 0:
		return nil, fmt.Errorf("listen: %v: need a specific IP address and port, since signatures bind the destination address (002 §3)", cfg.Addr)
	case len(cfg.Key) != ed25519.PrivateKeySize:
		return nil, errors.New("key: missing or not an Ed25519 private key")
	case cfg.CA == nil:
		return nil, errors.New("ca: missing CA certificate")
	case cfg.Policy == nil:
		return nil, errors.New("policy: missing circulation policy")
	case cfg.Rand == nil:
		return nil, errors.New("rand: missing seeded random source")
	case cfg.DirectoryTTL < 0:
		return nil, errors.New("directory_ttl: must not be negative")
	case cfg.MaxClockSkew < 0 || cfg.MaxClockSkew > MaxMaxClockSkew:
		return nil, fmt.Errorf("max_clock_skew: %v: want 0 (default %v) up to %v", cfg.MaxClockSkew, DefaultMaxClockSkew, MaxMaxClockSkew)
	}
	if cfg.MaxClockSkew == 0 {
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	switch {
	case cfg.UnlistedTTL < 0:
		return nil, errors.New("unlisted_ttl: must not be negative")
	case cfg.JoinInterval < 0:
		return nil, errors.New("join_interval: must not be negative")
	}
	if cfg.UnlistedTTL == 0 {
		cfg.UnlistedTTL = DefaultUnlistedTTL
	}
	if cfg.DirectoryTTL > 0 {
		cfg.UnlistedTTL = min(cfg.UnlistedTTL, cfg.DirectoryTTL)
	}
	if cfg.JoinInterval == 0 {
		cfg.JoinInterval = DefaultJoinInterval
	}
	ep, err := passing.NewEndpoint(cfg.Passing, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("passing: %w", err)
	}
	n := &Node{cfg: cfg, ep: ep, pol: cfg.Policy,
		keys: map[string]ed25519.PublicKey{cfg.Name: cfg.Key.Public().(ed25519.PublicKey)}, certSums: map[string][32]byte{},
		dir: map[string]*member{}, replyTo: map[sessionKey]netip.AddrPort{}, rejected: map[string]uint64{},
		presigned: map[presignKey]presignedDatagram{}, configured: map[string]bool{}, vouches: map[string][]int64{},
		joinTAT: map[string]int64{}}
	for _, p := range cfg.Peers {
		if !wire.ValidName(p.Name) {
			return nil, fmt.Errorf("peers: %q is not a valid member name", p.Name)
		}
		if !p.Addr.IsValid() || p.Addr.Port() == 0 {
			return nil, fmt.Errorf("peers: %s: invalid address %v", p.Name, p.Addr)
		}
		if p.Name != cfg.Name {
			n.dir[p.Name] = &member{addr: p.Addr, trusted: true}
			n.configured[p.Name] = true
			if p.Key != nil {
				if len(p.Key) != ed25519.PublicKeySize {
					return nil, fmt.Errorf("peers: %s: key is not an Ed25519 public key", p.Name)
				}
				n.keys[p.Name] = p.Key
			}
		}
	}
	return n, nil
}

// Host interface for the policy.

// Self implements circulation.Host.
func (n *Node) Self() string { return n.cfg.Name }

// Rand implements circulation.Host.
func (n *Node) Rand() *rand.Rand { return n.cfg.Rand }

// Rejected returns the count of dropped datagrams by reason.
func (n *Node) Rejected() map[string]uint64 { return n.rejected }

// Held returns the tokens this agent holds.
func (n *Node) Held() []wire.TokenID { return n.ep.Held() }

// Ready returns and clears what the driver must do.
func (n *Node) Ready() Ready {
	r := n.ready
	n.ready = Ready{}
	return r
}

func (n *Node) event(e eventlog.Event) { n.ready.Events = append(n.ready.Events, e) }

// Start starts the node; its policy (which may generate a token) starts
// max_clock_skew later, see startPolicy. now must be the
// wall clock: it is the start that replay protection counts from.
func (n *Node) Start(now time.Time) {
	n.fresh = now.Add(n.cfg.MaxClockSkew).UnixNano()
	n.signSelf(now)
	n.gcAt = now.Add(n.gcPeriod())
}

// startPolicy starts the policy, once. It waits for fresh (start + S):
// before then the node refuses every datagram, so a pass it started
// could not hear its Ack, and a token it generated would wait out a pass
// that fails by construction (every run's first pass would pay the
// Move timeouts). A datagram accepted earlier, from a peer whose
// clock is ahead, starts it at once.
func (n *Node) startPolicy(now time.Time) {
	if n.polStarted {
		return
	}
	n.polStarted = true
	n.actions(now, n.pol.Start(n, now))
}

// Stop reports the tokens held when the agent stops: they are lost, since
// a leave is a silent failure (002 §3.2).
func (n *Node) Stop(reason string) {
	for _, t := range n.ops {
		n.event(eventlog.Event{Kind: eventlog.OpFinished, Token: tokenString(t), Reason: "stopping", Detail: reason})
	}
	n.ops = nil
	for _, t := range n.ep.Held() {
		n.event(eventlog.Event{Kind: eventlog.TokenReleased, Token: t.String(), Reason: "stopping", Detail: reason})
	}
}

// Tick fires due timers.
func (n *Node) Tick(now time.Time) {
	n.ep.Tick(now)
	n.drain(now)
	if !n.polStarted && now.UnixNano() >= n.fresh {
		n.startPolicy(now)
	}
	if d, ok := n.pol.Deadline(); ok && n.polStarted && !now.Before(d) {
		n.actions(now, n.pol.Tick(now))
	}
	if !now.Before(n.gcAt) {
		n.gcAt = now.Add(n.gcPeriod())
		// Sorted only when something expires: at hundreds of members a
		// sort per sweep is most of the sweep.
		var gone []string
		for name, m := range n.dir {
			if ttl := n.ttlOf(name); ttl > 0 && m.seen != 0 && now.UnixNano()-m.seen > ttl {
				gone = append(gone, name)
			}
		}
		slices.Sort(gone)
		for _, name := range gone {
			delete(n.dir, name)
			n.dirChanged()
			n.event(eventlog.Event{Kind: eventlog.PeerRemoved, Peer: name, Reason: "ttl"})
		}
	}
}

// Deadline returns when Tick must be called next, if ever.
func (n *Node) Deadline() (time.Time, bool) {
	d, ok := n.ep.Deadline()
	pd, pok := n.pol.Deadline()
	if !n.polStarted {
		pd, pok = time.Unix(0, n.fresh), true
	}
	if pok && (!ok || pd.Before(d)) {
		d, ok = pd, true
	}
	if !ok || n.gcAt.Before(d) {
		d, ok = n.gcAt, true
	}
	return d, ok
}
