package node

import (
	"net/netip"
	"testing"
	"time"

	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// Real nodes running the 3-way exchange put 004 §4's random id on the
// wire: every Move carries one, and every Ack and Commit, presigned or
// not, echoes the id of a Move of its session between the same two
// nodes. A datagram whose id is changed in flight fails its signature.
func TestSim3WayPassIDsOnTheWire(t *testing.T) {
	s := newSim(t, 11)
	s.exchange = passing.Exchange3Way
	s.loss = 0.05
	type pass struct {
		tok      wire.TokenID
		session  uint64
		from, to string
	}
	moves := map[pass]map[uint64]bool{}
	var echoes, commits int
	var commit []byte
	var commitFrom netip.AddrPort
	var commitTo string
	var bad []string
	s.tap = func(from netip.AddrPort, to string, data []byte) {
		d, err := wire.Decode(data)
		if err != nil {
			t.Fatalf("undecodable datagram on the link: %v", err)
		}
		if d.PassID == 0 {
			bad = append(bad, d.Type.String()+" without a pass id")
			return
		}
		switch d.Type {
		case wire.Move:
			p := pass{d.Token, d.Session, d.Sender, to}
			if moves[p] == nil {
				moves[p] = map[uint64]bool{}
			}
			moves[p][d.PassID] = true
		case wire.Ack, wire.Commit:
			p := pass{d.Token, d.Session, to, d.Sender} // the Move went the other way
			if d.Type == wire.Commit {
				p = pass{d.Token, d.Session, d.Sender, to}
				commits++
				commit, commitFrom, commitTo = append([]byte(nil), data...), from, to
			}
			if !moves[p][d.PassID] {
				bad = append(bad, d.Type.String()+" with an id no Move of its session carried")
			}
			echoes++
		}
	}
	s.addNode("A", rw(10*time.Millisecond, true), "B", "C")
	s.addNode("B", rw(10*time.Millisecond, false), "A", "C")
	s.addNode("C", rw(10*time.Millisecond, false), "A", "B")
	s.run(s.now.Add(20 * time.Second))
	if len(bad) > 0 {
		t.Fatalf("%d datagrams with a wrong pass id, first: %s", len(bad), bad[0])
	}
	if commits < 100 || echoes < 2*commits-10 {
		t.Fatalf("%d Commits and %d Acks and Commits in 20 s", commits, echoes)
	}
	d, _ := wire.Decode(commit)
	at := len(commit) - wire.SigLen - 8 // a Commit ends with its pass id
	commit[at+7] ^= 1
	if t2, _ := wire.Decode(commit); t2.PassID != d.PassID^1 {
		t.Fatalf("tampering changed pass id %x to %x, want %x", d.PassID, t2.PassID, d.PassID^1)
	}
	n := s.nodes[commitTo]
	before := n.Rejected()["bad-signature"]
	n.Receive(s.clock(commitTo), commitFrom, commit)
	n.Ready()
	if n.Rejected()["bad-signature"] != before+1 {
		t.Fatalf("a Commit with a tampered pass id was not refused for its signature (rejections %v)", n.Rejected())
	}
}
