package sim

import (
	"context"
	"errors"
	"time"

	"tokenbed/harness/backend"
)

// Name is the backend's name (harness run --backend sim).
const Name = "sim"

// Link is the name of every simulated agent's interface (capture: "A/sim0").
const Link = "sim0"

// Backend is the simulator as a harness backend: Setup places every agent
// on a host of a World. Processes are not commands here: the runner
// starts them through World.Start, with the Process its protocol builds
// (protocol.Simulated), and the schedule drives the World's clock.
type Backend struct {
	World *World
	// Workers is Config.Workers of the worlds Configure makes, unless
	// the Config sets it (harness swarm: -1, a simulation per core).
	Workers int
}

var _ backend.Backend = (*Backend)(nil)

func init() {
	backend.Register(Name, "deterministic simulation: the agents' own code on the netem model, in virtual time",
		func(backend.Options) backend.Backend { return &Backend{World: New(Config{})} })
}

// Configure makes a new world with cfg, at virtual time 0; Setup places
// the agents in it.
func (b *Backend) Configure(cfg Config) {
	if cfg.Workers == 0 {
		cfg.Workers = b.Workers
	}
	b.World = New(cfg)
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Setup implements backend.Backend: one host per agent.
func (b *Backend) Setup(_ context.Context, spec backend.Spec) error {
	for _, rep := range spec.Replicas {
		for _, a := range rep {
			if _, err := b.World.AddHost(a.Instance, a.Addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// AgentPort implements backend.Backend: where the agent is, for people.
func (b *Backend) AgentPort(string) (backend.Port, error) {
	return backend.Port{Name: "simulated", Link: Link}, nil
}

// IngressPort implements backend.Backend.
func (b *Backend) IngressPort(instance string) (backend.Port, error) { return b.AgentPort(instance) }

// ErrNotACommand: the simulator runs Processes, not commands.
var ErrNotACommand = errors.New("sim: the simulator runs protocol processes (protocol.Simulated), not commands")

// Start implements backend.Backend; see ErrNotACommand.
func (b *Backend) Start(context.Context, string, backend.Cmd) (backend.Process, error) {
	return nil, ErrNotACommand
}

// Teardown implements backend.Backend: closes the logs still open.
func (b *Backend) Teardown(context.Context) error {
	if b.World != nil {
		return b.World.Close()
	}
	return nil
}

// Clock is the world's clock as the runner reads it.
func (b *Backend) Clock() (time.Time, int64) { return b.World.Now(), b.World.Mono() }
