package backend

import (
	"io"
	"log/slog"

	"tokenbed/internal/registry"
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

type registration struct {
	about string
	new   Factory
}

var backends = registry.New[registration]("backend")

// Register makes a backend known by name, as containerlab's runtimes
// register (runtime.Register): the CLI lists and validates names from
// here. Implementations call it from init; registering a name twice
// panics.
func Register(name, about string, f Factory) { backends.Register(name, registration{about, f}) }

// Names lists the registered backends, sorted.
func Names() []string { return backends.Names() }

// About says in a few words what the named backend is ("" if unknown).
func About(name string) string {
	r, _ := backends.Lookup(name)
	return r.about
}

// Check returns an error naming the known backends when name is not one.
func Check(name string) error {
	_, err := backends.Lookup(name)
	return err
}

// New makes the named backend.
func New(name string, o Options) (Backend, error) {
	r, err := backends.Lookup(name)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r.new(o), nil
}
