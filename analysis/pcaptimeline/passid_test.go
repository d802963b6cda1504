package pcaptimeline_test

import (
	"testing"
	"time"

	"tokenbed/agent/wire"
)

// A 3-way sender's two passes to one member in one session (004 §4) are
// two passes, told apart by their pass ids, not a Move and its
// retransmission; each line shows its pass id.
func TestTimelineThreeWayPasses(t *testing.T) {
	b := newBuilder(t)
	for i, id := range []uint64{0xa1, 0xb2} {
		at := time.Duration(i) * 10 * ms
		b.send(wire.Datagram{Type: wire.Move, Sender: "A", Token: tok1, Session: 1, PassID: id, Nonce: uint64(10 + i), ReplyPort: 7400},
			keyA, addrA, addrB, map[int]time.Duration{0: at + ms})
		b.send(wire.Datagram{Type: wire.Ack, Sender: "B", Token: tok1, Session: 1, PassID: id, Nonce: uint64(20 + i), ReplyPort: 7400},
			keyB, addrB, addrA, map[int]time.Duration{1: at + 2*ms})
	}
	out, errOut, code := run(t, b.file())
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	s := sections(out)["token 1000@A session 1: 4 transmissions, 0 retransmissions"]
	if s == nil {
		t.Fatalf("no session section with 4 transmissions and no retransmission:\n%s", out)
	}
	matchLines(t, "session 1", s[1:], []string{
		`FRAME`,
		`#1 .* A → B +Move +10 +tx1 pass a1$`,
		`#2 .* B → A +Ack +20 +tx2 pass a1$`,
		`#3 .* A → B +Move +11 +tx3 pass b2$`,
		`#4 .* B → A +Ack +21 +tx4 pass b2$`,
	})
}
