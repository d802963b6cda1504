package driver

import (
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/clock"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// TestClockOffsetReachesTheNode runs two agents over real UDP, A with its
// clock 30 s ahead: the node reads A's clock (the token A generates is
// stamped with it, 003 Fig. 1 line 30), while its log keeps the
// reference time in wall_ns and the local reading in local_ns. B, on the
// reference clock, logs no local_ns.
func TestClockOffsetReachesTheNode(t *testing.T) {
	const offset = 30 * time.Second
	rw := func(name string) randomwalk.Config {
		return randomwalk.Config{Hold: time.Hour, RegenerateAfter: 10, ExpectedReturn: time.Hour, GenerateAtStart: name == "A"}
	}
	c := newCluster(t, []string{"A", "B"}, 0, 7, rw, passing.DefaultConfig())
	c.drivers["A"].Clock = clock.Skew{Offset: offset, Drift: 1e-4}
	before := time.Now()
	c.start()
	time.Sleep(200 * time.Millisecond)
	c.stop()

	evs, err := eventlog.ReadFile(filepath.Join(c.dir, "A.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var gen wire.TokenID
	for _, e := range evs {
		// 100 ppm over the test's fraction of a second adds microseconds.
		if d := time.Duration(e.LocalNS - e.WallNS); d < offset || d > offset+time.Millisecond {
			t.Errorf("A %s: local_ns − wall_ns = %v, want %v", e.Kind, d, offset)
		}
		if e.Kind == eventlog.TokenAcquired && e.Reason == "generated" {
			if gen, err = wire.ParseTokenID(e.Token); err != nil {
				t.Fatal(err)
			}
			if gen.Gen != e.LocalNS {
				t.Errorf("generated %v: its timestamp is not A's local reading %d", gen, e.LocalNS)
			}
		}
	}
	if gen.IsZero() {
		t.Fatal("A generated no token")
	}
	if lag := time.Unix(0, gen.Gen).Sub(before); lag < offset || lag > offset+5*time.Second {
		t.Errorf("token %v stamped %v after the test began, want about %v (A's offset)", gen, lag, offset)
	}
	evs, err = eventlog.ReadFile(filepath.Join(c.dir, "B.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.LocalNS != 0 {
			t.Errorf("B %s: local_ns %d on the reference clock", e.Kind, e.LocalNS)
		}
	}
}
