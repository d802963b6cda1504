package eventlog

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// checkFast fails if decodeFast accepts line with another answer than
// encoding/json's (decodeJSON).
func checkFast(t *testing.T, line []byte) bool {
	t.Helper()
	got, ok := decodeFast(line)
	if !ok {
		return false
	}
	want, err := decodeJSON(line)
	if err != nil {
		t.Fatalf("decodeFast accepted %q, which encoding/json refuses: %v", line, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeFast(%q)\n got %+v\nwant %+v", line, got, want)
	}
	return true
}

// randomEvent is an event of a kind this package lists, with fields of
// every type, strings with and without escapes.
func randomEvent(r *rand.Rand) Event {
	randomString := randomString
	if r.IntN(2) == 0 {
		// Only what a run writes: plain ASCII (and empty: omitted).
		randomString = func(r *rand.Rand) string {
			return []string{"", "A", "1700000000000000000@A", "ack_timeout", "10.0.0.1:7400", "x y~\x7f"}[r.IntN(6)]
		}
	}
	kinds := []Kind{MoveSent, CommitReceived, PassCompleted, TokenAcquired, AgentStarted, RejectionsSummary, LinkProfile}
	e := Event{Agent: randomString(r), Seq: r.Uint64() >> r.IntN(64), MonoNS: r.Int64() - r.Int64(), WallNS: r.Int64(),
		Kind: kinds[r.IntN(len(kinds))], Token: randomString(r), Session: r.Uint64() >> r.IntN(64), Peer: randomString(r),
		Addr: randomString(r), Reason: randomString(r), Attempt: r.IntN(5) - 1, Cert: r.IntN(2) == 0, Nonce: r.Uint64() >> r.IntN(64),
		LatencyNS: r.Int64() >> r.IntN(63), ReturnNS: r.Int64N(3) - 1, LocalNS: r.Int64() >> r.IntN(64), Seed: r.Uint64() >> r.IntN(64), Version: r.IntN(3),
		Link: randomString(r), Profile: randomString(r), Detail: randomString(r)}
	if r.IntN(8) == 0 {
		e.TimeScale = 1000
	}
	if r.IntN(8) == 0 {
		e.Counts = map[string]uint64{"bad-signature": 3}
	}
	return e
}

// The fast decoder agrees with encoding/json on what AppendJSON writes,
// and takes the common lines itself; on lines damaged anywhere it either
// agrees or leaves them to encoding/json.
func TestDecodeFastAgreesWithEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	fast := 0
	const n = 20000
	for range n {
		e := randomEvent(r)
		line := append(e.AppendJSON(nil), '\n')
		if checkFast(t, line) {
			fast++
		}
		// Damage: a byte changed, removed or doubled.
		d := bytes.Clone(line)
		i := r.IntN(len(d) - 1)
		switch r.IntN(3) {
		case 0:
			const alphabet = "{}[]\",:0123456789-.eE \\tfnul\x00\xff"
			d[i] = alphabet[r.IntN(len(alphabet))]
		case 1:
			d = append(d[:i], d[i+1:]...)
		case 2:
			d = append(d[:i+1], d[i:]...)
		}
		checkFast(t, d)
	}
	if fast < n/20 {
		t.Errorf("decodeFast took %d of %d plain lines", fast, n)
	}
	plain := []byte(`{"agent":"A","seq":4,"mono_ns":11100000000,"wall_ns":1243296010100000000,"kind":"move_sent","token":"1243296000100000000@A","session":1,"peer":"B","addr":"10.77.0.2:7400","attempt":1,"nonce":1243296010100000000}` + "\n")
	if !checkFast(t, plain) {
		t.Error("decodeFast left a move_sent line of a run to encoding/json")
	}
}

func FuzzDecodeFast(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		e := randomEvent(r)
		f.Add(append(e.AppendJSON(nil), '\n'))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkFast(t, line) })
}

func BenchmarkDecode(b *testing.B) {
	line := []byte(`{"agent":"A","seq":4,"mono_ns":11100000000,"wall_ns":1243296010100000000,"kind":"move_sent","token":"1243296000100000000@A","session":1,"peer":"B","addr":"10.77.0.2:7400","attempt":1,"nonce":1243296010100000000}` + "\n")
	for _, c := range []struct {
		name string
		f    func([]byte) (Event, error)
	}{{"json", decodeJSON}, {"fast", decode}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.f(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
