package driver

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"tokenbed/agent/eventlog"
)

// TestFloodLogVolume floods a real agent on loopback with garbage and with
// datagrams whose signature does not verify, and measures what the flood
// costs its event log, with every rejection logged (the old behaviour) and
// with the sampler. Counts must stay exact either way: logged rejections
// plus the summaries' counts equal the node's own counters.
func TestFloodLogVolume(t *testing.T) {
	const n, rate = 20000, 10000 // datagrams, per second
	type result struct {
		bytes, rejected int64
		secs            float64
		lines           int // datagram_rejected lines
		reasons         int
	}
	flood := func(sample int) result {
		f := newFloodTarget(t, sample)
		c, a, d := f.c, f.a, f.move
		_, wrong, _ := ed25519.GenerateKey(nil)
		garbage := make([]byte, 200)
		elapsed := f.send(n, rate, func(i int) []byte {
			if i%2 == 0 {
				d.Session, d.Nonce = uint64(i), uint64(i)
				// B's genuine certificate, signed with another key.
				b, err := d.Encode(wrong, f.src, c.addrs["A"])
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			garbage[0] = byte(i)
			return garbage
		})
		secs := elapsed.Seconds()
		f.stop()
		path := filepath.Join(c.dir, "A.jsonl")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		var logged uint64
		lines := 0
		err = eventlog.Read(mustOpen(t, path), path, func(e eventlog.Event) error {
			switch e.Kind {
			case eventlog.DatagramRejected:
				logged++
				lines++
			case eventlog.RejectionsSummary:
				for _, v := range e.Counts {
					logged += v
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var counted uint64
		for _, v := range a.Node.Rejected() {
			counted += v
		}
		// The kernel drops what the socket buffer cannot hold when the
		// machine is loaded: what matters is that every rejection the
		// node counted is accounted for, over a flood big enough to
		// exceed the sample many times over.
		if logged != counted || counted < n/10 {
			t.Errorf("sample %d: the log accounts for %d rejections, the node counted %d of %d sent", sample, logged, counted, n)
		}
		return result{st.Size(), int64(counted), secs, lines, len(a.Node.Rejected())}
	}
	before, after := flood(-1), flood(0)
	per := func(r result) float64 { return float64(r.bytes) / float64(r.rejected) * 1000 }
	t.Logf("every rejection logged: %d rejected in %.2f s, log %d bytes: %.0f bytes per 1,000 rejected, %.0f bytes/s",
		before.rejected, before.secs, before.bytes, per(before), float64(before.bytes)/before.secs)
	t.Logf("sampled (%d per reason per %v): %d rejected in %.2f s, log %d bytes: %.0f bytes per 1,000 rejected, %.0f bytes/s",
		DefaultRejectionSample, DefaultRejectionInterval, after.rejected, after.secs, after.bytes, per(after), float64(after.bytes)/after.secs)
	// The bound does not depend on the flood's rate (the machine may not
	// reach the one asked for): at most the sample per reason for every
	// interval the flood and its drain spanned.
	if bound := DefaultRejectionSample * after.reasons * (int(after.secs/DefaultRejectionInterval.Seconds()) + 2); after.lines > bound {
		t.Errorf("sampled log: %d rejections logged one by one, want at most %d", after.lines, bound)
	}
	if before.lines != int(before.rejected) {
		t.Errorf("sample -1 logged %d of %d rejections one by one", before.lines, before.rejected)
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
