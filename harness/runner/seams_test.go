package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/protocol"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// appliedLinks is a links seam that keeps every profile the run puts on
// a direction, in order: what reached the network, where the harness log
// says only what the harness meant.
type appliedLinks struct{ applied []string }

var _ links = (*appliedLinks)(nil)

func (l *appliedLinks) impair(*run) error { return nil }

func (l *appliedLinks) setProfile(_ *run, from, to string, p netem.Profile) error {
	l.applied = append(l.applied, from+">"+to+" "+p.String())
	return nil
}

// stepClock is a clock seam whose time moves only when the run waits.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) Wait(_ context.Context, _ <-chan time.Time, next time.Time) error {
	c.now = next
	return nil
}
func (c *stepClock) Pause(d time.Duration) error { c.now = c.now.Add(d); return nil }
func (c *stepClock) Stamp(*eventlog.Event)       {}

// During an outage the direction keeps its 100% loss: a profile step
// that comes meanwhile changes nothing on the link until the outage ends
// (with its own profile), and overlapping outages touch the link only at
// the start of each and at the end of the last.
func TestOutageKeepsTheLinkCutUntilItsLastEnd(t *testing.T) {
	e, err := experiments.Parse("t.yaml", []byte(`
name: t
seed: 1
duration: 100s
agents: [{name: A, generate: true}, {name: B}]
links:
  - {between: [A, B], a_to_b: "delay 5ms", b_to_a: "delay 7ms"}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := &appliedLinks{}
	clk := &stepClock{now: time.Unix(1000, 0)}
	r := &run{seams: seams{clock: clk, links: l}, e: e, o: Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		agents: map[string]*agentRun{}, planned: map[[2]string]netem.Profile{}, outages: map[[2]string]int{},
		hlog: eventlog.NewWriter(io.Discard, "harness")}
	for i, n := range []string{"A", "B"} {
		inst := results.Instance(n, 0)
		r.agents[inst] = &agentRun{a: backend.Agent{Name: n, Instance: inst, Addr: netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)})}}
	}
	delay9, err := netem.Parse("delay 9ms")
	if err != nil {
		t.Fatal(err)
	}
	apply := func(s experiments.Step) []pending {
		ps, err := r.apply(t.Context(), s, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	step := func(what string, want ...string) {
		t.Helper()
		if !slices.Equal(l.applied, want) {
			t.Errorf("%s: applied %q, want %q", what, l.applied, want)
		}
		l.applied = nil
	}
	long := apply(experiments.Step{Action: experiments.ActOutage, From: "A", To: "B", Both: true, For: 2e9})
	step("outage of both directions", "A>B delay 5ms loss random 100%", "B>A delay 7ms loss random 100%")
	short := apply(experiments.Step{Action: experiments.ActOutage, From: "A", To: "B", For: 1e9})
	step("second outage of A>B", "A>B delay 5ms loss random 100%")
	if got := long[0].at.Sub(clk.now); got != 2*time.Second {
		t.Errorf("the long outage heals %v after it started on the run's clock, want 2s", got)
	}
	apply(experiments.Step{Action: experiments.ActProfile, From: "B", To: "A", Profile: &delay9})
	step("profile step on B>A during its outage")
	short[0].do()
	step("end of the outage inside the other")
	long[0].do()
	step("end of the last outage", "A>B delay 5ms", "B>A delay 9ms")
}

// A crash of "holder" when no agent holds a token waits five seconds of
// the run's clock for one, then is skipped and says so. On the clock seam
// the wait takes no wall time, and the test sees exactly how long the run
// waited.
func TestCrashOfNoHolderWaitsFiveSecondsOfTheRunsClock(t *testing.T) {
	e, err := experiments.Parse("t.yaml", []byte("name: t\nseed: 1\nduration: 100s\nagents: [{name: A, generate: true}, {name: B}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	proto, err := protocol.Lookup(e.Protocol)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1000, 0)
	clk := &stepClock{now: start}
	var log bytes.Buffer
	r := &run{seams: seams{clock: clk, links: &appliedLinks{}}, e: e, o: Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		agents: map[string]*agentRun{}, proto: proto, obs: proto.NewObserver(), crashedHolder: map[int]string{},
		hlog: eventlog.NewWriter(&log, "harness")}
	for i, n := range []string{"A", "B"} {
		inst := results.Instance(n, 0)
		r.agents[inst] = &agentRun{a: backend.Agent{Name: n, Instance: inst, Addr: netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)})}, running: true}
		r.order = append(r.order, inst)
	}
	wall := time.Now()
	if _, err := r.apply(t.Context(), experiments.Step{Action: experiments.ActCrash, Agent: "holder", Index: 3}, 0); err != nil {
		t.Fatal(err)
	}
	if waited := clk.now.Sub(start); waited < 5*time.Second || waited > 5*time.Second+time.Millisecond {
		t.Errorf("waited %v on the run's clock, want 5s", waited)
	}
	if took := time.Since(wall); took >= 5*time.Second {
		t.Errorf("the wait took %v of wall time: it did not use the run's clock", took)
	}
	var skipped []string
	for _, ev := range harnessEvents(t, &log) {
		if ev.Kind == eventlog.AgentCrash {
			t.Errorf("crashed %s with no holder", ev.Peer)
		}
		if ev.Reason == "crash_skipped" {
			skipped = append(skipped, ev.Detail)
		}
	}
	if want := "schedule step 3: no agent of replica 0 held a token for 5 s"; len(skipped) != 1 || skipped[0] != want {
		t.Errorf("crash_skipped notices %q, want [%q]", skipped, want)
	}
}

// harnessEvents decodes the harness log a test's run wrote.
func harnessEvents(t *testing.T, log io.Reader) []eventlog.Event {
	t.Helper()
	var evs []eventlog.Event
	dec := json.NewDecoder(log)
	for dec.More() {
		var ev eventlog.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}
