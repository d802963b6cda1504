package node

import (
	"net/netip"
	"slices"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
)

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
