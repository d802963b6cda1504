package circulation_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/circulation/wandering"
	"tokenbed/internal/registry"
)

func TestRegistry(t *testing.T) {
	if got := strings.Join(circulation.Roles(), " "); got != "randomwalk wandering" {
		t.Errorf("Roles() = %q", got)
	}
	p, err := circulation.New(wandering.Role, wandering.Config{Op: time.Second, NMax: 3}.WithDefaults())
	if err != nil || p.Name() != wandering.Role {
		t.Fatalf("New(wandering) = %v, %v", p, err)
	}
	if _, err := circulation.New(randomwalk.Role, wandering.Config{}); err == nil || !strings.Contains(err.Error(), "wandering.Config") {
		t.Errorf("randomwalk with a wandering configuration: %v, want a type error", err)
	}
	_, err = circulation.New("ring", nil)
	var unk *registry.UnknownError
	if !errors.As(err, &unk) || !strings.Contains(err.Error(), `"ring"`) || !strings.Contains(err.Error(), "randomwalk, wandering") {
		t.Errorf("New(ring) error %v: want an UnknownError listing the roles", err)
	}
}
