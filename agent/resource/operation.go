// Package resource is the protected operation of the Wandering Token
// (seed 003 §1: subscribers download chunks of a data stream from one
// shared server; Fig. 1 line 24 performs the operation for Δop) made real
// for the testbed: a pluggable Operation that the agent's driver starts on
// the node's op_started event and ends on its op_finished, and the shared
// resource server (Server) that the "resource" operation downloads from.
//
// The server logs, in the eventlog envelope, every client's connect and
// disconnect: its own view of how many agents use it at once, an
// independent source for the concurrency figures of 003 Figs. 2 and 3
// (analysis/resource reads it).
//
// The node, a pure state machine, only emits the two events; the
// operation does the I/O in its own goroutines, so a slow or dead server
// never delays a pass.
package resource

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"tokenbed/agent/eventlog"
)

// Operation is the protected operation. Start and Finish must not block:
// the driver calls them between a batch's log write and its datagrams.
// An operation is identified by the token that enabled it (several tokens
// can enable overlapping operations at one agent).
type Operation interface {
	Kind() string
	Start(token string)
	Finish(token string)
	// Close ends every operation still running (the agent stops).
	Close()
}

// Config configures an operation: the agent configuration's "operation"
// section.
type Config struct {
	// Kind names the operation: "hold" (the default: the token is held
	// for Δop and nothing else happens) or "resource".
	Kind string `yaml:"kind"`
	// Server is the resource server's TCP address (kind resource).
	Server string `yaml:"server"`
}

// Env is what an operation may use: the agent's name (sent to the
// server) and its event log, for the operation's own notices.
type Env struct {
	Agent string
	Log   *eventlog.Writer
}

// Factory builds an operation from its configuration; it returns an error
// naming the invalid field.
type Factory func(Config, Env) (Operation, error)

var (
	mu        sync.Mutex
	factories = map[string]Factory{}
)

// Register adds an operation kind; a second registration of a kind panics.
func Register(kind string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[kind]; dup {
		panic("resource: operation " + kind + " registered twice")
	}
	factories[kind] = f
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	mu.Lock()
	defer mu.Unlock()
	var ks []string
	for k := range factories {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// New builds the operation c names; an empty kind is "hold".
func New(c Config, env Env) (Operation, error) {
	if c.Kind == "" {
		c.Kind = KindHold
	}
	mu.Lock()
	f, ok := factories[c.Kind]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("kind: unknown operation %q (known: %s)", c.Kind, strings.Join(Kinds(), ", "))
	}
	return f(c, env)
}

// Validate checks c without starting anything. A resource operation
// without a server passes: an experiment leaves it to the run, which
// starts one per replica and fills it in; New refuses it.
func (c Config) Validate() error {
	if c.Kind == KindResource && c.Server == "" {
		c.Server = "0.0.0.0:1" // any address: only the other fields are checked
	}
	_, err := New(c, Env{})
	return err
}

// KindHold is the operation of seed 003 as its simulation models it: the
// token is held for Δop, and nothing else happens.
const KindHold = "hold"

// Hold is the "hold" operation.
type Hold struct{}

var _ Operation = Hold{}

func init() {
	Register(KindHold, func(c Config, _ Env) (Operation, error) {
		if c.Server != "" {
			return nil, fmt.Errorf("server: operation hold uses no server (got %q)", c.Server)
		}
		return Hold{}, nil
	})
}

// Kind implements Operation.
func (Hold) Kind() string { return KindHold }

// Start implements Operation.
func (Hold) Start(string) {}

// Finish implements Operation.
func (Hold) Finish(string) {}

// Close implements Operation.
func (Hold) Close() {}
