package sim

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/netem"
)

// echo is a minimal process: it logs every datagram it receives and
// answers "pong" to "ping"; with a period it sends "tick" to peer on a
// timer.
type echo struct {
	peer    netip.AddrPort
	period  time.Duration
	next    time.Time
	got     []string
	gotAt   []time.Time
	stopped bool
}

func (e *echo) Start(now time.Time) Output {
	if e.period > 0 {
		e.next = now.Add(e.period)
	}
	return Output{Events: []eventlog.Event{{Kind: eventlog.AgentStarted}}}
}

func (e *echo) Receive(now time.Time, from netip.AddrPort, data []byte) Output {
	e.got, e.gotAt = append(e.got, string(data)), append(e.gotAt, now)
	o := Output{Events: []eventlog.Event{{Kind: eventlog.AgentNotice, Detail: string(data)}}}
	if string(data) == "ping" {
		o.Packets = []Packet{{To: from, Data: []byte("pong")}}
	}
	return o
}

func (e *echo) Tick(now time.Time) Output {
	e.next = now.Add(e.period)
	return Output{Packets: []Packet{{To: e.peer, Data: []byte("tick")}}}
}

func (e *echo) Deadline() (time.Time, bool) { return e.next, e.period > 0 }

func (e *echo) Stop(time.Time, string) Output {
	e.stopped = true
	return Output{Events: []eventlog.Event{{Kind: eventlog.AgentStopping}}}
}

var (
	addrA = netip.MustParseAddr("10.77.0.1")
	addrB = netip.MustParseAddr("10.77.0.2")
)

func profile(t *testing.T, s string) netem.Profile {
	t.Helper()
	p, err := netem.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// twoHosts is a world of A and B with the given profile both ways.
func twoHosts(t *testing.T, cfg Config, prof string) *World {
	t.Helper()
	w := New(cfg)
	for _, h := range []struct {
		n string
		a netip.Addr
	}{{"A", addrA}, {"B", addrB}} {
		if _, err := w.AddHost(h.n, h.a); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetProfile(addrA, addrB, profile(t, prof)); err != nil {
		t.Fatal(err)
	}
	if err := w.SetProfile(addrB, addrA, profile(t, prof)); err != nil {
		t.Fatal(err)
	}
	return w
}

func logPath(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name+".jsonl") }

// A datagram takes the profile's delay plus the sender's signing time,
// and the receiver's reply its verification and signing time on top.
func TestDelayAndProcessingTime(t *testing.T) {
	w := twoHosts(t, Config{VerifyTime: 30 * time.Microsecond, SignTime: 20 * time.Microsecond}, "delay 5ms")
	a := &echo{peer: netip.AddrPortFrom(addrB, 7400), period: time.Second}
	b := &echo{}
	if err := w.Start("A", a, logPath(t, "A")); err != nil {
		t.Fatal(err)
	}
	if err := w.Start("B", b, logPath(t, "B")); err != nil {
		t.Fatal(err)
	}
	t0 := w.Now()
	if err := w.RunUntil(t0.Add(1500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if len(b.gotAt) != 1 || b.got[0] != "tick" {
		t.Fatalf("B got %v, want one tick", b.got)
	}
	// Sent at 1 s, signed for 20 µs, 5 ms on the link.
	if want := t0.Add(time.Second + 20*time.Microsecond + 5*time.Millisecond); !b.gotAt[0].Equal(want) {
		t.Errorf("tick arrived at +%v, want +%v", b.gotAt[0].Sub(t0), want.Sub(t0))
	}
	if st := w.Stats(); st.Sent != 1 || st.Delivered != 1 {
		t.Errorf("stats %+v: want 1 sent, 1 delivered", st)
	}
}

// A crash loses the process: no timer fires and nothing more is logged;
// datagrams to it are unreachable. A restart is a new process.
func TestCrashLosesTheProcess(t *testing.T) {
	w := twoHosts(t, Config{}, "delay 1ms")
	var exits []string
	w.cfg.OnExit = func(h string, sig os.Signal) { exits = append(exits, h+" "+sig.String()) }
	a := &echo{peer: netip.AddrPortFrom(addrB, 7400), period: 100 * time.Millisecond}
	b := &echo{}
	la := logPath(t, "A")
	w.Start("A", a, la)
	w.Start("B", b, logPath(t, "B"))
	w.RunUntil(w.Now().Add(250 * time.Millisecond))
	if err := w.Crash("B"); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(w.Now().Add(time.Second))
	if len(b.got) != 2 || b.stopped {
		t.Errorf("B got %d ticks (stopped %v), want the 2 before its crash and no Stop", len(b.got), b.stopped)
	}
	if u := w.Stats().Unreachable; u < 9 {
		t.Errorf("%d datagrams unreachable after the crash, want the ~10 ticks", u)
	}
	if err := w.Crash("A"); err != nil {
		t.Fatal(err)
	}
	if len(exits) != 2 || exits[0] != "B killed" {
		t.Errorf("exits %v", exits)
	}
	b2 := &echo{}
	if err := w.Start("B", b2, logPath(t, "B2")); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(w.Now().Add(time.Second))
	if len(b2.got) != 0 {
		t.Errorf("the restarted B got %v from the crashed A", b2.got)
	}
	evs, err := eventlog.ReadFile(la)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != eventlog.AgentStarted {
		t.Errorf("A's log %v: want only agent_started (a crash logs nothing)", evs)
	}
}

// A corrupted datagram is captured where it arrives and dropped there by
// its checksum, as the kernel drops it; it never reaches the process.
func TestCorruptionIsDroppedByChecksum(t *testing.T) {
	w := twoHosts(t, Config{}, "corrupt 100%")
	a := &echo{peer: netip.AddrPortFrom(addrB, 7400), period: 10 * time.Millisecond}
	b := &echo{}
	w.Start("A", a, logPath(t, "A"))
	w.Start("B", b, logPath(t, "B"))
	w.RunUntil(w.Now().Add(time.Second))
	st := w.Stats()
	if len(b.got) != 0 || st.Corrupted < 90 || st.Delivered != 0 {
		t.Errorf("B got %d datagrams; stats %+v: want every one corrupted and dropped", len(b.got), st)
	}
}

// The checksums of the packets the links carry verify, and one flipped
// bit anywhere breaks them.
func TestPacketChecksums(t *testing.T) {
	p := ipv4UDP(netip.AddrPortFrom(addrA, 7400), netip.AddrPortFrom(addrB, 7400), []byte("a datagram of odd length"))
	if !checksumsOK(p) {
		t.Fatal("a fresh packet fails its checksums")
	}
	for bit := 0; bit < len(p)*8; bit++ {
		c := append([]byte(nil), p...)
		flip(c, bit)
		if checksumsOK(c) {
			t.Errorf("bit %d flipped: checksums still verify", bit)
		}
	}
	from, payload, err := udpPayload(p)
	if err != nil || from != netip.AddrPortFrom(addrA, 7400) || string(payload) != "a datagram of odd length" {
		t.Errorf("udpPayload = %v %q %v", from, payload, err)
	}
}

// Loss follows the direction's model: about half of 1,000 datagrams
// through "loss 50%" (the same model the engine runs, so the count is the
// model's: deterministic for the seed).
func TestLossFollowsTheProfile(t *testing.T) {
	w := twoHosts(t, Config{Seed: 1}, "loss 50%")
	a := &echo{peer: netip.AddrPortFrom(addrB, 7400), period: 10 * time.Millisecond}
	b := &echo{}
	w.Start("A", a, logPath(t, "A"))
	w.Start("B", b, logPath(t, "B"))
	w.RunUntil(w.Now().Add(10*time.Second + time.Millisecond))
	st := w.Stats()
	if st.Sent != 1000 || st.Lost+st.Delivered != 1000 || st.Lost < 440 || st.Lost > 560 {
		t.Errorf("stats %+v: want 1000 sent, about 500 lost", st)
	}
}

// declaring is echo whose every datagram comes with an Ahead check that
// fails from the third on: a process that declared what was not so.
type declaring struct {
	echo
	n int
}

func (d *declaring) Tick(now time.Time) Output {
	o := d.echo.Tick(now)
	d.n++
	bad := d.n >= 3
	o.Ahead = []func() error{func() error {
		if bad {
			return errors.New("declared falsely")
		}
		return nil
	}}
	return o
}

// An Ahead check that fails voids the run, on the workers or in the loop:
// RunUntil or at the latest Close returns its error.
func TestAheadErrorVoidsTheRun(t *testing.T) {
	for _, workers := range []int{-1, 1} {
		w := twoHosts(t, Config{Workers: workers}, "delay 1ms")
		a := &declaring{echo: echo{peer: netip.AddrPortFrom(addrB, 7400), period: 10 * time.Millisecond}}
		w.Start("A", a, logPath(t, "A"))
		w.Start("B", &echo{}, logPath(t, "B"))
		if err := w.RunUntil(w.Now().Add(25 * time.Millisecond)); err != nil {
			t.Fatalf("workers %d: the first two checks pass, yet RunUntil: %v", workers, err)
		}
		err := w.RunUntil(w.Now().Add(time.Second))
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil || !strings.Contains(err.Error(), "declared falsely") {
			t.Errorf("workers %d: a failed check gave %v, want its error", workers, err)
		}
	}
}
