package main

import (
	"bytes"
	"os"
	"path/filepath"
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

// An experiment naming a protocol no plug-in registers is a usage error
// naming the file and the registered protocols, before anything runs.
func TestRunUnknownProtocol(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.yaml")
	os.WriteFile(p, []byte("name: x\nprotocol: ftn\nseed: 1\nduration: 10s\nagents:\n  - {name: A, generate: true}\n  - {name: B}\n"), 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"run", "--results", t.TempDir(), p}, &out, &errb)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitUsage, errb.String())
	}
	if msg := errb.String(); !strings.Contains(msg, p) || !strings.Contains(msg, `"ftn"`) || !strings.Contains(msg, "tokenpassing") {
		t.Errorf("stderr %q: want the file, the protocol and the known ones", msg)
	}
}
