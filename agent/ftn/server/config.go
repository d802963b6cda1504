package server

import (
	"errors"
	"fmt"

	"tokenbed/agent/ftn/msg"
)

// Config of a server. Durations are in ticks.
type Config struct {
	Self    int        // this server's index in Servers
	Servers []msg.Peer // the shared configuration file's list (001 "Configuration")
	// Inc is this life's incarnation: larger than any previous life's
	// (the driver uses its start time in ns).
	Inc  uint64
	Seed uint64 // randomises election timeouts

	HeartbeatTicks  int // broadcast and heartbeat interval (default 1)
	ElectionTicks   int // no broadcast for this long: elect (default 10)
	LeaseTicks      int // no broadcast for this long: stop serving (default 6)
	ServerDownTicks int // leader: a server silent this long is DOWN (default 10)
	// ClientDownTicks: the leader drops a client silent this long
	// (default 60, 20 client heartbeats: 001 "When a Client Crashes"
	// asks for conservative criteria, since a client dropped while alive
	// still believes it holds its tokens).
	ClientDownTicks int
	// RetryTicks: resend an unacknowledged transfer, or a query round's
	// unanswered queries, this long after their last send (default 2).
	RetryTicks int

	// SkipRecoveryQuery makes a deliberately broken server for tests: it
	// serves tokens reclaimed from a DOWN server without querying the
	// clients first (the rule of 001 "Receiving global state" it breaks).
	SkipRecoveryQuery bool
	// SkipFreshness makes a deliberately broken server for tests and
	// benchmarks: it applies every request, however old (the guard
	// against late messages of 001 "Failure model" it breaks).
	SkipFreshness bool
}

// Validate reports every invalid field of c, with its defaults filled
// in, each error as "field: reason" (the field's name in the
// configuration file, e.g. "lease_ticks"); c itself is not changed.
func (c Config) Validate() error { return c.validate() }

func (c *Config) validate() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.HeartbeatTicks, 1)
	def(&c.ElectionTicks, 10)
	def(&c.LeaseTicks, 6)
	def(&c.ServerDownTicks, 10)
	def(&c.ClientDownTicks, 60)
	def(&c.RetryTicks, 2)
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("servers: empty"))
	}
	if c.Self < 0 || c.Self >= len(c.Servers) {
		errs = append(errs, fmt.Errorf("self: %d not in 0..%d", c.Self, len(c.Servers)-1))
	}
	names := map[string]bool{}
	for i, p := range c.Servers {
		if p.Name == "" || names[p.Name] {
			errs = append(errs, fmt.Errorf("servers[%d].name: empty or repeated %q", i, p.Name))
		}
		names[p.Name] = true
	}
	if c.Inc == 0 {
		errs = append(errs, errors.New("inc: must be > 0"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"heartbeat_ticks", c.HeartbeatTicks}, {"election_ticks", c.ElectionTicks}, {"lease_ticks", c.LeaseTicks},
		{"server_down_ticks", c.ServerDownTicks}, {"client_down_ticks", c.ClientDownTicks}, {"retry_ticks", c.RetryTicks}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d < 0", f.name, f.v))
		}
	}
	if c.LeaseTicks >= c.ServerDownTicks {
		errs = append(errs, fmt.Errorf("lease_ticks: %d must be below server_down_ticks %d", c.LeaseTicks, c.ServerDownTicks))
	}
	if c.HeartbeatTicks >= c.LeaseTicks {
		errs = append(errs, fmt.Errorf("heartbeat_ticks: %d must be below lease_ticks %d", c.HeartbeatTicks, c.LeaseTicks))
	}
	return errors.Join(errs...)
}
