// Package config is the agent's configuration file: YAML, decoded strictly
// (an unknown field is an error naming the file and line), validated with
// every error reported at once. Durations are in paper time: the time
// scale divides them (see Scale).
package config

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/circulation"
	"tokenbed/agent/clock"
	"tokenbed/agent/node"
	"tokenbed/agent/passing"
	"tokenbed/agent/resource"
	"tokenbed/agent/wire"
	"tokenbed/internal/strictyaml"
)

// RoleRandomWalk is the role of a configuration that names none.
const RoleRandomWalk = circulation.DefaultRole

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
	// Exchange is the variant of the operation: "4way" (002 §3, the
	// default) or "3way" (004 §4). The 3-way exchange waits move_timeout
	// for the Ack and ack_timeout for the Commit (004 sets both to Δskip)
	// and sends each message once; see agent/passing.
	Exchange      string        `yaml:"exchange,omitempty"`
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
	// Generate makes the agent generate a token when it starts (the
	// --generate flag); a policy's section may say so too.
	Generate bool `yaml:"generate,omitempty"`
	// Policies are the circulation policies' own sections, keyed by role
	// ("randomwalk:", "wandering:" at the top of the file): each decoded
	// into the type its policy registered (circulation.Register), written
	// back in place by MarshalYAML. Only registered roles are sections;
	// any other unknown key is an error at its line.
	Policies map[string]any `yaml:"-"`
	// Fault breaks the protocol on purpose (skip_ack_check,
	// acquire_on_move) to prove that the testbed catches a broken agent.
	Fault string `yaml:"fault"`
	// DropRate drops this share of the agent's outgoing datagrams in its
	// own transport (seeded): loss without an emulated network, for tests.
	DropRate float64 `yaml:"drop_rate"`
	// MaxClockSkew bounds the difference between members' wall clocks,
	// in real time even when time is compressed (agent/node, "Restarts").
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
	// Clock is the agent's local clock against the reference (agent/clock):
	// an offset, in paper time like the policies' durations, and a drift
	// rate. The protocol machines read that clock; the log keeps the
	// reference time (and the local reading in local_ns).
	Clock clock.Skew `yaml:"clock,omitempty"`
	// Operation is the protected operation run between the node's
	// op_started and op_finished (agent/resource): {kind: hold}, the
	// default, or {kind: resource, server: IP:PORT}.
	Operation resource.Config `yaml:"operation"`

	file *strictyaml.File
	// node is what the configuration was decoded from: an agent's file
	// ("$"), or an experiment's agent ("$.agents[2].config", merged over
	// defaults.agent); errors are located in it, at each value's line.
	node    strictyaml.Node
	decoded bool
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
	b, err := strictyaml.ReadFile(path)
	if err != nil {
		return nil, err
	}
	n, err := strictyaml.Parse(path, b)
	if err != nil {
		return nil, err
	}
	return Decode(n)
}

// Decode decodes a configuration from n: an agent's whole file, or the
// settings an experiment gives an agent. Its own fields are decoded
// strictly; a key naming a registered role is that policy's section,
// decoded into the policy's own type. Validate reports its errors in n's
// file, at n's path.
func Decode(n strictyaml.Node) (*Config, error) {
	rest, sections := n.Split(circulation.Known)
	var c Config
	if err := rest.Decode(&c); err != nil {
		return nil, err
	}
	c.file, c.node, c.decoded = n.File(), n, true
	for _, role := range slices.Sorted(maps.Keys(sections)) {
		s, err := circulation.NewSection(role)
		if err != nil {
			return nil, err
		}
		if err := sections[role].Decode(s); err != nil {
			return nil, err
		}
		c.SetPolicy(role, s)
	}
	return &c, nil
}

// SetPolicy sets role's section: a value circulation.NewSection(role)
// returned, filled in.
func (c *Config) SetPolicy(role string, section any) {
	if c.Policies == nil {
		c.Policies = map[string]any{}
	}
	c.Policies[role] = section
}

// MarshalYAML writes the configuration with each policy's section under
// its role, where Decode reads it.
func (c *Config) MarshalYAML() (any, error) {
	type plain Config // without this method
	b, err := yaml.Marshal((*plain)(c))
	if err != nil {
		return nil, err
	}
	var out yaml.MapSlice
	if err := yaml.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	for _, role := range slices.Sorted(maps.Keys(c.Policies)) {
		out = append(out, yaml.MapItem{Key: role, Value: c.Policies[role]})
	}
	return out, nil
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
	if c.decoded {
		c.node.Errorf(strings.TrimPrefix(strings.TrimPrefix(path, "$"), "."), format, a...)
		return
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
	Clock            clock.Skew    // offset divided by the time scale
	DirectoryTTL     time.Duration
	Operation        resource.Config
	Passing          passing.Config
	// Policy is the role's section resolved by its policy (for
	// circulation.New; e.g. a randomwalk.Config), in real time.
	Policy any
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
	if f, msg := c.Clock.Problem(); f != "" {
		c.errorf("$.clock."+f, "%s", msg)
	}
	if err := c.Operation.Validate(); err != nil {
		c.errorf("$.operation", "%v", err)
	}
	r.Operation = c.Operation
	if c.DirectoryTTL < 0 {
		c.errorf("$.directory_ttl", "must not be negative")
	}

	pc := c.passingConfig()

	// Every policy section present is checked, the role's own resolved
	// even when absent (its defaults). Compressed time: the policies
	// divide their durations by the time scale; the passing timeouts are
	// network time.
	scaled := pc.Scaled(r.NetworkTimeScale)
	roles := slices.Sorted(maps.Keys(c.Policies))
	if circulation.Known(r.Role) && c.Policies[r.Role] == nil {
		roles = append(roles, r.Role)
	}
	for _, role := range roles {
		env := circulation.Env{TimeScale: r.TimeScale, Generate: c.Generate, Join: c.Join, Transit: 2 * scaled.MoveTimeout,
			Errorf: func(field, format string, a ...any) {
				c.errorf(strings.TrimSuffix("$."+role+"."+field, "."), format, a...)
			}}
		pcfg, err := circulation.Resolve(role, c.Policies[role], env)
		if err != nil {
			c.errorf("$."+role, "%v", err)
		}
		if role == r.Role {
			r.Policy = pcfg
		}
	}
	if err := c.file.Err(); err != nil {
		return nil, err
	}

	// Compressed time: paper durations divided by the scales.
	k, kn := r.TimeScale, r.NetworkTimeScale
	r.Passing = pc.Scaled(kn)
	div := func(d time.Duration) time.Duration { return time.Duration(float64(d) / k) }
	r.DirectoryTTL = div(c.DirectoryTTL)
	r.Clock = c.Clock.Scaled(k)
	return r, nil
}

// passingConfig resolves the passing section (the exchange, 002 §3 or
// 004 §4, its timeouts and retries) and the testing fault, reporting
// every error at its field.
func (c *Config) passingConfig() passing.Config {
	pc := passing.DefaultConfig()
	if _, err := passing.LookupExchange(c.Passing.Exchange); err != nil {
		c.errorf("$.passing.exchange", "%v", err)
	}
	pc.Exchange = c.Passing.Exchange
	if pc.Exchange == "" {
		pc.Exchange = passing.DefaultExchange
	}
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
	return pc
}
