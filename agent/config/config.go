// Package config is the agent's configuration file: YAML, decoded strictly
// (an unknown field is an error naming the file and line), validated with
// every error reported at once. Durations are in paper time: the time
// scale divides them (see Scale).
package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/circulation/wandering"
	"tokenbed/agent/node"
	"tokenbed/agent/passing"
	"tokenbed/agent/resource"
	"tokenbed/agent/wire"
	"tokenbed/internal/strictyaml"
)

// Roles the agent binary can take: the circulation policies registered
// with package circulation.
const (
	RoleRandomWalk = randomwalk.Role // 002 §3.2, the default
	RoleWandering  = wandering.Role  // 003 Fig. 1
)

// Roles lists the roles this build runs.
func Roles() []string { return circulation.Roles() }

// Peer is a member the agent knows at start.
type Peer struct {
	Name string `yaml:"name"`
	Addr string `yaml:"addr"`
	// Certificate, optional, is the peer's member certificate (PEM). Its
	// key is verified against the CA and cached at start, as if the peer
	// had already sent it piggybacked (002 §3): the agent starts warm.
	Certificate string `yaml:"certificate"`
}

// Passing holds the passing operation's timeouts and retries (002 §3).
// Zero values take the defaults of passing.DefaultConfig.
type Passing struct {
	MoveTimeout   time.Duration `yaml:"move_timeout"`
	MoveRetries   *int          `yaml:"move_retries"`
	AckTimeout    time.Duration `yaml:"ack_timeout"`
	AckRetries    *int          `yaml:"ack_retries"`
	CommitTimeout time.Duration `yaml:"commit_timeout"`
	CommitRetries *int          `yaml:"commit_retries"`
	// Linger: how long a receiver that gave up still accepts a late
	// Commit. Default: (commit_retries+1) × commit_timeout. "0s" gives
	// the paper's exact behaviour.
	Linger *time.Duration `yaml:"linger"`
}

// RandomWalk configures the random-walk policy (002 §3.2).
type RandomWalk struct {
	Hold             time.Duration `yaml:"hold"`              // default 10s (002 §3.3)
	RegenerateAfter  *float64      `yaml:"regenerate_after"`  // default 10; 0 disables
	ExpectedReturn   time.Duration `yaml:"expected_return"`   // default members × hold
	RegenerateJitter *float64      `yaml:"regenerate_jitter"` // default 0.1
	GenerateAtStart  bool          `yaml:"generate_at_start"`
}

// Wandering configures the Wandering Token policy (seed 003, Table 1).
type Wandering struct {
	Op              time.Duration `yaml:"op"`       // Δop, default 4s
	Skip            time.Duration `yaml:"skip"`     // Δskip, default 100ms
	NMax            int           `yaml:"nmax"`     // default 300
	Min             time.Duration `yaml:"min"`      // Δmin, default op × nmax / 2
	Generate        time.Duration `yaml:"generate"` // γgenerate, default min × nmax
	GenerateAtStart bool          `yaml:"generate_at_start"`
}

// Config is the agent configuration file.
type Config struct {
	Name string `yaml:"name"`
	// Listen is the UDP address the agent binds and signs as.
	Listen string `yaml:"listen"`
	// CA is the CA certificate file; Credentials the directory holding
	// NAME.crt and NAME.key.
	CA          string `yaml:"ca"`
	Credentials string `yaml:"credentials"`
	// Log is the event log file ("-": standard output).
	Log  string `yaml:"log"`
	Role string `yaml:"role"`
	// Seed of the agent's random source; 0 picks one, which is logged.
	Seed uint64 `yaml:"seed"`
	// TimeScale divides every duration (compressed time). The passing
	// timeouts are divided by NetworkTimeScale instead when it is set,
	// because compressing them below the network's round trip would turn
	// every pass into a retransmission.
	TimeScale        float64       `yaml:"time_scale"`
	NetworkTimeScale float64       `yaml:"network_time_scale"`
	Peers            []Peer        `yaml:"peers"`
	Join             string        `yaml:"join"` // join through this peer (002 §3.2)
	DirectoryTTL     time.Duration `yaml:"directory_ttl"`
	Passing          Passing       `yaml:"passing"`
	RandomWalk       RandomWalk    `yaml:"randomwalk"`
	Wandering        Wandering     `yaml:"wandering"`
	// Fault breaks the protocol on purpose (skip_ack_check,
	// acquire_on_move) to prove that the testbed catches a broken agent.
	Fault string `yaml:"fault"`
	// DropRate drops this share of the agent's outgoing datagrams in its
	// own transport (seeded): loss without an emulated network, for tests.
	DropRate float64 `yaml:"drop_rate"`
	// MaxClockSkew bounds the difference between members' wall clocks,
	// in real time even when time is compressed (agent/node, "Restarts").
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
	// Operation is the protected operation run between the node's
	// op_started and op_finished (agent/resource): {kind: hold}, the
	// default, or {kind: resource, server: IP:PORT}.
	Operation resource.Config `yaml:"operation"`

	file *strictyaml.File
	// flags maps a field's YAML path to the command-line flag that set
	// it: an error about it names the flag, not a line of the file.
	flags map[string]string
}

// SetByFlag records that the field at path (e.g. "$.listen", or
// "$.peers[2]" for an element and everything in it) came from the
// command-line flag name.
func (c *Config) SetByFlag(path, name string) {
	if c.flags == nil {
		c.flags = map[string]string{}
	}
	c.flags[path] = name
}

// Load reads and decodes path. Call Validate after applying flags.
func Load(path string) (*Config, error) {
	var c Config
	f, err := strictyaml.Load(path, &c)
	if err != nil {
		return nil, err
	}
	c.file = f
	return &c, nil
}

// errorf records a validation error for a field (by YAML path).
func (c *Config) errorf(path, format string, a ...any) {
	if c.file == nil {
		c.file = &strictyaml.File{Name: "flags"}
	}
	for p, name := range c.flags {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			c.file.Flagf(name, "%s", fmt.Sprintf(format, a...))
			return
		}
	}
	c.file.Errorf(path, format, a...)
}

// Resolved is a validated configuration in the types the agent uses, with
// durations in real time.
type Resolved struct {
	Name             string
	Listen           netip.AddrPort
	CA, Credentials  string
	Log              string
	Role             string
	Seed             uint64
	TimeScale        float64
	NetworkTimeScale float64
	Peers            []Peer
	PeerAddrs        []netip.AddrPort
	Join             string
	DropRate         float64
	MaxClockSkew     time.Duration // real time, not divided by the time scales
	DirectoryTTL     time.Duration
	Operation        resource.Config
	Passing          passing.Config
	RandomWalk       randomwalk.Config
	Wandering        wandering.Config
}

// Policy is the resolved configuration of the role's own section, for
// circulation.New.
func (r *Resolved) Policy() any {
	switch r.Role {
	case RoleWandering:
		return r.Wandering
	case RoleRandomWalk:
		return r.RandomWalk
	}
	return nil
}

// Validate checks every field, reporting all errors at once, and returns
// the resolved configuration.
func (c *Config) Validate() (*Resolved, error) {
	r := &Resolved{Name: c.Name, CA: c.CA, Credentials: c.Credentials, Log: c.Log, Role: c.Role, Seed: c.Seed,
		TimeScale: c.TimeScale, NetworkTimeScale: c.NetworkTimeScale, Join: c.Join}
	if !wire.ValidName(c.Name) {
		c.errorf("$.name", "%q: want 1 to %d letters, digits, '.', '_' or '-'", c.Name, wire.MaxNameLen)
	}
	if ap, err := netip.ParseAddrPort(c.Listen); err != nil {
		c.errorf("$.listen", "%q: want IP:PORT (%v)", c.Listen, err)
	} else if ap.Addr().IsUnspecified() || ap.Port() == 0 {
		c.errorf("$.listen", "%q: need a specific address and port: signatures bind the destination address (002 §3)", c.Listen)
	} else {
		r.Listen = ap
	}
	if c.CA == "" {
		c.errorf("$.ca", "missing: the CA certificate file")
	}
	if c.Credentials == "" {
		c.errorf("$.credentials", "missing: the directory with NAME.crt and NAME.key")
	}
	if c.Log == "" {
		r.Log = "-"
	}
	if r.Role == "" {
		r.Role = RoleRandomWalk
	}
	if !circulation.Known(r.Role) {
		c.errorf("$.role", "%v", circulation.UnknownRole(r.Role))
	}
	if r.TimeScale == 0 {
		r.TimeScale = 1
	}
	if r.TimeScale < 0 {
		c.errorf("$.time_scale", "must be positive, got %v", c.TimeScale)
	}
	if r.NetworkTimeScale == 0 {
		// Defaults to time_scale, unless that is already reported wrong:
		// one mistake, one error.
		r.NetworkTimeScale = r.TimeScale
		if r.TimeScale < 0 {
			r.NetworkTimeScale = 1
		}
	}
	if r.NetworkTimeScale < 0 {
		c.errorf("$.network_time_scale", "must be positive, got %v", c.NetworkTimeScale)
	}
	names := map[string]bool{c.Name: true}
	for i, p := range c.Peers {
		path := fmt.Sprintf("$.peers[%d]", i)
		if !wire.ValidName(p.Name) {
			c.errorf(path+".name", "%q is not a valid member name", p.Name)
		} else if names[p.Name] {
			c.errorf(path+".name", "%q listed twice (or is the agent itself)", p.Name)
		}
		names[p.Name] = true
		ap, err := netip.ParseAddrPort(p.Addr)
		if err != nil || ap.Port() == 0 || ap.Addr().IsUnspecified() {
			c.errorf(path+".addr", "%q: want IP:PORT", p.Addr)
		}
		r.Peers = append(r.Peers, p)
		r.PeerAddrs = append(r.PeerAddrs, ap)
	}
	if c.Join != "" && (c.Join == c.Name || !names[c.Join]) {
		c.errorf("$.join", "%q must be one of the peers", c.Join)
	}
	if c.DropRate < 0 || c.DropRate >= 1 {
		c.errorf("$.drop_rate", "must be in [0, 1), got %v", c.DropRate)
	}
	r.DropRate = c.DropRate
	if c.MaxClockSkew < 0 || c.MaxClockSkew > node.MaxMaxClockSkew {
		c.errorf("$.max_clock_skew", "%v: want 0 (default %v) up to %v", c.MaxClockSkew, node.DefaultMaxClockSkew, node.MaxMaxClockSkew)
	}
	r.MaxClockSkew = c.MaxClockSkew
	if err := c.Operation.Validate(); err != nil {
		c.errorf("$.operation", "%v", err)
	}
	r.Operation = c.Operation
	if c.DirectoryTTL < 0 {
		c.errorf("$.directory_ttl", "must not be negative")
	}

	pc := passing.DefaultConfig()
	setD := func(dst *time.Duration, v time.Duration, path string) {
		if v < 0 {
			c.errorf(path, "must be positive, got %v", v)
		} else if v > 0 {
			*dst = v
		}
	}
	setI := func(dst *int, v *int, path string) {
		if v != nil {
			if *v < 0 || *v > 1000 {
				c.errorf(path, "must be in 0..1000, got %d", *v)
			}
			*dst = *v
		}
	}
	setD(&pc.MoveTimeout, c.Passing.MoveTimeout, "$.passing.move_timeout")
	setD(&pc.AckTimeout, c.Passing.AckTimeout, "$.passing.ack_timeout")
	setD(&pc.CommitTimeout, c.Passing.CommitTimeout, "$.passing.commit_timeout")
	setI(&pc.MoveRetries, c.Passing.MoveRetries, "$.passing.move_retries")
	setI(&pc.AckRetries, c.Passing.AckRetries, "$.passing.ack_retries")
	setI(&pc.CommitRetries, c.Passing.CommitRetries, "$.passing.commit_retries")
	pc.Linger = pc.DefaultLinger()
	if f, ok := passing.Faults[c.Fault]; ok {
		pc.Fault = f
	} else {
		c.errorf("$.fault", "%q: want skip_ack_check or acquire_on_move (testing only)", c.Fault)
	}
	if c.Passing.Linger != nil {
		if *c.Passing.Linger < 0 {
			c.errorf("$.passing.linger", "must not be negative")
		}
		pc.Linger = *c.Passing.Linger
	}

	rw := randomwalk.Config{Hold: randomwalk.DefaultHold, RegenerateAfter: 10, RegenerateJitter: 0.1,
		GenerateAtStart: c.RandomWalk.GenerateAtStart, JoinPeer: c.Join, ExpectedReturn: c.RandomWalk.ExpectedReturn}
	if c.RandomWalk.Hold < 0 {
		c.errorf("$.randomwalk.hold", "must not be negative")
	} else if c.RandomWalk.Hold > 0 {
		rw.Hold = c.RandomWalk.Hold
	}
	if c.RandomWalk.RegenerateAfter != nil {
		rw.RegenerateAfter = *c.RandomWalk.RegenerateAfter
	}
	if c.RandomWalk.RegenerateJitter != nil {
		rw.RegenerateJitter = *c.RandomWalk.RegenerateJitter
	}
	if err := rw.Validate(); err != nil {
		field, _, _ := strings.Cut(err.Error(), ":")
		c.errorf("$.randomwalk."+field, "%v", strings.TrimPrefix(err.Error(), field+": "))
	}
	wc := wandering.Config{Op: 4 * time.Second, Skip: 100 * time.Millisecond, NMax: 300, Min: c.Wandering.Min,
		Generate: c.Wandering.Generate, GenerateAtStart: c.Wandering.GenerateAtStart}
	if c.Wandering.Op != 0 {
		wc.Op = c.Wandering.Op
	}
	if c.Wandering.Skip != 0 {
		wc.Skip = c.Wandering.Skip
	}
	if c.Wandering.NMax != 0 {
		wc.NMax = c.Wandering.NMax
	}
	if err := wc.Validate(); err != nil {
		field, _, _ := strings.Cut(err.Error(), ":")
		c.errorf("$.wandering."+strings.SplitN(field, ",", 2)[0], "%v", strings.TrimPrefix(err.Error(), field+": "))
	}
	if err := c.file.Err(); err != nil {
		return nil, err
	}

	// Compressed time: paper durations divided by the scales.
	k, kn := r.TimeScale, r.NetworkTimeScale
	r.Passing = pc.Scaled(kn)
	div := func(d time.Duration) time.Duration { return time.Duration(float64(d) / k) }
	rw.Hold, rw.ExpectedReturn = div(rw.Hold), div(rw.ExpectedReturn)
	rw.Transit = 2 * r.Passing.MoveTimeout
	r.RandomWalk = rw
	r.DirectoryTTL = div(c.DirectoryTTL)
	wc = wc.WithDefaults()
	wc.Op, wc.Skip, wc.Min, wc.Generate = div(wc.Op), div(wc.Skip), div(wc.Min), div(wc.Generate)
	r.Wandering = wc
	return r, nil
}
