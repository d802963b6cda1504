package config

import (
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

// A policy registered outside the core, as a new policy package would
// register itself: its section is decoded from the agent's file into its
// own type, defaulted, validated and scaled by the policy, with no edit of
// package config.
const testRole = "metronome"

type metronomeSection struct {
	Period time.Duration `yaml:"period"` // default 3s
	Beats  int           `yaml:"beats"`
}

type metronomeConfig struct {
	Period   time.Duration
	Beats    int
	Generate bool
}

func (s *metronomeSection) Resolve(env circulation.Env) metronomeConfig {
	c := metronomeConfig{Period: 3 * time.Second, Beats: s.Beats, Generate: env.Generate}
	if s.Period < 0 {
		env.Errorf("period", "must not be negative")
	} else if s.Period > 0 {
		c.Period = s.Period
	}
	c.Period = env.Scale(c.Period)
	return c
}

type metronome struct{ cfg metronomeConfig }

func (m *metronome) Name() string                                                    { return testRole }
func (m *metronome) Start(circulation.Host, time.Time) []circulation.Action          { return nil }
func (m *metronome) Tick(time.Time) []circulation.Action                             { return nil }
func (m *metronome) Deadline() (time.Time, bool)                                     { return time.Time{}, false }
func (m *metronome) Passed(time.Time, wire.TokenID, string) []circulation.Action     { return nil }
func (m *metronome) PassFailed(time.Time, wire.TokenID, string) []circulation.Action { return nil }
func (m *metronome) Acquired(time.Time, wire.TokenID, circulation.How, string) []circulation.Action {
	return nil
}

var _ circulation.Policy = (*metronome)(nil)

func init() {
	circulation.Register[metronomeSection](testRole, func(c metronomeConfig) *metronome { return &metronome{c} })
}

const base = "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\n"

func TestPolicyDecodesItsOwnSection(t *testing.T) {
	c, err := Load(write(t, base+"role: metronome\ntime_scale: 10\ngenerate: true\nmetronome: {period: 20s, beats: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	want := metronomeConfig{Period: 2 * time.Second, Beats: 4, Generate: true}
	if got, ok := r.Policy.(metronomeConfig); !ok || got != want {
		t.Errorf("policy configuration %#v, want %#v (the section's, scaled by time_scale)", r.Policy, want)
	}
	if _, err := circulation.New(r.Role, r.Policy); err != nil {
		t.Errorf("New: %v", err)
	}
	// Absent, the section takes the policy's defaults.
	c, _ = Load(write(t, base+"role: metronome\n"))
	if r, err := c.Validate(); err != nil || r.Policy.(metronomeConfig).Period != 3*time.Second {
		t.Errorf("absent section: %v %v, want the default period", r, err)
	}
}

func TestPolicySectionErrorsNameFileAndLine(t *testing.T) {
	p := write(t, base+"role: metronome\nmetronome:\n  beats: 2\n  period: -1s\nrandomwalk: {hold: -2s}\n")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Validate()
	for _, want := range []string{p + ":8:11: metronome.period: must not be negative", p + ":9:20: randomwalk.hold: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// Strict decoding holds inside a section: an unknown field, or a
	// duration that does not parse, is an error at its line.
	if _, err := Load(write(t, base+"metronome:\n  tempo: 1\n")); err == nil || !strings.Contains(err.Error(), `:6:3: unknown field "tempo"`) {
		t.Errorf("unknown field in a section: %v", err)
	}
	c, err = Load(write(t, base+"role: metronome\nmetronome:\n  period: soon\n"))
	if err == nil {
		_, err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), `:7:11: metronome.period: "soon"`) {
		t.Errorf("bad duration in a section: %v", err)
	}
	// A key that is no registered role is an unknown field, not a section.
	if _, err := Load(write(t, base+"ring: {hold: 1s}\n")); err == nil || !strings.Contains(err.Error(), `:5:1: unknown field "ring"`) {
		t.Errorf("unregistered section: %v", err)
	}
}

// The harness writes agents' files with a YAML encoder: the sections come
// back under their roles, where Decode reads them.
func TestSectionsRoundTrip(t *testing.T) {
	c, err := Load(write(t, base+"role: metronome\nmetronome: {period: 20s}\nrandomwalk: {hold: 2s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Seed = 1<<64 - 1 // the encoder's detour through a map keeps it an integer
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Load(write(t, string(b)))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, b)
	}
	if c2.Seed != c.Seed || c2.Name != "A" {
		t.Errorf("seed %d name %q after a round trip of:\n%s", c2.Seed, c2.Name, b)
	}
	if s := c2.Policies[testRole].(*metronomeSection); s.Period != 20*time.Second {
		t.Errorf("metronome section %+v after a round trip of:\n%s", s, b)
	}
	if !strings.Contains(string(b), "randomwalk:") || !strings.Contains(string(b), "hold: 2s") {
		t.Errorf("randomwalk section lost:\n%s", b)
	}
}
