// Package ftnconfig is the configuration file of an FTN server or client
// (seed 001): YAML, decoded strictly (an unknown field is an error naming
// file and line), every invalid field reported at once. All servers share
// the same server list (001 "Configuration"); clients are not
// prespecified and need only the list.
//
//	name: s0                   # the certificate's CommonName
//	role: server               # or client
//	listen: 10.0.0.1:7000
//	ca: ca/ca.crt
//	credentials: ca            # holds NAME.crt and NAME.key
//	log: logs/s0.jsonl         # "-": standard output
//	seed: 1
//	tick: 50ms                 # one machine tick (every *_ticks counts these)
//	time_scale: 1              # divides tick and the workload's times
//	servers:
//	  - {name: s0, addr: "10.0.0.1:7000"}
//	server: {heartbeat_ticks: 1, election_ticks: 10, lease_ticks: 6,
//	         server_down_ticks: 10, client_down_ticks: 60, retry_ticks: 2}
//	client: {heartbeat_ticks: 3, retry_ticks: 2, leader_silent_ticks: 6}
//	workload: {names: 8, shared: 0.3, rate: 2, hold: 200ms, data: true, shared_writes: false}
package ftnconfig

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/host"
	"tokenbed/agent/ftn/msg"
	"tokenbed/agent/ftn/server"
	"tokenbed/internal/strictyaml"
)

// Roles.
const (
	RoleServer = "server"
	RoleClient = "client"
)

// Peer is a server of the shared list.
type Peer struct {
	Name string `yaml:"name"`
	Addr string `yaml:"addr"`
}

// Server timing, in ticks (0: the server package's default).
type Server struct {
	HeartbeatTicks  int `yaml:"heartbeat_ticks"`
	ElectionTicks   int `yaml:"election_ticks"`
	LeaseTicks      int `yaml:"lease_ticks"`
	ServerDownTicks int `yaml:"server_down_ticks"`
	ClientDownTicks int `yaml:"client_down_ticks"`
	RetryTicks      int `yaml:"retry_ticks"`
	// SkipRecoveryQuery makes the deliberately broken server (tests and
	// the checker's demonstration only).
	SkipRecoveryQuery bool `yaml:"skip_recovery_query"`
}

// Client timing, in ticks (0: the client package's default).
type Client struct {
	HeartbeatTicks    int `yaml:"heartbeat_ticks"`
	RetryTicks        int `yaml:"retry_ticks"`
	LeaderSilentTicks int `yaml:"leader_silent_ticks"`
}

// Workload of a client role (host.Workload).
type Workload struct {
	Names  int           `yaml:"names"`
	Shared float64       `yaml:"shared"`
	Rate   float64       `yaml:"rate"` // acquisitions per second
	Hold   time.Duration `yaml:"hold"`
	Data   bool          `yaml:"data"`
	// SharedWrites: shared holders write the data too (FCFS, 001
	// "Token data"); otherwise only exclusive holders write.
	SharedWrites bool `yaml:"shared_writes"`
}

// Config is one process's file.
type Config struct {
	Name        string        `yaml:"name"`
	Role        string        `yaml:"role"`
	Listen      string        `yaml:"listen"`
	CA          string        `yaml:"ca"`
	Credentials string        `yaml:"credentials"`
	Log         string        `yaml:"log"`
	Seed        uint64        `yaml:"seed"`
	Tick        time.Duration `yaml:"tick"`
	TimeScale   float64       `yaml:"time_scale"`
	Servers     []Peer        `yaml:"servers"`
	Server      Server        `yaml:"server"`
	Client      Client        `yaml:"client"`
	Workload    *Workload     `yaml:"workload"`

	file *strictyaml.File
}

// Load reads and validates path.
func Load(path string) (*Config, error) {
	var c Config
	f, err := strictyaml.Load(path, &c)
	if err != nil {
		return nil, err
	}
	c.file = f
	c.validate()
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Decode reads and validates a file's contents (name for errors).
func Decode(name string, data []byte) (*Config, error) {
	var c Config
	f, err := strictyaml.Decode(name, data, &c)
	if err != nil {
		return nil, err
	}
	c.file = f
	c.validate()
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate() {
	f := c.file
	if c.Name == "" {
		f.Errorf("$.name", "required")
	}
	if c.Role != RoleServer && c.Role != RoleClient {
		f.Errorf("$.role", "%q: want %s or %s", c.Role, RoleServer, RoleClient)
	}
	if _, err := netip.ParseAddrPort(c.Listen); err != nil {
		f.Errorf("$.listen", "%v", err)
	}
	if c.CA == "" {
		f.Errorf("$.ca", "required")
	}
	if c.Credentials == "" {
		f.Errorf("$.credentials", "required")
	}
	if c.Log == "" {
		f.Errorf("$.log", "required")
	}
	if c.Tick == 0 {
		c.Tick = 50 * time.Millisecond
	}
	if c.Tick < 0 {
		f.Errorf("$.tick", "must be positive")
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if c.TimeScale < 0 {
		f.Errorf("$.time_scale", "must be positive")
	}
	if len(c.Servers) == 0 {
		f.Errorf("$.servers", "required: the shared server list")
	}
	self := false
	for i, p := range c.Servers {
		if p.Name == "" {
			f.Errorf(fmt.Sprintf("$.servers[%d].name", i), "required")
		}
		if _, err := netip.ParseAddrPort(p.Addr); err != nil {
			f.Errorf(fmt.Sprintf("$.servers[%d].addr", i), "%v", err)
		}
		self = self || p.Name == c.Name
	}
	if c.Role == RoleServer && !self && c.Name != "" {
		f.Errorf("$.servers", "%s is not in the list", c.Name)
	}
	c.validateTiming()
	if w := c.Workload; w != nil {
		if c.Role != RoleClient {
			f.Errorf("$.workload", "only a client runs a workload")
		}
		if w.Names <= 0 {
			f.Errorf("$.workload.names", "must be positive")
		}
		if w.Shared < 0 || w.Shared > 1 {
			f.Errorf("$.workload.shared", "%v: want 0..1", w.Shared)
		}
		if w.Rate <= 0 {
			f.Errorf("$.workload.rate", "must be positive")
		}
		if w.Hold < 0 {
			f.Errorf("$.workload.hold", "must not be negative")
		}
	}
}

// validateTiming reports the server and client sections' errors at their
// lines: the machines' own Validate judges the values (one rule, in one
// place), and each of its errors names the field as this file spells it.
func (c *Config) validateTiming() {
	one := []msg.Peer{{Name: "s", Addr: netip.MustParseAddrPort("127.0.0.1:1")}}
	s := c.Server
	report := func(section string, err error, fields []string) {
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			field, reason, _ := strings.Cut(line, ": ")
			if slices.Contains(fields, field) {
				c.file.Errorf("$."+section+"."+field, "%s", reason)
			}
		}
	}
	report("server", server.Config{Self: 0, Servers: one, Inc: 1, HeartbeatTicks: s.HeartbeatTicks, ElectionTicks: s.ElectionTicks,
		LeaseTicks: s.LeaseTicks, ServerDownTicks: s.ServerDownTicks, ClientDownTicks: s.ClientDownTicks, RetryTicks: s.RetryTicks}.Validate(),
		[]string{"heartbeat_ticks", "election_ticks", "lease_ticks", "server_down_ticks", "client_down_ticks", "retry_ticks"})
	cl := c.Client
	report("client", client.Config{Servers: one, HeartbeatTicks: cl.HeartbeatTicks, RetryTicks: cl.RetryTicks,
		LeaderSilentTicks: cl.LeaderSilentTicks}.Validate(), []string{"heartbeat_ticks", "retry_ticks", "leader_silent_ticks"})
}

func (c *Config) peers() []msg.Peer {
	var ps []msg.Peer
	for _, p := range c.Servers {
		ps = append(ps, msg.Peer{Name: p.Name, Addr: netip.MustParseAddrPort(p.Addr)})
	}
	return ps
}

// Scaled divides d by the time scale.
func (c *Config) Scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.TimeScale)
}

// Host builds the process: credentials, codec and machine. now is its
// start (a server's incarnation), on the clock of the caller.
func (c *Config) Host(now time.Time) (*host.Host, error) {
	creds, err := ca.LoadMember(c.Credentials, c.Name, c.CA)
	if err != nil {
		return nil, err
	}
	return c.HostWith(creds, now)
}

// HostWith builds the process with the given credentials.
func (c *Config) HostWith(creds *ca.Credentials, now time.Time) (*host.Host, error) {
	hc := host.Config{Self: netip.MustParseAddrPort(c.Listen), Codec: codec.New(creds), Tick: c.Scaled(c.Tick),
		Role: "ftn-" + c.Role, Seed: c.Seed}
	ps := c.peers()
	switch c.Role {
	case RoleServer:
		self := 0
		for i, p := range ps {
			if p.Name == c.Name {
				self = i
			}
		}
		s := c.Server
		srv, err := server.New(server.Config{Self: self, Servers: ps, Inc: uint64(now.UnixNano()), Seed: c.Seed,
			HeartbeatTicks: s.HeartbeatTicks, ElectionTicks: s.ElectionTicks, LeaseTicks: s.LeaseTicks,
			ServerDownTicks: s.ServerDownTicks, ClientDownTicks: s.ClientDownTicks, RetryTicks: s.RetryTicks,
			SkipRecoveryQuery: s.SkipRecoveryQuery})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.file.Name, err)
		}
		hc.Server = srv
	default:
		cc := client.Config{Servers: ps, Nonce: c.Seed ^ uint64(now.UnixNano()), HeartbeatTicks: c.Client.HeartbeatTicks,
			RetryTicks: c.Client.RetryTicks, LeaderSilentTicks: c.Client.LeaderSilentTicks}
		cl, err := client.New(cc)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.file.Name, err)
		}
		hc.Client, hc.ClientConfig = cl, cc
		if w := c.Workload; w != nil {
			hc.Workload = &host.Workload{Names: w.Names, Shared: w.Shared, Rate: w.Rate * c.TimeScale, Hold: c.Scaled(w.Hold), Data: w.Data,
				SharedWrites: w.SharedWrites}
		}
	}
	return host.New(hc)
}
