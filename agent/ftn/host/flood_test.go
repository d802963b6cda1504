package host

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/ca"
	agentdriver "tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
	"tokenbed/agent/ftn/server"
)

func serverHost(t *testing.T) *Host {
	t.Helper()
	dir := t.TempDir()
	// LoadMember checks the certificate against the wall clock.
	now := time.Now()
	src := ca.Seeded(1, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err := ca.InitWith(dir, src); err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueWith(dir, "s0", src); err != nil {
		t.Fatal(err)
	}
	creds, err := ca.LoadMember(dir, "s0", filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	self := netip.MustParseAddrPort("127.0.0.1:7000")
	s, err := server.New(server.Config{Servers: []msg.Peer{{Name: "s0", Addr: self}}, Inc: 1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Self: self, Codec: codec.New(creds), Tick: 10 * time.Millisecond, Role: "server", Server: s})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFloodSampled: a flood of hostile datagrams costs the log at most
// the sampler's lines per reason per interval, as the token passing
// agent's rejections do, and nothing is lost: the lines logged plus the
// rejections_summary counts, and the agent_stopping record, give every
// rejection by reason. 5,000 datagrams of two kinds in the first second,
// 300 in the next.
func TestFloodSampled(t *testing.T) {
	h := serverHost(t)
	t0 := time.Now()
	src := netip.MustParseAddrPort("127.0.0.1:9999")
	magic := make([]byte, 100)                    // no "FT": malformed:magic
	version := append([]byte("FT\x09"), magic...) // a version we do not speak: malformed:version
	sent := map[string]uint64{}
	var evs []eventlog.Event
	evs = append(evs, h.Start(t0).Events...)
	at := func(i int, base time.Time) time.Time { return base.Add(time.Duration(i) * 100 * time.Microsecond) }
	for i := range 5000 {
		b, r := magic, "malformed:magic"
		if i%5 == 0 {
			b, r = version, "malformed:version"
		}
		evs = append(evs, h.Receive(at(i, t0), src, b).Events...)
		sent[r]++
	}
	for i := range 300 {
		evs = append(evs, h.Receive(at(i, t0.Add(1500*time.Millisecond)), src, magic).Events...)
		sent["malformed:magic"]++
	}
	evs = append(evs, h.Stop(t0.Add(2*time.Second), "stopped").Events...)

	perInterval := map[int]map[string]int{} // lines logged per interval and reason
	counted := map[string]uint64{}
	interval := 0
	var stopping eventlog.Event
	for _, e := range evs {
		switch e.Kind {
		case eventlog.DatagramRejected:
			if perInterval[interval] == nil {
				perInterval[interval] = map[string]int{}
			}
			perInterval[interval][e.Reason]++
			counted[e.Reason]++
		case eventlog.RejectionsSummary:
			for r, n := range e.Counts {
				counted[r] += n
			}
			interval++
		case eventlog.AgentStopping:
			stopping = e
		}
	}
	for iv, m := range perInterval {
		for r, n := range m {
			if n > agentdriver.DefaultRejectionSample {
				t.Errorf("interval %d: %d lines for %s, want at most %d", iv, n, r, agentdriver.DefaultRejectionSample)
			}
		}
	}
	for r, n := range sent {
		if counted[r] != n {
			t.Errorf("%s: %d logged or summarised, want %d", r, counted[r], n)
		}
	}
	if want := agentdriver.Stopping("stopped", sent); stopping.Detail != want.Detail {
		t.Errorf("agent_stopping detail %q, want %q", stopping.Detail, want.Detail)
	}
	t.Logf("%d datagrams, %d log records; per interval %v", 5300, len(evs), perInterval)
}
