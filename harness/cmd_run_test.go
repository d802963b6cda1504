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
	for _, want := range []string{`--backend "vmware"`, "container", "netns", "sim"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q does not name %q", msg, want)
		}
	}
}

// --cpu-latency takes a duration or "off"; anything else is a usage
// error naming the flag, before anything is created.
func TestRunCPULatencyFlag(t *testing.T) {
	for _, c := range []struct {
		arg   string
		bound string // "" for off
		bad   bool
	}{{"0s", "0s", false}, {"50us", "50µs", false}, {"off", "", false}, {"-1us", "", true}, {"soon", "", true}} {
		var f runFlags
		fs := runFlagSet(&f, &bytes.Buffer{})
		if err := fs.Parse([]string{"--cpu-latency", c.arg}); err != nil {
			t.Fatal(err)
		}
		msg := f.check()
		switch {
		case c.bad && !strings.Contains(msg, `--cpu-latency "`+c.arg+`"`):
			t.Errorf("--cpu-latency %s: %q, want an error naming the flag", c.arg, msg)
		case !c.bad && msg != "":
			t.Errorf("--cpu-latency %s: %q", c.arg, msg)
		case !c.bad && c.bound == "" && f.cpuBound != nil:
			t.Errorf("--cpu-latency off: bound %v, want none", *f.cpuBound)
		case !c.bad && c.bound != "" && (f.cpuBound == nil || f.cpuBound.String() != c.bound):
			t.Errorf("--cpu-latency %s: bound %v, want %s", c.arg, f.cpuBound, c.bound)
		}
	}
	// The default holds 0: idle CPUs poll while the agents run.
	var f runFlags
	fs := runFlagSet(&f, &bytes.Buffer{})
	fs.Parse(nil)
	if f.check(); f.cpuBound == nil || *f.cpuBound != 0 {
		t.Errorf("default bound %v, want 0s", f.cpuBound)
	}
}

// An experiment naming a protocol no plug-in registers is a usage error
// naming the file and the registered protocols, before anything runs.
func TestRunUnknownProtocol(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.yaml")
	os.WriteFile(p, []byte("name: x\nprotocol: paxos\nseed: 1\nduration: 10s\nagents:\n  - {name: A, generate: true}\n  - {name: B}\n"), 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"run", "--results", t.TempDir(), p}, &out, &errb)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitUsage, errb.String())
	}
	if msg := errb.String(); !strings.Contains(msg, p) || !strings.Contains(msg, `"paxos"`) || !strings.Contains(msg, "tokenpassing") {
		t.Errorf("stderr %q: want the file, the protocol and the known ones", msg)
	}
}

// harness run --backend sim runs an experiment file unchanged, needs no
// agent binary and no root, analyses it like any run, and a failing run
// prints the command that replays it.
func TestRunSim(t *testing.T) {
	var out, errb bytes.Buffer
	res := t.TempDir()
	code := run([]string{"run", "--backend", "sim", "--agent", "/nonexistent", "--results", res, filepath.Join("..", "experiments", "three-agents.yaml")}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stdout %s; stderr %s", code, out.String(), errb.String())
	}
	for _, want := range []string{"results: ", "validation   PASS", "liveness     PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	// Latency figures the model cannot meet: the run fails its checks.
	b, err := os.ReadFile(filepath.Join("..", "experiments", "three-agents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "strict.yaml")
	os.WriteFile(p, append(b, []byte("checks:\n  latency:\n    - {link: \"A>B\", mean: 1ms}\n")...), 0o644)
	out.Reset()
	errb.Reset()
	code = run([]string{"run", "--backend", "sim", "--duration", "100s", "--results", res, p}, &out, &errb)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitFailed, errb.String())
	}
	if want := "replay (seed 7): harness run --backend sim --duration 1m40s " + p; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errb.String())
	}
}
