package server

import (
	"net/netip"
	"strings"
	"testing"

	"tokenbed/agent/ftn/msg"
)

func peers(names ...string) []msg.Peer {
	var ps []msg.Peer
	for i, n := range names {
		ps = append(ps, msg.Peer{Name: n, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 7000)})
	}
	return ps
}

// Every invalid field is reported, each error naming its field as the
// configuration file spells it, and defaults fill the zeros.
func TestConfigValidate(t *testing.T) {
	ok := func() Config { return Config{Self: 1, Servers: peers("s0", "s1", "s2"), Inc: 1} }
	for _, c := range []struct {
		name string
		edit func(*Config)
		want []string // the errors, in order; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"no servers", func(c *Config) { c.Servers, c.Self = nil, 0 }, []string{"servers: empty", "self: 0 not in 0..-1"}},
		{"self beyond the list", func(c *Config) { c.Self = 3 }, []string{"self: 3 not in 0..2"}},
		{"self negative", func(c *Config) { c.Self = -1 }, []string{"self: -1 not in 0..2"}},
		{"a server without a name", func(c *Config) { c.Servers[2].Name = "" }, []string{`servers[2].name: empty or repeated ""`}},
		{"a name twice", func(c *Config) { c.Servers[2].Name = "s0" }, []string{`servers[2].name: empty or repeated "s0"`}},
		{"no incarnation", func(c *Config) { c.Inc = 0 }, []string{"inc: must be > 0"}},
		{"negative heartbeat", func(c *Config) { c.HeartbeatTicks = -1 }, []string{"heartbeat_ticks: -1 < 0"}},
		{"negative election", func(c *Config) { c.ElectionTicks = -2 }, []string{"election_ticks: -2 < 0"}},
		{"negative client timeout", func(c *Config) { c.ClientDownTicks = -3 }, []string{"client_down_ticks: -3 < 0"}},
		{"negative retry", func(c *Config) { c.RetryTicks = -4 }, []string{"retry_ticks: -4 < 0"}},
		{"negative lease", func(c *Config) { c.LeaseTicks = -1 }, []string{"lease_ticks: -1 < 0", "heartbeat_ticks: 1 must be below lease_ticks -1"}},
		{"negative server timeout", func(c *Config) { c.ServerDownTicks = -1 },
			[]string{"server_down_ticks: -1 < 0", "lease_ticks: 6 must be below server_down_ticks -1"}},
		// A lease as long as the DOWN timeout lets a cut-off server serve
		// after the leader declared it DOWN (the package's "Serving").
		{"lease as long as the DOWN timeout", func(c *Config) { c.LeaseTicks = 10 }, []string{"lease_ticks: 10 must be below server_down_ticks 10"}},
		{"lease no longer than a heartbeat", func(c *Config) { c.HeartbeatTicks, c.LeaseTicks = 6, 6 }, []string{"heartbeat_ticks: 6 must be below lease_ticks 6"}},
		{"everything at once", func(c *Config) { c.Self, c.Inc, c.RetryTicks = 5, 0, -1 },
			[]string{"self: 5 not in 0..2", "inc: must be > 0", "retry_ticks: -1 < 0"}},
	} {
		cfg := ok()
		c.edit(&cfg)
		err := cfg.Validate()
		var got []string
		if err != nil {
			got = strings.Split(err.Error(), "\n")
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
		if _, nerr := New(cfg); (nerr == nil) != (err == nil) {
			t.Errorf("%s: New %v, Validate %v", c.name, nerr, err)
		}
	}
	// Validate fills nothing in the caller's copy; New runs on the
	// defaults.
	cfg := ok()
	if err := cfg.Validate(); err != nil || cfg.LeaseTicks != 0 {
		t.Errorf("Validate: %v, lease %d", err, cfg.LeaseTicks)
	}
	s, err := New(cfg)
	if err != nil || s.cfg.HeartbeatTicks != 1 || s.cfg.ElectionTicks != 10 || s.cfg.LeaseTicks != 6 ||
		s.cfg.ServerDownTicks != 10 || s.cfg.ClientDownTicks != 60 || s.cfg.RetryTicks != 2 {
		t.Errorf("defaults: %v %+v", err, s.cfg)
	}
}
