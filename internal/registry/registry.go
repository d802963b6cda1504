// Package registry is a set of named implementations, as containerlab's
// runtime registry (runtime.Register): backends, circulation policies and
// protocols register by name from their packages' init, and the CLI and
// configuration lists and validates names from here.
package registry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Registry maps names to implementations. It is safe for concurrent use.
type Registry[T any] struct {
	what string // "backend", "role": for messages
	mu   sync.Mutex
	m    map[string]T
}

// New returns an empty registry of what (e.g. "backend").
func New[T any](what string) *Registry[T] { return &Registry[T]{what: what, m: map[string]T{}} }

// Register adds v under name. Registering a name twice is a programming
// error and panics.
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(r.what + " " + name + " registered twice")
	}
	r.m[name] = v
}

// Names lists the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.m))
	for n := range r.m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Lookup returns what is registered under name, or an *UnknownError.
func (r *Registry[T]) Lookup(name string) (T, error) {
	r.mu.Lock()
	v, ok := r.m[name]
	r.mu.Unlock()
	if !ok {
		return v, &UnknownError{What: r.what, Name: name, Known: r.Names()}
	}
	return v, nil
}

// UnknownError says that nothing is registered under Name, and lists what
// is.
type UnknownError struct {
	What  string
	Name  string
	Known []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("%q: no such %s; known: %s", e.Name, e.What, strings.Join(e.Known, ", "))
}
