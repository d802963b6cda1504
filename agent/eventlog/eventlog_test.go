package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func randomString(r *rand.Rand) string {
	alphabet := []string{"", "A", "1700000000000000000@A", "ack_timeout", "q\"uote", "back\\slash", "new\nline", "<tag>&", "é", "\x01", "10.0.0.1:7400"}
	return alphabet[r.IntN(len(alphabet))]
}

// AppendJSON must produce exactly what encoding/json produces.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 20000; i++ {
		e := Event{Agent: randomString(r), Seq: r.Uint64(), MonoNS: r.Int64() - r.Int64(), WallNS: r.Int64(),
			Kind: Kind(randomString(r)), Token: randomString(r), Session: r.Uint64() >> r.IntN(64), Peer: randomString(r),
			Addr: randomString(r), Reason: randomString(r), Attempt: r.IntN(3) - 1, Cert: r.IntN(2) == 0, Nonce: r.Uint64() >> r.IntN(64),
			LatencyNS: r.Int64N(3) - 1, ReturnNS: r.Int64() >> r.IntN(63), LocalNS: r.Int64() >> r.IntN(64), Role: randomString(r), Seed: r.Uint64() >> r.IntN(64),
			Version: r.IntN(3), Link: randomString(r), Profile: randomString(r), Detail: randomString(r)}
		switch r.IntN(4) {
		case 0:
			e.TimeScale = 0
		case 1:
			e.TimeScale = 1000
		case 2:
			e.TimeScale = r.Float64() * 1e6
		case 3:
			e.TimeScale = 1e21 + r.Float64()
		}
		if n := r.IntN(4); n > 0 {
			e.Counts = map[string]uint64{}
			for j := 0; j < n; j++ {
				e.Counts[randomString(r)] = r.Uint64() >> r.IntN(64)
			}
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON differs:\n got %s\nwant %s", got, want)
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "A.jsonl")
	w, f, err := Create(path, "A")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Kind: AgentStarted, Seed: 9}, Event{Kind: TokenAcquired, Token: "1@A", Session: 3}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Kind: AgentStopping}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	evs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Seq != 1 || evs[2].Seq != 3 || evs[1].Agent != "A" || evs[1].MonoNS == 0 || evs[1].WallNS == 0 {
		t.Fatalf("read back %+v", evs)
	}
}

func TestReadErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		// Strict for the kinds listed here; another kind's fields are
		// another protocol's (TestEnvelopeCarriesAnotherProtocolsFields).
		"unknown field": `{"agent":"A","seq":1,"mono_ns":1,"wall_ns":1,"kind":"x"}` + "\n" + `{"agent":"A","seq":2,"kind":"token_acquired","bogus":1}` + "\n",
		"not json":      "{\"agent\":\"A\",\"kind\":\"x\"}\nnot json\n",
		"truncated":     "{\"agent\":\"A\",\"kind\":\"x\"}\n{\"agent\":\"A\",\"ki",
		"no kind":       "{\"agent\":\"A\"}\n",
	}
	for name, content := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(content), 0o644)
		_, err := ReadFile(path)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != path {
			t.Errorf("%s: %v, want a ParseError naming the file", name, err)
			continue
		}
		wantLine := 2
		if name == "no kind" {
			wantLine = 1
		}
		if pe.Line != wantLine {
			t.Errorf("%s: line %d, want %d (%v)", name, pe.Line, wantLine, err)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	e := Event{Agent: "A", Seq: 12345, MonoNS: 5101430679657, WallNS: 1795388863467538775, Kind: PassCompleted,
		Token: "1795388860512189099@A", Session: 29, Peer: "B", Reason: "earlystop", LatencyNS: 990324}
	buf := make([]byte, 0, 512)
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(e)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		for b.Loop() {
			buf = e.AppendJSON(buf[:0])
		}
	})
}

// WriteAt's monotonic stamp is CLOCK_MONOTONIC, like Write's.
func TestWriteAtStampsMonotonic(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "A")
	before, _ := Now()
	w.WriteAt(time.Now(), Event{Kind: AgentStarted})
	after, _ := Now()
	var e Event
	if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	// The pairing of the two clocks is exact to about 100 ns.
	const slack = 2000
	if e.MonoNS < before-slack || e.MonoNS > after+slack {
		t.Fatalf("mono %d outside [%d, %d]", e.MonoNS, before, after)
	}
}

// Another protocol's event: the envelope, and its own fields flat beside
// it, written and read back; a token passing kind stays strict.
func TestEnvelopeCarriesAnotherProtocolsFields(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "client7")
	ev := Event{Kind: "lock_acquired", Extra: map[string]json.RawMessage{
		"name": json.RawMessage(`"printer"`), "fence": json.RawMessage(`[3,17]`), "mode": json.RawMessage(`"exclusive"`)}}
	if err := w.Write(ev); err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	if !strings.HasPrefix(line, `{"agent":"client7","seq":1,"mono_ns":`) || !strings.HasSuffix(line, `"kind":"lock_acquired","fence":[3,17],"mode":"exclusive","name":"printer"}`+"\n") {
		t.Errorf("line %s: want the envelope, then the protocol's fields in key order", line)
	}
	var got []Event
	if err := Read(strings.NewReader(line), "x.jsonl", func(e Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Envelope() != (Envelope{Agent: "client7", Seq: 1, MonoNS: got[0].MonoNS, WallNS: got[0].WallNS, Kind: "lock_acquired"}) ||
		got[0].MonoNS == 0 || string(got[0].Extra["fence"]) != "[3,17]" || len(got[0].Extra) != 3 {
		t.Errorf("read back %+v", got)
	}
	bad := `{"agent":"A","seq":1,"mono_ns":1,"wall_ns":1,"kind":"token_acquired","fence":[3,17]}` + "\n"
	err := Read(strings.NewReader(bad), "a.jsonl", func(Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "a.jsonl:1") || !strings.Contains(err.Error(), "fence") {
		t.Errorf("unknown field in a token passing event: %v, want an error naming the line and field", err)
	}
}

// TestOpKinds: op_started and op_finished (the operation an agent does
// while it holds the token) are token passing kinds, read strictly, and
// keep their names: drivers and analyses refer to exactly these.
func TestOpKinds(t *testing.T) {
	if OpStarted != "op_started" || OpFinished != "op_finished" || !Known(OpStarted) || !Known(OpFinished) {
		t.Fatalf("op kinds: %q %q known %v %v", OpStarted, OpFinished, Known(OpStarted), Known(OpFinished))
	}
	e := Event{Agent: "A", Seq: 1, Kind: OpStarted, Token: "7@x", Reason: "token"}
	b := e.AppendJSON(nil)
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || back.Kind != OpStarted || back.Token != "7@x" || back.Reason != "token" {
		t.Fatalf("%s read back as %+v, %v", b, back, err)
	}
}
