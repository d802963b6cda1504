package circulation

import (
	"fmt"
	"time"

	"tokenbed/internal/registry"
)

// DefaultRole is the role of an agent whose configuration names none: the
// random walk of 002 §3.2 (package randomwalk).
const DefaultRole = "randomwalk"

// Env is what the agent's configuration tells a policy beyond the
// policy's own section.
type Env struct {
	// TimeScale divides the policy's durations: sections are written in
	// paper time, policies run in real time (compressed time,
	// docs/studies/endurance.md).
	TimeScale float64
	// Generate: the agent generates a token when it starts (its
	// configuration's generate, the --generate flag).
	Generate bool
	// Join is the member the agent joins through, "" if none (002 §3.2).
	Join string
	// Transit is what one pass may take in real time (two Move timeouts).
	Transit time.Duration
	// Errorf reports an invalid field of the section, named relative to
	// it ("hold"; "" for the section itself); the agent's configuration
	// adds the file, the line and the section's path.
	Errorf func(field, format string, a ...any)
}

// Scale converts a paper-time duration of the section to real time.
func (e Env) Scale(d time.Duration) time.Duration {
	if e.TimeScale <= 0 {
		return d
	}
	return time.Duration(float64(d) / e.TimeScale)
}

// Section is a policy's own section of the agent's configuration as
// written (the "randomwalk:" or "wandering:" mapping, keyed by the role):
// a struct with yaml tags, decoded strictly, durations in paper time. C is
// the policy's configuration, in real time.
type Section[C any] interface {
	// Resolve fills in the defaults, reports every invalid field with
	// env.Errorf and returns the policy's configuration with durations
	// divided by env.TimeScale (env.Scale).
	Resolve(env Env) C
}

// Factory makes a policy from its resolved configuration: the value its
// section resolved to (for randomwalk a randomwalk.Config). A factory
// given a value of another type returns an error.
type Factory func(cfg any) (Policy, error)

// entry is one registered policy.
type entry struct {
	section func() any                     // a new, empty section to decode into
	resolve func(section any, env Env) any // Section.Resolve, untyped
	factory Factory
}

var policies = registry.New[entry]("role")

// Register makes a policy known by its role name (as containerlab's
// runtime.Register), with its configuration section S (decoded from the
// agent's file under the key role) and its constructor. Policy packages
// call it from init:
//
//	func init() { circulation.Register[Section](Role, New) }
//
// Registering a name twice panics.
func Register[S any, PS interface {
	*S
	Section[C]
}, C any, P Policy](role string, newPolicy func(C) P) {
	policies.Register(role, entry{
		section: func() any { return PS(new(S)) },
		resolve: func(s any, env Env) any { return s.(PS).Resolve(env) },
		factory: Typed(role, newPolicy),
	})
}

// Roles lists the registered policies, sorted.
func Roles() []string { return policies.Names() }

// Known reports whether a policy is registered under role.
func Known(role string) bool {
	_, err := policies.Lookup(role)
	return err == nil
}

// NewSection returns an empty configuration section of the policy
// registered under role, to decode the role's YAML section into.
func NewSection(role string) (any, error) {
	e, err := policies.Lookup(role)
	if err != nil {
		return nil, err
	}
	return e.section(), nil
}

// Resolve resolves a section NewSection(role) returned (or nil: the
// section is absent, every field takes its default) to the policy's
// configuration for New.
func Resolve(role string, section any, env Env) (any, error) {
	e, err := policies.Lookup(role)
	if err != nil {
		return nil, err
	}
	if section == nil {
		section = e.section()
	}
	if env.Errorf == nil {
		env.Errorf = func(string, string, ...any) {}
	}
	return e.resolve(section, env), nil
}

// New makes the policy registered under role from its configuration. An
// unknown role is a *registry.UnknownError listing the registered roles:
// never a silent default.
func New(role string, cfg any) (Policy, error) {
	e, err := policies.Lookup(role)
	if err != nil {
		return nil, err
	}
	return e.factory(cfg)
}

// UnknownRole is the error for a role no policy is registered under.
func UnknownRole(role string) error {
	_, err := policies.Lookup(role)
	return err
}

// Typed adapts a constructor of one configuration type to a Factory.
func Typed[C any, P Policy](role string, newPolicy func(C) P) Factory {
	return func(cfg any) (Policy, error) {
		c, ok := cfg.(C)
		if !ok {
			return nil, fmt.Errorf("circulation %s: configuration is %T, want %T", role, cfg, c)
		}
		return newPolicy(c), nil
	}
}
