package circulation

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Factory makes a policy from its resolved configuration: the value the
// agent's configuration resolved for the policy's own section (for
// randomwalk a randomwalk.Config). A factory given a value of another type
// returns an error.
type Factory func(cfg any) (Policy, error)

var (
	regMu    sync.Mutex
	registry = map[string]Factory{}
)

// Register makes a policy known by its role name (as containerlab's
// runtime.Register). Policy packages call it from init; the agent binary
// imports them. Registering a name twice panics.
func Register(role string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[role]; dup {
		panic("circulation: " + role + " registered twice")
	}
	registry[role] = f
}

// Roles lists the registered policies, sorted.
func Roles() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// UnknownRoleError says that no policy is registered under Role.
type UnknownRoleError struct{ Role string }

func (e *UnknownRoleError) Error() string {
	return fmt.Sprintf("%q: this agent runs roles %s", e.Role, strings.Join(Roles(), ", "))
}

// Known reports whether a policy is registered under role.
func Known(role string) bool {
	regMu.Lock()
	defer regMu.Unlock()
	_, ok := registry[role]
	return ok
}

// New makes the policy registered under role from its configuration. An
// unknown role is an *UnknownRoleError: never a silent default.
func New(role string, cfg any) (Policy, error) {
	regMu.Lock()
	f, ok := registry[role]
	regMu.Unlock()
	if !ok {
		return nil, &UnknownRoleError{Role: role}
	}
	return f(cfg)
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
