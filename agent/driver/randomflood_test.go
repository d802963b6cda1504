package driver

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"tokenbed/agent/wire"
)

// TestRandomFloodStaysWithinTheGlobalBound floods a real agent on
// loopback with random bytes and with a member's genuine datagram with a
// few random bytes changed, which between them produce many distinct
// rejection reasons. The sampled part of the log (rejections, unusual
// events and their summaries) must stay within DefaultRejectionBudget
// events of at most MaxSampledEventBytes, plus two summaries of at most
// MaxSummaryBytes, per interval, whatever the number of reasons; the
// counts must stay exact. Seeded (the seed is logged).
func TestRandomFloodStaysWithinTheGlobalBound(t *testing.T) {
	const n, rate, seed = 20000, 10000, 21
	rnd := rand.New(rand.NewPCG(seed, 3))
	f := newFloodTarget(t, 0)
	c, a, d := f.c, f.a, f.move
	elapsed := f.send(n, rate, func(i int) []byte {
		if i%2 == 0 {
			b := make([]byte, rnd.IntN(wire.MaxSize))
			for j := range b {
				b[j] = byte(rnd.Uint32())
			}
			return b
		}
		d.Session, d.Nonce = uint64(i), uint64(i)
		b, err := d.Encode(f.cred.Key, f.src, c.addrs["A"])
		if err != nil {
			t.Fatal(err)
		}
		for k := 1 + rnd.IntN(3); k > 0; k-- {
			b[rnd.IntN(len(b))] = byte(rnd.Uint32())
		}
		return b
	})
	secs := elapsed.Seconds()
	f.stop()

	var sampledBytes, lines int
	var logged, counted uint64
	sc := bufio.NewScanner(mustOpen(t, filepath.Join(c.dir, "A.jsonl")))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Kind   string            `json:"kind"`
			Counts map[string]uint64 `json:"counts"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		size := len(sc.Bytes()) + 1
		switch e.Kind {
		case "datagram_rejected", "token_introduced", "target_added", "target_dropped", "peer_added", "peer_removed":
			if size > MaxSampledEventBytes {
				t.Errorf("a %s line of %d bytes, over MaxSampledEventBytes: %s", e.Kind, size, sc.Bytes())
			}
			if e.Kind == "datagram_rejected" {
				logged++
			}
			sampledBytes += size
			lines++
		case "rejections_summary", "unusual_summary":
			if size > MaxSummaryBytes {
				t.Errorf("a %s line of %d bytes, over MaxSummaryBytes", e.Kind, size)
			}
			if e.Kind == "rejections_summary" {
				for _, v := range e.Counts {
					logged += v
				}
			}
			sampledBytes += size
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, v := range a.Node.Rejected() {
		counted += v
	}
	reasons := len(a.Node.Rejected())
	intervals := int(secs/DefaultRejectionInterval.Seconds()) + 2
	bound := intervals * (DefaultRejectionBudget*MaxSampledEventBytes + 2*MaxSummaryBytes)
	t.Logf("seed %d: %d datagrams in %.2f s, %d rejected for %d distinct reasons; %d sampled lines, %d bytes (%.0f bytes/s), bound %d bytes",
		seed, n, secs, counted, reasons, lines, sampledBytes, float64(sampledBytes)/secs, bound)
	if reasons < 5 {
		t.Fatalf("only %d distinct reasons: the flood does not exercise the global bound", reasons)
	}
	if logged != counted || counted < n/10 {
		t.Errorf("the log accounts for %d rejections, the node counted %d of %d sent", logged, counted, n)
	}
	if lines > intervals*DefaultRejectionBudget {
		t.Errorf("%d events sampled one by one, want at most %d (%d per interval)", lines, intervals*DefaultRejectionBudget, DefaultRejectionBudget)
	}
	if sampledBytes > bound {
		t.Errorf("the sampled events took %d bytes, over the bound of %d", sampledBytes, bound)
	}
}
