package node

import (
	"net/netip"
	"slices"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

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
			if n.loseNext {
				n.loseInTransit(now, a)
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
// send next (passing.Exchange.Next): the Commit of a pass whose Move just
// left, and, in the 4-way exchange, the EarlyStop of a session whose Ack
// just left. The driver calls it after sending,
// while the network round trip is under way, which takes two Ed25519
// signatures off every pass's critical path (002 requirement iii).
func (n *Node) Prepare(now time.Time) {
	for _, r := range n.toPresign {
		d := wire.Datagram{Type: r.k.typ, Sender: n.cfg.Name, Token: r.k.token, Session: r.k.session, PassID: r.pass, Nonce: n.nextNonce(now)}
		b, err := d.Encode(n.cfg.Key, n.cfg.Addr, r.to)
		if err == nil {
			n.presigned[r.k] = presignedDatagram{to: r.to, pass: r.pass, nonce: d.Nonce, data: b}
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
		// Only for this pass: a Commit signed for an earlier pass of the
		// session carries that pass's id (3-way).
		if p.to == to && p.pass == m.PassID && m.Attempt == 1 {
			n.emitSent(m, to, p.nonce)
			n.ready.Packets = append(n.ready.Packets, Packet{To: to, Data: p.data})
			return
		}
	}
	d := wire.Datagram{Type: m.Type, Sender: n.cfg.Name, Token: m.Token, Session: m.Session, PassID: m.PassID, Nonce: n.nextNonce(now)}
	if m.Type == wire.Move || m.Type == wire.Ack {
		d.ReplyPort = n.cfg.Addr.Port()
		if m.Cert {
			d.Cert = n.cfg.Cert
		}
		d.Dir = n.directory(now, m.Cert)
		if next, ok := n.ep.Exchange().Next(m.Type); ok && m.Attempt == 1 {
			n.toPresign = append(n.toPresign, presignReq{presignKey{k, next}, to, m.PassID})
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
