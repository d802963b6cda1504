// Package node is one agent's protocol logic without I/O: it decodes and
// authenticates datagrams (002 §3: signatures, certificates, the member
// key cache), keeps the member directory, runs the passing Endpoint and a
// circulation policy, and turns what they decide into signed datagrams and
// event-log records.
//
// Like the machines it wraps, a Node reads no clock and owns no socket:
// the driver passes the current time to Receive and Tick, then takes the
// datagrams to send and the events to log from Ready, writing the events
// before sending the datagrams (so that a log never shows a Commit sent
// before the release it follows). The time given to Start must be the wall
// clock: replay protection counts from it.
//
// # Order of checks on a datagram
//
// Decode; sender is not ourselves; key: the cached one, or the key of a
// certificate carried by the datagram, checked against the CA but not yet
// cached; signature under that key, for this source and destination;
// freshness (below); then the passing Endpoint. Only if the Endpoint
// accepts the datagram does the node cache the new key, count the sender
// as alive at its address, and merge the directory the datagram carries:
// a rejected datagram (a replay, a stale session) changes nothing but the
// rejection counters.
//
// # Restarts (issue 10, item 1)
//
// Replays are recognised by the tokens' soft state (002 §3.1), which lives
// in memory and is lost in a crash: a restarted agent would take the
// Moves and Commits of its previous life as new, acquire a copy of a live
// token and keep it. Every datagram carries a nonce that is its sender's
// wall clock in ns when it signed it (made strictly increasing). With S,
// Config.MaxClockSkew, the bound on how far apart any two members' clocks
// are, a datagram signed before our start at real time t carries a nonce
// of at most t + S on its sender's clock, which is below start + S on
// ours. So the node rejects ("before-start"), for its whole life, every
// datagram whose nonce is below start + S. No stable storage is needed,
// and after the first 2·S nothing legitimate is below that line: a peer
// whose clock is S behind ours signs nonces of at least start + S from
// start + 2·S on. A later nonce cannot come from a previous life, and from
// then on the soft state rebuilt since the start covers replays as before.
//
// The cost: an agent is deaf for up to 2·S after every start (S if clocks
// agree), first starts included, since it cannot tell them from restarts.
// Its own policy starts S after the node (Node.startPolicy), since until
// then it would refuse the replies to its own passes.
// A pass toward it in that window fails like a pass to a crashed member:
// the sender's Move retries run out and the sender keeps the token (002
// §3.1: no loss, no duplication), and the policy tries again. The
// assumption: members' clocks are within S of each other (NTP; the
// default, DefaultMaxClockSkew, is 100 ms). If a clock is off by more, a
// replay of that member's datagrams signed just before our crash may be
// accepted, or its fresh datagrams refused until its nonces catch up.
// Nonces and S are real time: the harness's compressed time divides the
// protocol's durations, not the wall clock, so S is never scaled.
//
// Alternatives we did not take: a persisted high-water mark costs an
// fsync per accepted datagram (or batch) on the pass's critical path; an
// incarnation number that peers must echo changes the format of every
// datagram and still needs stable storage or the clock to be unique; a
// quarantine alone, without the nonce bound, does not help, since a
// captured datagram stays valid as long as the sender's certificate.
//
// # Member keys (issue 10, item 2)
//
// A key is cached only from a datagram that verified under it and that
// the Endpoint accepted; a datagram carrying another valid certificate of
// a member but a signature that does not verify under that certificate's
// key is rejected and changes nothing. A member that legitimately re-keys
// (a new key pair and certificate from the CA) is first rejected with
// "bad-signature" on its certificate-less datagrams, times out and resends
// with its certificate (002 §3); that datagram verifies under the new key,
// which then replaces the old one. A replay of an old datagram carrying
// an old, still valid certificate could roll the key back only if the
// Endpoint accepted it, that is, if it opened a session the soft state
// does not know; the member's next retry with its certificate undoes it.
//
// # Directory (issue 10, item 3)
//
// Directory entries are signed by the member they describe (see
// agent/wire, "Directory entries") and relayed verbatim, so that a member
// can only speak for itself. An entry replaces what we hold only if it is
// newer (so a directory in sync costs no verification: an Ed25519
// verification is ~60 µs) and not more than S in the future (it would
// outlive its member). An agent signs its own entry at start and again
// when a quarter of directory_ttl has passed, not per datagram, which
// keeps the Move's critical path at one signature. An entry about a
// member whose key we do not have yet (a join, 002 §3.2) is kept as an
// unverified candidate: it gives an address to try, never replaces an
// address we were given at start, heard from the member itself or read in
// an entry it signed, is not relayed, and is checked (and dropped if
// false) as soon as the member's key arrives. Liveness for directory_ttl
// is the signing time of what the member itself signed: the nonce of a
// datagram from it that was accepted, or the seen-time of its entry; a
// replay therefore proves nothing newer than the original.
//
// # Pass targets
//
// The policy chooses among Peers, the pass targets: members that have
// shown they are alive, never names on hearsay alone. A name is a target
// when it is configured (Config.Peers: the operator's word), or when it
// has answered this agent, that is, sent an Ack, Commit or EarlyStop that
// was accepted: it verified under the member's certified key, for its
// address, and replies to a datagram of ours, so the member is reachable
// there. A Move alone does not count: it costs the sender nothing to send.
// An entry we cannot verify yet (a joiner's, relayed by synchronisation,
// 002 §3.2) is a target on the word of a configured member that relayed
// it, for one pass: at most MaxVouches names per configured member per
// VouchWindow, so an insider among the configured members costs at most
// that many failed passes. A target outside the configuration whose
// passes fail MaxUnanswered times in a row (each a Move and its retries,
// 002 §3) stops being one until it answers again. Configured members stay
// targets: a leave is a silent failure that the Move retries absorb (the
// sender keeps the token, 002 §3.1), and directory_ttl, when set, ends it.
//
// Joins keep working (002 §3.2): the joiner passes its fresh token to the
// member it was given, whose Ack and the joiner's Commit make each a
// target of the other; synchronisation carries the joiner's entry on,
// vouched for by that member, and the first pass to the joiner (with
// certificates both ways after one timeout, 002 §3) makes it answer.
//
// Members outside the configuration expire after UnlistedTTL without
// news (DefaultUnlistedTTL, ten minutes: twenty return times of 002 §1's
// typical deployment). A live member re-signs its entry every quarter of
// the TTL and the token carries it everywhere within a few return times,
// so only a silent member expires. Joins are bounded per sender
// (JoinBurst, Config.JoinInterval): a Move of a token this agent has
// never seen costs it an Ack sequence and a commit timeout.
//
// # What a certified member can still do
//
// 002 §3.1 trusts members: a member holding a valid key pair and
// certificate (an insider) is outside its threat model, and some of what
// it can do stays possible. An insider can mint a copy of a live token (it
// can sign a Move and Commit for any token id and session), and so
// duplicate tokens; nothing here detects that beyond the analysis, which
// reports it as a duplication. It can drop the tokens it is passed (a
// silent failure), claim any address for itself, and fill directories
// with entries for names that do not exist, as unverified candidates that
// are neither relayed nor passed to and that expire after UnlistedTTL; if
// it is configured, MaxVouches of them per VouchWindow get one pass each.
// It can introduce JoinBurst tokens at once and one per JoinInterval, and
// open sessions of known tokens at any rate, each costing the receiver an
// Ack sequence and a commit timeout (and, above the current session,
// making it refuse the genuine holder's next pass as stale). Having answered once, it costs
// MaxUnanswered failed passes per agent before it must answer again. It
// can no longer move another member's entry, plant entries in the
// future, displace another member's key, become a pass target without
// answering, or, like an outsider, make an agent accept a replay of its
// previous life. If a restarted agent's clock is behind its peers' by
// more than S, it can accept replays signed in the last (lag − S) before
// its crash (TestClockSkewBeyondTheBoundAdmitsReplays).
package node

import (
	"crypto/ed25519"
	"crypto/sha256"
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
	k  presignKey
	to netip.AddrPort
}

type presignedDatagram struct {
	to    netip.AddrPort
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

// Peers implements circulation.Host: the pass targets, the members that
// have shown they are alive (targetOf). The list is kept until the
// directory gains or loses a target (dirChanged), not sorted per call:
// the policy asks at every pass, and at 300 agents the sort was a tenth
// of the simulator's time. Callers must not modify it.
func (n *Node) Peers() []string {
	if n.peers == nil {
		ps := make([]string, 0, len(n.dir))
		for name, m := range n.dir {
			if n.targetOf(name, m) {
				ps = append(ps, name)
			}
		}
		slices.Sort(ps)
		n.peers = slices.Clip(ps)
	}
	return n.peers
}

// dirChanged forgets the sorted target list after a member was added
// to or removed from the directory, or became or stopped being a target.
func (n *Node) dirChanged() { n.peers = nil }

// targetOf says whether a member is a pass target: configured, or known
// alive, never on hearsay alone (see the package doc, "Pass targets").
func (n *Node) targetOf(name string, m *member) bool {
	switch {
	case n.configured[name]:
		return true
	case m.answered:
		return m.missed < MaxUnanswered
	default:
		return m.voucher != "" && m.missed == 0
	}
}

// retarget records a change of a member's evidence made by f, and logs
// the member entering or leaving the pass targets.
func (n *Node) retarget(name string, m *member, reason string, f func()) {
	was := n.targetOf(name, m)
	f()
	if is := n.targetOf(name, m); is != was {
		n.dirChanged()
		k := eventlog.TargetAdded
		if !is {
			k = eventlog.TargetDropped
		}
		n.event(eventlog.Event{Kind: k, Peer: name, Addr: m.addr.String(), Reason: reason})
	}
}

// ttlOf is how long a member may stay silent before it is forgotten; 0
// for ever.
func (n *Node) ttlOf(name string) int64 {
	if n.configured[name] {
		return n.cfg.DirectoryTTL.Nanoseconds()
	}
	return n.cfg.UnlistedTTL.Nanoseconds()
}

// gcPeriod is how often silent members are looked for, and how often
// this agent re-signs its own entry: a quarter of the shortest TTL.
func (n *Node) gcPeriod() time.Duration {
	ttl := n.cfg.UnlistedTTL
	if n.cfg.DirectoryTTL > 0 {
		ttl = min(ttl, n.cfg.DirectoryTTL)
	}
	return ttl / 4
}

// joinAllowed says whether sender may introduce a token now (GCRA:
// JoinBurst at once, then one per JoinInterval).
func (n *Node) joinAllowed(now time.Time, sender string) bool {
	iv := n.cfg.JoinInterval.Nanoseconds()
	return n.joinTAT[sender]-now.UnixNano() <= (JoinBurst-1)*iv
}

// joinTaken charges sender's bucket for a token it introduced.
func (n *Node) joinTaken(now time.Time, sender string) {
	n.joinTAT[sender] = max(n.joinTAT[sender], now.UnixNano()) + n.cfg.JoinInterval.Nanoseconds()
}

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
// that fails by construction (issue 10: every run's first pass paid
// the Move timeouts). A datagram accepted earlier, from a peer whose
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

func (n *Node) reject(reason string, d *wire.Datagram, from netip.AddrPort, detail string) {
	n.rejected[reason]++
	e := eventlog.Event{Kind: eventlog.DatagramRejected, Reason: reason, Addr: from.String(), Detail: detail}
	if d != nil {
		e.Peer, e.Token, e.Session, e.Nonce, e.Cert = d.Sender, d.Token.String(), d.Session, d.Nonce, len(d.Cert) > 0
		e.Detail = d.Type.String() + " " + detail
	}
	n.event(e)
}

// Receive handles a datagram that arrived from from. Bad datagrams are
// dropped without reply and counted (002 §3.1).
func (n *Node) Receive(now time.Time, from netip.AddrPort, b []byte) {
	d, err := wire.Decode(b)
	if err != nil {
		var we *wire.Error
		reason := "malformed"
		if errors.As(err, &we) {
			reason = "malformed:" + we.Field
		}
		n.reject(reason, nil, from, err.Error())
		return
	}
	if d.Sender == n.cfg.Name {
		n.reject("from-self", &d, from, "")
		return
	}
	pub, known := n.keys[d.Sender]
	var newKey ed25519.PublicKey
	var newSum [32]byte
	if len(d.Cert) > 0 {
		sum := sha256.Sum256(d.Cert)
		if !known || n.certSums[d.Sender] != sum {
			// A certificate we have not checked: verify it against the CA
			// (002 §3), and the datagram with its key. The key is cached
			// only once the datagram is accepted: a valid certificate
			// alone (a re-issued or old one) must not displace the key
			// the member signs with (issue 10, key-cache poisoning).
			name, k, err := n.cfg.CA.Verify(d.Cert, now)
			switch {
			case err != nil:
				n.reject("bad-certificate", &d, from, err.Error())
				return
			case name != d.Sender:
				n.reject("certificate-name-mismatch", &d, from, fmt.Sprintf("certificate is for %q", name))
				return
			}
			pub, known, newKey, newSum = k, true, k, sum
		}
	}
	if !known {
		// Unknown sender: drop silently; it will resend with its
		// certificate after its first timeout (002 §3).
		n.reject("unknown-key", &d, from, "")
		return
	}
	if !wire.Verify(b, pub, from, n.cfg.Addr) {
		n.reject("bad-signature", &d, from, "signature does not verify for this source and destination")
		return
	}
	if int64(d.Nonce) < n.fresh {
		// Possibly signed before this start, when the soft state that
		// would recognise it as a replay was lost with the crash.
		n.reject("before-start", &d, from, fmt.Sprintf("nonce %d precedes start + max_clock_skew (%d)", d.Nonce, n.fresh))
		return
	}
	n.startPolicy(now)
	join := d.Type == wire.Move && !n.ep.Knows(d.Token)
	if join && !n.joinAllowed(now, d.Sender) {
		// A certified member can introduce tokens at will; each costs
		// the receiver an Ack sequence and a commit timeout (002 §3).
		n.reject("join-rate", &d, from, fmt.Sprintf("more than %d new tokens at once or one per %v from this sender", JoinBurst, n.cfg.JoinInterval))
		return
	}
	k := sessionKey{d.Token, d.Session, d.Sender}
	prevTo, hadTo := n.replyTo[k]
	switch d.Type {
	case wire.Move, wire.Ack:
		// Protocol continuation goes to the port the datagram names (002 §3).
		n.replyTo[k] = netip.AddrPortFrom(from.Addr(), d.ReplyPort)
	case wire.Commit:
		if !hadTo {
			n.replyTo[k] = from
		}
	}
	n.cur, n.curFrom = &d, from
	n.ep.Deliver(now, passing.Msg{Type: d.Type, From: d.Sender, To: n.cfg.Name, Token: d.Token, Session: d.Session, Cert: len(d.Cert) > 0})
	fs := n.ep.Effects()
	accepted := slices.ContainsFunc(fs, func(f passing.Effect) bool { return f.Kind == passing.Received })
	if accepted {
		// Only a datagram the endpoint accepted is evidence: a rejected
		// replay must neither cache its key, nor keep its sender alive,
		// nor feed the directory.
		if newKey != nil {
			n.keys[d.Sender], n.certSums[d.Sender] = newKey, newSum
			n.event(eventlog.Event{Kind: eventlog.KeyCached, Peer: d.Sender, Addr: from.String()})
		}
		n.heard(now, d.Sender, from, d.Nonce, d.Type != wire.Move)
		if join {
			n.joinTaken(now, d.Sender)
			n.event(eventlog.Event{Kind: eventlog.TokenIntroduced, Token: d.Token.String(), Session: d.Session, Peer: d.Sender, Addr: from.String(), Reason: "move"})
		}
		n.merge(now, d.Sender, d.Dir)
	} else if hadTo {
		n.replyTo[k] = prevTo
	} else {
		delete(n.replyTo, k)
	}
	// The first effects belong to this datagram (received or rejected);
	// what follows from them (policy actions) clears cur before sending.
	for _, f := range fs {
		if f.Kind == passing.Received || f.Kind == passing.Rejected {
			n.effect(now, f)
		}
	}
	n.cur = nil
	for _, f := range fs {
		if f.Kind != passing.Received && f.Kind != passing.Rejected {
			n.effect(now, f)
		}
	}
	n.drain(now)
}

// heard records direct evidence that a member was alive at addr when it
// signed the datagram with this nonce: a late copy proves nothing newer.
// answer: the datagram replies to one of ours (an Ack, Commit or
// EarlyStop), so the member is reachable there: it becomes a target.
func (n *Node) heard(now time.Time, name string, addr netip.AddrPort, nonce uint64, answer bool) {
	m := n.dir[name]
	if m == nil {
		m = &member{}
		n.dir[name] = m
		n.dirChanged()
		n.event(eventlog.Event{Kind: eventlog.PeerAdded, Peer: name, Addr: addr.String(), Detail: "heard directly"})
	}
	if t := min(int64(nonce), now.UnixNano()); t >= m.seen || !m.trusted {
		m.addr, m.seen = addr, t
	}
	m.trusted = true
	if answer {
		n.retarget(name, m, "answered", func() { m.answered, m.missed = true, 0 })
	}
	if m.entry.Name != "" && !m.verified {
		// Now that its key is known, check the entry we held on hearsay.
		if m.verified = m.entry.VerifyEntry(n.keys[name]); !m.verified {
			m.entry = wire.Entry{}
		}
	}
}

// merge applies the entries of an accepted datagram (002 §3.2). Each
// entry is signed by the member it describes; only entries newer than
// the one held are checked (an Ed25519 verification each), so a
// directory already in sync costs no verification.
func (n *Node) merge(now time.Time, from string, dir []wire.Entry) {
	for _, e := range dir {
		if e.Name == n.cfg.Name || !e.Addr.IsValid() || e.Addr.Port() == 0 {
			continue
		}
		if e.Seen > now.Add(n.cfg.MaxClockSkew).UnixNano() {
			continue // from the future: it would outlive its member
		}
		if ttl := n.ttlOf(e.Name); ttl > 0 && now.UnixNano()-e.Seen > ttl {
			continue // stale news of a member that may have left
		}
		m := n.dir[e.Name]
		if m != nil && m.entry.Name != "" && e.Seen <= m.entry.Seen {
			continue // nothing newer than what we hold
		}
		key, haveKey := n.keys[e.Name]
		switch {
		case haveKey && !e.VerifyEntry(key):
			continue // not signed by its member
		case !haveKey && m != nil && m.trusted:
			continue // hearsay never overrides what we verified
		}
		if m == nil {
			m = &member{}
			n.dir[e.Name] = m
			n.dirChanged()
			detail := "directory synchronisation"
			if !haveKey {
				detail += ", unverified until the member is heard"
			}
			n.event(eventlog.Event{Kind: eventlog.PeerAdded, Peer: e.Name, Addr: e.Addr.String(), Detail: detail})
		}
		m.entry, m.verified = e, haveKey
		if e.Seen > m.seen || !m.trusted {
			m.addr, m.seen, m.trusted = e.Addr, e.Seen, haveKey
		}
		if !haveKey && m.voucher == "" && !m.answered && n.vouch(now, from) {
			n.retarget(e.Name, m, "vouched", func() { m.voucher = from })
		}
	}
}

// vouch says whether from, a member that relayed an entry we cannot
// verify, may vouch for it: only a configured member may (the join of
// 002 §3.2 goes through one), MaxVouches times per VouchWindow, so that
// an insider among them costs at most that many failed passes.
func (n *Node) vouch(now time.Time, from string) bool {
	if !n.configured[from] {
		return false
	}
	cut := now.Add(-VouchWindow).UnixNano()
	vs := slices.DeleteFunc(n.vouches[from], func(t int64) bool { return t < cut })
	if len(vs) >= MaxVouches {
		n.vouches[from] = vs
		return false
	}
	n.vouches[from] = append(vs, now.UnixNano())
	return true
}

// signSelf signs this agent's own entry.
func (n *Node) signSelf(now time.Time) {
	n.self = wire.Entry{Name: n.cfg.Name, Addr: n.cfg.Addr, Seen: now.UnixNano()}
	n.self.Sign(n.cfg.Key)
}

// directory returns the entries to send: all of them when they fit, else
// a random sample (synchronisation then converges over several passes).
func (n *Node) directory(now time.Time, withCert bool) []wire.Entry {
	// Our own entry is re-signed only when it would soon look stale to a
	// member with a directory TTL, not per datagram: a signature costs
	// ~28 µs on the pass's critical path.
	if now.UnixNano()-n.self.Seen >= n.gcPeriod().Nanoseconds() {
		n.signSelf(now)
	}
	es := make([]wire.Entry, 0, len(n.dir)+1)
	es = append(es, n.self)
	for _, name := range n.Peers() {
		// Relayed verbatim, and only what we verified: hearsay we could
		// not check is ours to use, not to vouch for.
		if m := n.dir[name]; m.verified {
			es = append(es, m.entry)
		}
	}
	// Budget: header and signature ~220 bytes, a certificate up to
	// MaxCertLen; an entry is at most 1+63+1+16+2+8+64 bytes.
	budget := wire.MaxSize - 220
	if withCert {
		budget -= len(n.cfg.Cert) + 2
	}
	limit := min(wire.MaxEntries, budget/155)
	if len(es) > limit {
		rest := es[1:]
		n.cfg.Rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		es = es[:limit]
	}
	return es
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

// actions carries out policy actions, and whatever they lead to.
func (n *Node) actions(now time.Time, acts []circulation.Action) {
	for _, a := range acts {
		switch a.Kind {
		case circulation.Pass:
			if n.dir[a.Peer] == nil {
				// The policy chose a member we no longer know: a failed pass.
				n.event(eventlog.Event{Kind: eventlog.PassFailed, Token: a.Token.String(), Peer: a.Peer, Reason: "unknown_peer"})
				n.actions(now, n.pol.PassFailed(now, a.Token, a.Peer))
				continue
			}
			if err := n.ep.Pass(now, a.Token, a.Peer); err != nil {
				n.event(eventlog.Event{Kind: eventlog.AgentNotice, Token: a.Token.String(), Reason: "policy_error", Detail: err.Error()})
				continue
			}
		case circulation.Discard:
			if err := n.ep.Discard(a.Token, "discarded"); err != nil {
				n.event(eventlog.Event{Kind: eventlog.AgentNotice, Token: a.Token.String(), Reason: "policy_error", Detail: err.Error()})
				continue
			}
			n.event(eventlog.Event{Kind: eventlog.TokenDiscarded, Token: a.Token.String(), Reason: a.Reason, Detail: a.Detail})
		case circulation.OpStart:
			n.ops = append(n.ops, a.Token)
			n.event(eventlog.Event{Kind: eventlog.OpStarted, Token: tokenString(a.Token), Reason: a.Reason, Detail: a.Detail})
			continue
		case circulation.OpEnd:
			if i := slices.Index(n.ops, a.Token); i >= 0 {
				n.ops = slices.Delete(n.ops, i, i+1)
			}
			n.event(eventlog.Event{Kind: eventlog.OpFinished, Token: tokenString(a.Token), Reason: a.Reason, Detail: a.Detail})
			continue
		case circulation.Generate:
			// Token ids are (generation time, origin): unique, and later
			// tokens are larger, so the sandwich rule removes the newer of
			// two (002 §3.2).
			g := max(now.UnixNano(), n.lastGen+1)
			n.lastGen = g
			t := wire.TokenID{Gen: g, Origin: n.cfg.Name}
			if a.Reason == "loss" {
				n.event(eventlog.Event{Kind: eventlog.TokenRegenerated, Token: t.String(), Reason: a.Reason, Detail: a.Detail})
			}
			if err := n.ep.Hold(t, 0); err != nil {
				panic(err) // a fresh id cannot be held already
			}
			n.drainGenerated(now, t, a.Reason)
			continue
		}
		n.drain(now)
	}
}

// tokenString is t's log form; the zero token (an operation no token
// enabled: the baseline) is empty.
func tokenString(t wire.TokenID) string {
	if t == (wire.TokenID{}) {
		return ""
	}
	return t.String()
}

// drainGenerated handles the effects of Hold for a generated token.
func (n *Node) drainGenerated(now time.Time, t wire.TokenID, reason string) {
	for _, f := range n.ep.Effects() {
		if f.Kind == passing.TokenAcquired {
			n.event(eventlog.Event{Kind: eventlog.TokenAcquired, Token: t.String(), Reason: "generated", Detail: reason, ReturnNS: n.hit(now)})
			n.actions(now, n.pol.Acquired(now, t, circulation.ByGeneration, reason))
		}
	}
}

func (n *Node) hit(now time.Time) int64 {
	var r int64
	if !n.lastHit.IsZero() {
		r = now.Sub(n.lastHit).Nanoseconds()
	}
	n.lastHit = now
	return r
}

var sentKinds = map[wire.Type]eventlog.Kind{wire.Move: eventlog.MoveSent, wire.Ack: eventlog.AckSent,
	wire.Commit: eventlog.CommitSent, wire.EarlyStop: eventlog.EarlyStopSent}
var receivedKinds = map[wire.Type]eventlog.Kind{wire.Move: eventlog.MoveReceived, wire.Ack: eventlog.AckReceived,
	wire.Commit: eventlog.CommitReceived, wire.EarlyStop: eventlog.EarlyStopReceived}

// drain carries out the Endpoint's effects in order.
func (n *Node) drain(now time.Time) {
	for {
		fs := n.ep.Effects()
		if len(fs) == 0 {
			return
		}
		for _, f := range fs {
			n.effect(now, f)
		}
	}
}

func (n *Node) effect(now time.Time, f passing.Effect) {
	tok := f.Token.String()
	k := sessionKey{f.Token, f.Session, f.Peer}
	switch f.Kind {
	case passing.SendMsg:
		n.send(now, f.Msg)
	case passing.Received:
		e := eventlog.Event{Kind: receivedKinds[f.Msg.Type], Token: tok, Session: f.Session, Peer: f.Peer, Cert: f.Msg.Cert}
		if n.cur != nil {
			e.Nonce = n.cur.Nonce
		}
		n.event(e)
	case passing.Rejected:
		n.reject(f.Reason, n.cur, n.curFrom, "")
	case passing.PassStarted:
		n.replyTo[k] = n.dir[f.Peer].addr
		n.event(eventlog.Event{Kind: eventlog.PassStarted, Token: tok, Session: f.Session, Peer: f.Peer, Addr: n.dir[f.Peer].addr.String()})
	case passing.PassSucceeded:
		n.event(eventlog.Event{Kind: eventlog.PassSucceeded, Token: tok, Session: f.Session, Peer: f.Peer})
		n.actions(now, n.pol.Passed(now, f.Token, f.Peer))
	case passing.PassCompleted:
		n.event(eventlog.Event{Kind: eventlog.PassCompleted, Token: tok, Session: f.Session, Peer: f.Peer, Reason: f.Reason, LatencyNS: f.Latency.Nanoseconds()})
		delete(n.replyTo, k)
		n.forgetPresigned(k)
	case passing.PassFailed:
		n.event(eventlog.Event{Kind: eventlog.PassFailed, Token: tok, Session: f.Session, Peer: f.Peer, Reason: f.Reason})
		delete(n.replyTo, k)
		n.forgetPresigned(k)
		if f.Reason == "ack_timeout" {
			if m := n.dir[f.Peer]; m != nil {
				n.retarget(f.Peer, m, "unanswered", func() { m.missed++ })
			}
			n.actions(now, n.pol.PassFailed(now, f.Token, f.Peer))
		}
	case passing.TokenAcquired:
		if f.Reason != "commit" {
			return // generated tokens are reported by drainGenerated
		}
		reason := "commit"
		if f.Late {
			reason = "late_commit"
		}
		n.event(eventlog.Event{Kind: eventlog.TokenAcquired, Token: tok, Session: f.Session, Peer: f.Peer, Reason: reason, ReturnNS: n.hit(now)})
		n.actions(now, n.pol.Acquired(now, f.Token, circulation.ByPass, ""))
	case passing.TokenReleased:
		n.event(eventlog.Event{Kind: eventlog.TokenReleased, Token: tok, Session: f.Session, Peer: f.Peer, Reason: f.Reason})
	}
}

// Prepare signs, ahead of need, the datagrams the node will most likely
// send next: the Commit of a pass whose Move just left, and the EarlyStop
// of a session whose Ack just left. The driver calls it after sending,
// while the network round trip is under way, which takes two Ed25519
// signatures off every pass's critical path (002 requirement iii).
func (n *Node) Prepare(now time.Time) {
	for _, r := range n.toPresign {
		d := wire.Datagram{Type: r.k.typ, Sender: n.cfg.Name, Token: r.k.token, Session: r.k.session, Nonce: n.nextNonce(now)}
		b, err := d.Encode(n.cfg.Key, n.cfg.Addr, r.to)
		if err == nil {
			n.presigned[r.k] = presignedDatagram{to: r.to, nonce: d.Nonce, data: b}
		}
	}
	n.toPresign = n.toPresign[:0]
}

// nextNonce is a timestamp made strictly increasing, so that no two
// datagrams of this agent share a signature (002 §3).
func (n *Node) nextNonce(now time.Time) uint64 {
	n.nonce = max(n.nonce+1, uint64(now.UnixNano()))
	return n.nonce
}

// send encodes and signs a datagram for the endpoint's message.
func (n *Node) send(now time.Time, m passing.Msg) {
	k := sessionKey{m.Token, m.Session, m.To}
	to, ok := n.replyTo[k]
	if !ok {
		mem := n.dir[m.To]
		if mem == nil {
			n.event(eventlog.Event{Kind: eventlog.AgentNotice, Token: m.Token.String(), Reason: "no_address", Detail: "no address for " + m.To})
			return
		}
		to = mem.addr
	}
	pk := presignKey{k, m.Type}
	if p, ok := n.presigned[pk]; ok {
		delete(n.presigned, pk)
		if p.to == to && m.Attempt == 1 {
			n.emitSent(m, to, p.nonce)
			n.ready.Packets = append(n.ready.Packets, Packet{To: to, Data: p.data})
			return
		}
	}
	d := wire.Datagram{Type: m.Type, Sender: n.cfg.Name, Token: m.Token, Session: m.Session, Nonce: n.nextNonce(now)}
	if m.Type == wire.Move || m.Type == wire.Ack {
		d.ReplyPort = n.cfg.Addr.Port()
		if m.Cert {
			d.Cert = n.cfg.Cert
		}
		d.Dir = n.directory(now, m.Cert)
		if m.Attempt == 1 {
			next := wire.Commit
			if m.Type == wire.Ack {
				next = wire.EarlyStop
			}
			n.toPresign = append(n.toPresign, presignReq{presignKey{k, next}, to})
		}
	}
	b, err := d.Encode(n.cfg.Key, n.cfg.Addr, to)
	if err != nil {
		n.event(eventlog.Event{Kind: eventlog.AgentNotice, Token: m.Token.String(), Reason: "encode_error", Detail: err.Error()})
		return
	}
	n.emitSent(m, to, d.Nonce)
	n.ready.Packets = append(n.ready.Packets, Packet{To: to, Data: b})
}

func (n *Node) emitSent(m passing.Msg, to netip.AddrPort, nonce uint64) {
	n.event(eventlog.Event{Kind: sentKinds[m.Type], Token: m.Token.String(), Session: m.Session, Peer: m.To,
		Addr: to.String(), Attempt: m.Attempt, Cert: m.Cert, Nonce: nonce})
}

// forgetPresigned drops what was signed for a session that ended.
func (n *Node) forgetPresigned(k sessionKey) {
	delete(n.presigned, presignKey{k, wire.Commit})
	delete(n.presigned, presignKey{k, wire.EarlyStop})
}
