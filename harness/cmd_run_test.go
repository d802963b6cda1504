package main

import (
	"bytes"
	"strings"
	"testing"
)

// An unknown --backend is a usage error that lists the registered
// backends, before anything is created.
func TestRunUnknownBackendListsRegistry(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"run", "--backend", "vmware", "--results", t.TempDir(), "x.yaml"}, &out, &errb)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d (usage); stderr: %s", code, exitUsage, errb.String())
	}
	msg := errb.String()
	for _, want := range []string{`--backend "vmware"`, "container", "netns"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q does not name %q", msg, want)
		}
	}
}
