package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A value given by a flag is reported as the flag's,
// not at the line of the configuration file it overrides.
func TestFlagErrorNamesTheFlag(t *testing.T) {
	p := filepath.Join(t.TempDir(), "good.yaml")
	os.WriteFile(p, []byte("name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\n"), 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"run", "--config", p, "--listen", "bad", "--peer", "B=nowhere"}, &out, &errb)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, errb.String())
	}
	msg := errb.String()
	for _, want := range []string{`flag -listen: "bad"`, `flag -peer: "nowhere"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "good.yaml:2") {
		t.Errorf("the flag's value is reported at the file's line:\n%s", msg)
	}
}
