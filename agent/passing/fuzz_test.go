package passing

import (
	"testing"
	"time"

	"tokenbed/agent/wire"
)

// FuzzEndpoint drives one Endpoint with an arbitrary sequence of
// authenticated datagrams, timer firings and policy calls decoded from the
// input: the step functions must never panic, and effects must stay
// consistent: a token released is no longer held, and every datagram is
// sent in the endpoint's own name.
func FuzzEndpoint(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{5, 0, 0, 1, 1, 0x21, 1, 0x31, 2, 0x41, 9, 9, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := boundedConfig(2, 2, 3)
		e, err := NewEndpoint(cfg, "B")
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"A", "B", "C", "X"}
		toks := []wire.TokenID{{Gen: 1, Origin: "A"}, {Gen: 2, Origin: "C"}}
		now := time.Unix(1000, 0)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			tok := toks[arg>>7&1]
			switch op % 6 {
			case 0, 1: // a datagram
				m := Msg{Type: wire.Type(arg&7 + 1), From: names[arg>>3&3], To: "B", Token: tok, Session: uint64(arg >> 5 & 3), Cert: op&8 != 0}
				if op&16 != 0 {
					m.To = names[op>>5&3]
				}
				e.Deliver(now, m)
			case 2: // time passes, timers fire
				now = now.Add(time.Duration(arg) * 3)
				e.Tick(now)
			case 3:
				e.Pass(now, tok, names[arg&3])
			case 4:
				e.Hold(tok, uint64(arg&7))
			case 5:
				e.Discard(tok, "fuzz")
			}
			held := map[wire.TokenID]bool{}
			for _, h := range e.Held() {
				held[h] = true
			}
			for _, fx := range e.Effects() {
				if fx.Kind == TokenReleased && held[fx.Token] {
					t.Fatalf("op %d: %v released but still held", i/2, fx.Token)
				}
				if fx.Kind == SendMsg && fx.Msg.From != "B" {
					t.Fatalf("op %d: sends as %s", i/2, fx.Msg.From)
				}
			}
		}
	})
}
