// Package backend defines what the harness needs from a way of running
// agents on an emulated network (as containerlab's runtime interface):
// build the network, start and signal agent processes, say where each
// agent's traffic can be captured and impaired, and tear everything down.
// Implementations: nsbackend (network namespaces, the default),
// ctrbackend (Docker containers through testcontainers-go) and sim (the
// deterministic simulator, harness/sim: its processes are protocol
// processes in virtual time, started by the runner, not commands).
package backend

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"syscall"

	"github.com/vishvananda/netns"
)

// Agent is one agent instance to place on the network.
type Agent struct {
	Name     string // name in the experiment (A, B, C)
	Replica  int    // 0-based
	Instance string // member name: results.Instance(Name, Replica)
	Addr     netip.Addr
}

// Spec is the network to build: replicas are isolated from each other.
type Spec struct {
	RunID    string
	Replicas [][]Agent
	// Prefixes[r] is replica r's subnet; every agent of it has an address
	// in it. Replicas get distinct subnets (Docker refuses overlapping
	// networks), though the netns backend would not need it.
	Prefixes []netip.Prefix
	// Mounts are host directories an agent must see at the same path
	// (its configuration, credentials and event log); the netns backend
	// shares the host's filesystem anyway.
	Mounts []string
}

// ReplicaPrefix is the subnet of replica r under base (a /16): the /24
// numbered r.
func ReplicaPrefix(base netip.Prefix, r int) netip.Prefix {
	a := base.Masked().Addr().As4()
	a[2] = byte(r)
	return netip.PrefixFrom(netip.AddrFrom4(a), 24)
}

// ReplicaPrefixFor is the subnet of replica r under base for replicas of
// n agents each: the /24 numbered r (ReplicaPrefix) while n fits in it
// (host numbers 1..254), else the smallest wider block that holds n,
// the r-th of its size. A /24 alone would put a 254th agent on the
// broadcast address and the rest in the next replica's subnet.
func ReplicaPrefixFor(base netip.Prefix, r, n int) (netip.Prefix, error) {
	bits := 24
	for bits > base.Bits() && (1<<(32-bits))-2 < n {
		bits--
	}
	size := 1 << (32 - bits)
	if size-2 < n || (r+1)*size > 1<<(32-base.Bits()) {
		return netip.Prefix{}, fmt.Errorf("replica %d of %d agents does not fit in %v", r, n, base)
	}
	if bits == 24 {
		return ReplicaPrefix(base, r), nil
	}
	a := base.Masked().Addr().As4()
	v := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) + uint32(r*size)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits), nil
}

// AgentAddr is the address of the i-th agent in prefix: host number i+1.
func AgentAddr(prefix netip.Prefix, i int) netip.Addr {
	a := prefix.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += uint32(i + 1)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// Port is where an agent's traffic can be seen or changed: a link in a
// network namespace.
type Port struct {
	NS     netns.NsHandle
	NSPath string
	Link   string
	// Name says where the port is, for people: a namespace's or a
	// container's name. Empty: the base name of NSPath.
	Name string
}

// Cmd is an agent process to start.
type Cmd struct {
	Path   string
	Args   []string
	Env    []string
	Stdout *os.File
	Stderr *os.File
}

// Process is a started agent process.
type Process interface {
	Pid() int
	Signal(syscall.Signal) error
	// Wait waits for the process to end and returns its exit status
	// (-1 and the signal when it was killed).
	Wait() (code int, sig syscall.Signal, err error)
}

// Backend runs agents on an emulated network.
type Backend interface {
	Name() string
	// Setup builds the network. On error, what was built is removed.
	Setup(ctx context.Context, spec Spec) error
	// AgentPort is the agent's own interface, inside its namespace: what
	// it sends leaves there first, what it receives arrives there last.
	AgentPort(instance string) (Port, error)
	// IngressPort is the other end of the agent's link: its egress queue
	// holds the traffic toward the agent, where profiles are applied by
	// source (the direction FROM>agent).
	IngressPort(instance string) (Port, error)
	// Start starts a process as the agent.
	Start(ctx context.Context, instance string, cmd Cmd) (Process, error)
	// Teardown kills every process started and removes everything Setup
	// created, and only that.
	Teardown(ctx context.Context) error
}

// runIDPattern: every object a run creates is named after its run ID.
var runIDPattern = regexp.MustCompile(`^tb[0-9a-f]{6}$`)

// ValidRunID reports whether id has the form of a run ID: "tb" and six
// hex digits, short enough to prefix interface names (15 bytes at most).
func ValidRunID(id string) bool { return runIDPattern.MatchString(id) }
