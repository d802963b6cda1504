package registry

import (
	"errors"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[int]("backend")
	r.Register("netns", 1)
	r.Register("container", 2)
	if got := strings.Join(r.Names(), " "); got != "container netns" {
		t.Errorf("Names() = %q", got)
	}
	if v, err := r.Lookup("netns"); v != 1 || err != nil {
		t.Errorf("Lookup(netns) = %d, %v", v, err)
	}
	_, err := r.Lookup("vmware")
	var u *UnknownError
	if !errors.As(err, &u) || err.Error() != `"vmware": no such backend; known: container, netns` {
		t.Errorf("Lookup(vmware) error %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of netns did not panic")
		}
	}()
	r.Register("netns", 3)
}
