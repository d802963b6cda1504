package sim

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"tokenbed/agent/clock"
	"tokenbed/agent/eventlog"
)

// A Skewed process reads its own clock: A, 2 s ahead and 5% fast, ticks
// every 1 s of its clock, so every 1/1.05 s of virtual time; B, on
// virtual time, receives the ticks then (plus the link's 1 ms and the
// signing time) and sees A's readings in local_ns, while wall_ns stays
// virtual time.
func TestSkewedProcessReadsItsClock(t *testing.T) {
	w := twoHosts(t, Config{VerifyTime: -1, SignTime: -1}, "delay 1ms")
	a := &echo{peer: netip.AddrPortFrom(addrB, 7400), period: time.Second}
	b := &echo{}
	skew := clock.Skew{Offset: 2 * time.Second, Drift: 0.05}
	if err := w.Start("A", Skewed(a, skew), logPath(t, "A")); err != nil {
		t.Fatal(err)
	}
	if err := w.Start("B", b, logPath(t, "B")); err != nil {
		t.Fatal(err)
	}
	t0 := w.Now()
	if err := w.RunUntil(t0.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// Tick k is due at local 2 s + k s, i.e. virtual k/1.05 s (rounded up
	// to the nanosecond), and arrives 1 ms later.
	if len(b.gotAt) != 10 {
		t.Fatalf("B got %d ticks in 10 s, want 10 (one per 1/1.05 s)", len(b.gotAt))
	}
	for k, at := range b.gotAt {
		due := time.Duration(float64(k+1) * float64(time.Second) / 1.05)
		if d := at.Sub(t0) - time.Millisecond - due; d < 0 || d > time.Microsecond {
			t.Errorf("tick %d arrived at +%v, want +%v + 1 ms", k+1, at.Sub(t0), due)
		}
	}
	if err := w.Signal("B", syscall.SIGUSR1); err == nil {
		t.Error("a process that handles no signal took SIGUSR1")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Skewed stamps local_ns on the events of each step, and the zero Skew is
// the process itself.
func TestSkewedEvents(t *testing.T) {
	a := &echo{}
	if Skewed(a, clock.Skew{}) != Process(a) {
		t.Error("the zero skew wrapped the process")
	}
	p := Skewed(a, clock.Skew{Offset: -time.Second})
	now := time.Unix(1000, 0)
	o := p.Start(now)
	if len(o.Events) != 1 || o.Events[0].LocalNS != now.Add(-time.Second).UnixNano() {
		t.Errorf("start events %+v, want local_ns one second behind %d", o.Events, now.UnixNano())
	}
	o = p.Receive(now.Add(time.Hour), netip.MustParseAddrPort("10.0.0.1:1"), []byte("x"))
	if len(o.Events) != 1 || o.Events[0].Kind != eventlog.AgentNotice || o.Events[0].LocalNS != now.Add(time.Hour-time.Second).UnixNano() {
		t.Errorf("receive events %+v", o.Events)
	}
	if len(a.gotAt) != 1 || !a.gotAt[0].Equal(now.Add(time.Hour-time.Second)) {
		t.Errorf("the process read %v, want its clock %v", a.gotAt, now.Add(time.Hour-time.Second))
	}
}
