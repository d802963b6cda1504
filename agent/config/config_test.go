package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "tokenbed/agent/circulation/policies" // the roles of the agent binary
	"tokenbed/agent/circulation/randomwalk"
)

func write(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsAndScale(t *testing.T) {
	c, err := Load(write(t, `
name: A
listen: 10.0.0.1:7400
ca: ca.crt
credentials: .
time_scale: 100
network_time_scale: 2
peers: [{name: B, addr: "10.0.0.2:7400"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	// Application durations are divided by time_scale, passing timeouts
	// by network_time_scale.
	rw, ok := r.Policy.(randomwalk.Config)
	if !ok {
		t.Fatalf("policy configuration %T, want the default role's randomwalk.Config", r.Policy)
	}
	if rw.Hold != 100*time.Millisecond {
		t.Errorf("hold %v, want 10s/100", rw.Hold)
	}
	if r.Passing.MoveTimeout != 250*time.Millisecond || r.Passing.MoveRetries != 2 || r.Passing.CommitRetries != 10 {
		t.Errorf("passing %+v, want the paper's retries and 500ms/2", r.Passing)
	}
	if rw.Transit != 500*time.Millisecond {
		t.Errorf("transit allowance %v, want two move timeouts", rw.Transit)
	}
	if r.Role != RoleRandomWalk || r.Log != "-" {
		t.Errorf("role %q log %q", r.Role, r.Log)
	}
}

func TestEveryErrorNamesFieldAndLine(t *testing.T) {
	c, err := Load(write(t, `name: "a b"
listen: 0.0.0.0:7400
role: ftn
peers:
  - {name: B, addr: nowhere}
join: Z
passing:
  move_timeout: -1s
  commit_retries: 100000
randomwalk:
  regenerate_jitter: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{":1:7: name:", ":2:9: listen:", ":3:7: role:", "peers[0].addr", ":6:7: join:", "passing.move_timeout", "passing.commit_retries", "randomwalk.regenerate_jitter", "ca: missing", "credentials: missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no error about %q in:\n%v", want, err)
		}
	}
	// An unknown field is an error at its line.
	if _, err := Load(write(t, "name: A\nbogus: 1\n")); err == nil || !strings.Contains(err.Error(), ":2:1: unknown field \"bogus\"") {
		t.Errorf("unknown field: %v", err)
	}
}

// Every unparsable duration is reported, each at its
// line with its field, together with the other errors of the file.
func TestBadDurationsAllReportedWithLines(t *testing.T) {
	p := write(t, `name: A
listen: 10.0.0.1:7400
ca: ca.crt
credentials: .
passing:
  move_timeout: soon
  ack_timeout: 10 parsecs
role: juggler
`)
	c, err := Load(p)
	if err == nil {
		_, err = c.Validate()
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		p + `:6:17: passing.move_timeout: "soon"`,
		p + `:7:16: passing.ack_timeout: "10 parsecs"`,
		p + `:8:7: role: "juggler"`,
		"known: baseline, metronome, randomwalk, wandering, wandering-004", // the registered policies
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A negative time_scale is one mistake, reported once
// (network_time_scale defaults to it and is not wrong on its own).
func TestNegativeTimeScaleOneError(t *testing.T) {
	c, err := Load(write(t, "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\ntime_scale: -2\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Validate()
	if err == nil || !strings.Contains(err.Error(), "time_scale: must be positive") {
		t.Fatalf("want a time_scale error, got %v", err)
	}
	if strings.Contains(err.Error(), "network_time_scale") || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("one error expected, got:\n%v", err)
	}
}

// The duration decoder keeps an explicit 0s of a pointer field (linger:
// 0s is the paper's exact behaviour, not the default).
func TestExplicitZeroDurationKept(t *testing.T) {
	c, err := Load(write(t, "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\npassing: {linger: 0s, move_timeout: \"250ms\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Passing.Linger == nil || *c.Passing.Linger != 0 || c.Passing.MoveTimeout != 250*time.Millisecond {
		t.Errorf("linger %v, move_timeout %v", c.Passing.Linger, c.Passing.MoveTimeout)
	}
}

// max_clock_skew bounds real clocks: compressed time does not divide it,
// and a value out of range is an error naming the field.
func TestMaxClockSkewIsRealTime(t *testing.T) {
	base := "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\ntime_scale: 100\n"
	c, err := Load(write(t, base+"max_clock_skew: 250ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Validate(); err != nil || r.MaxClockSkew != 250*time.Millisecond {
		t.Errorf("max_clock_skew 250ms at time_scale 100: %v %v, want 250ms", r, err)
	}
	for _, bad := range []string{"-1ms", "2h"} {
		c, err := Load(write(t, base+"max_clock_skew: "+bad+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), ":6:17: max_clock_skew:") {
			t.Errorf("max_clock_skew %s: %v", bad, err)
		}
	}
}

// clock: the offset is paper time, divided by time_scale like the
// policies' durations; the drift is a rate and stays; a drift out of
// range is an error at its line naming clock.drift.
func TestClock(t *testing.T) {
	base := "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\ntime_scale: 100\n"
	c, err := Load(write(t, base+"clock: {offset: -1.5s, drift: 1e-4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Validate(); err != nil || r.Clock.Offset != -15*time.Millisecond || r.Clock.Drift != 1e-4 {
		t.Errorf("clock {-1.5s, 1e-4} at time_scale 100: %+v %v, want {-15ms, 1e-4}", r, err)
	}
	c, err = Load(write(t, base+"clock:\n  offset: 1s\n  drift: -0.2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), ":8:10: clock.drift: -0.2: want |drift| < 0.1") {
		t.Errorf("drift -0.2: %v", err)
	}
}

// passing.exchange selects the variant by its registered name (4way by
// default); an unknown name is an error at its line listing the known ones.
func TestPassingExchange(t *testing.T) {
	base := "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\n"
	for in, want := range map[string]string{"": "4way", "passing: {exchange: 4way}\n": "4way", "passing: {exchange: 3way}\n": "3way"} {
		c, err := Load(write(t, base+in))
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Validate()
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if r.Passing.Exchange != want {
			t.Errorf("%q: exchange %q, want %q", in, r.Passing.Exchange, want)
		}
	}
	c, err := Load(write(t, base+"passing:\n  exchange: 2way\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Validate()
	if err == nil || !strings.Contains(err.Error(), `:6:13: passing.exchange: "2way": no such exchange; known: 3way, 4way`) {
		t.Errorf("unknown exchange: %v", err)
	}
}
