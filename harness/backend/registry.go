package backend

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Options are what the harness gives a backend's constructor.
type Options struct {
	// AgentBin is the agent binary (a container backend builds its image
	// from it).
	AgentBin string
	Log      *slog.Logger
}

// Factory makes a backend.
type Factory func(Options) Backend

// registration is one registered backend.
type registration struct {
	about string
	new   Factory
}

var (
	regMu    sync.Mutex
	registry = map[string]registration{}
)

// Register makes a backend known by name, as containerlab's runtimes
// register (runtime.Register): the CLI lists and validates names from
// here. Implementations call it from init; registering a name twice is a
// programming error and panics.
func Register(name, about string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("backend: " + name + " registered twice")
	}
	registry[name] = registration{about: about, new: f}
}

// Names lists the registered backends, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// About says in a few words what the named backend is ("" if unknown).
func About(name string) string {
	regMu.Lock()
	defer regMu.Unlock()
	return registry[name].about
}

// Check returns an error naming the known backends when name is not one.
func Check(name string) error {
	regMu.Lock()
	_, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return fmt.Errorf("%q: want one of %s", name, strings.Join(Names(), ", "))
	}
	return nil
}

// New makes the named backend.
func New(name string, o Options) (Backend, error) {
	if err := Check(name); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	regMu.Lock()
	f := registry[name].new
	regMu.Unlock()
	return f(o), nil
}
