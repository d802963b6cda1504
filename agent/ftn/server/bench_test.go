package server

import (
	"net/netip"
	"testing"
	"time"

	"tokenbed/agent/ftn/msg"
)

// serving returns a one-server service, READY and leading, with one
// registered client.
func serving(tb testing.TB, skip bool) (*Server, msg.Peer, msg.Msg) {
	tb.Helper()
	s := oneServer(tb, Config{SkipFreshness: skip})
	c := msg.Peer{Name: "c0", Addr: netip.MustParseAddrPort("10.0.1.1:7000")}
	return s, c, registerClient(tb, s, c)
}

// acquireRelease runs n acquire+release steps of a client on one name
// (request numbers from *req on), as the driver would: Step, Ready.
func acquireRelease(s *Server, c msg.Peer, reg msg.Msg, req *uint64, n int) {
	m := msg.Msg{Client: reg.Client, RegVersion: reg.RegVersion, Version: s.g.Version, Name: "t0", Mode: msg.Exclusive}
	for range n {
		*req++
		m.Kind, m.Req = msg.Acquire, *req
		s.Step(c, m)
		s.Ready()
		*req++
		m.Kind, m.Req = msg.Release, *req
		s.Step(c, m)
		s.Ready()
	}
}

// BenchmarkAcquireRelease is the server's hot path, an acquire and a
// release, with the freshness check (check) and without
// (Config.SkipFreshness: nocheck). The two run interleaved in batches in
// one run, so that the machine's load weighs on both alike; ratio is
// check's time over nocheck's.
func BenchmarkAcquireRelease(b *testing.B) {
	sc, c, rc := serving(b, false)
	sn, _, rn := serving(b, true)
	var qc, qn uint64
	var tc, tn time.Duration
	const batch = 256
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		k := min(batch, b.N-done)
		t := time.Now()
		acquireRelease(sc, c, rc, &qc, k)
		tc += time.Since(t)
		t = time.Now()
		acquireRelease(sn, c, rn, &qn, k)
		tn += time.Since(t)
	}
	b.ReportMetric(float64(tc.Nanoseconds())/float64(b.N), "check-ns/op")
	b.ReportMetric(float64(tn.Nanoseconds())/float64(b.N), "nocheck-ns/op")
	b.ReportMetric(float64(tc)/float64(tn), "ratio")
}

// TestAcquireReleaseServes: the benchmark's loop is answered (a grant
// and a release reply per step), with and without the check, so the
// benchmark measures the real path.
func TestAcquireReleaseServes(t *testing.T) {
	for _, skip := range []bool{false, true} {
		s, c, reg := serving(t, skip)
		var req uint64
		acquireRelease(s, c, reg, &req, 3)
		m := msg.Msg{Kind: msg.Acquire, Client: reg.Client, RegVersion: reg.RegVersion, Version: s.g.Version, Req: req + 1, Name: "t0", Mode: msg.Exclusive}
		s.Step(c, m)
		out, evs := s.Ready()
		if len(out) != 1 || out[0].Msg.Kind != msg.Reply || out[0].Msg.Fence.Counter != 4 || len(evs) != 1 || evs[0].Kind != "granted" {
			t.Errorf("skip=%v: after 3 acquire+release, acquire #4 gave %v %v, want the 4th grant", skip, out, evs)
		}
	}
}
