package circulation

import (
	"fmt"

	"tokenbed/internal/registry"
)

// Factory makes a policy from its resolved configuration: the value the
// agent's configuration resolved for the policy's own section (for
// randomwalk a randomwalk.Config). A factory given a value of another type
// returns an error.
type Factory func(cfg any) (Policy, error)

var policies = registry.New[Factory]("role")

// Register makes a policy known by its role name (as containerlab's
// runtime.Register). Policy packages call it from init; the agent binary
// imports them. Registering a name twice panics.
func Register(role string, f Factory) { policies.Register(role, f) }

// Roles lists the registered policies, sorted.
func Roles() []string { return policies.Names() }

// Known reports whether a policy is registered under role.
func Known(role string) bool {
	_, err := policies.Lookup(role)
	return err == nil
}

// New makes the policy registered under role from its configuration. An
// unknown role is a *registry.UnknownError listing the registered roles:
// never a silent default.
func New(role string, cfg any) (Policy, error) {
	f, err := policies.Lookup(role)
	if err != nil {
		return nil, err
	}
	return f(cfg)
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
