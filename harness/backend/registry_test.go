package backend_test

import (
	"strings"
	"testing"

	"tokenbed/harness/backend"
	_ "tokenbed/harness/backend/nsbackend"
)

func TestRegistry(t *testing.T) {
	if err := backend.Check("netns"); err != nil {
		t.Fatalf("netns not registered: %v", err)
	}
	b, err := backend.New("netns", backend.Options{})
	if err != nil || b.Name() != "netns" {
		t.Fatalf("New(netns) = %v, %v", b, err)
	}
	_, err = backend.New("qemu", backend.Options{})
	if err == nil || !strings.Contains(err.Error(), `"qemu"`) || !strings.Contains(err.Error(), "netns") {
		t.Errorf("New(qemu) error %v: want it to name qemu and list netns", err)
	}
}
