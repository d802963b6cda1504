package node

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

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
			// the member signs with (002 §3: an old certificate would
			// poison the key cache).
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
	n.ep.Deliver(now, passing.Msg{Type: d.Type, From: d.Sender, To: n.cfg.Name, Token: d.Token, Session: d.Session, PassID: d.PassID, Cert: len(d.Cert) > 0})
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
