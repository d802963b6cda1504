package ctrbackend

import (
	"bytes"
	"debug/elf"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"tokenbed/harness/backend"
)

func TestCheckSpec(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	good := func() backend.Spec { return testSpec("tb00aa01", 2, []string{"A", "B"}, dir) }
	if err := checkSpec(good()); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*backend.Spec)
	}{
		{"run id", `run id "x"`, func(s *backend.Spec) { s.RunID = "x" }},
		{"prefix count", "2 replicas but 1 prefixes", func(s *backend.Spec) { s.Prefixes = s.Prefixes[:1] }},
		{"ipv6", "want an IPv4 subnet", func(s *backend.Spec) { s.Prefixes[1] = netip.MustParsePrefix("fd00::/64") }},
		{"tiny", "want an IPv4 subnet of /29 or larger", func(s *backend.Spec) { s.Prefixes[0] = netip.MustParsePrefix("10.77.0.0/30") }},
		{"overlap", "overlap", func(s *backend.Spec) { s.Prefixes[1] = netip.MustParsePrefix("10.77.0.0/16") }},
		{"outside", "agent A.r1: address 10.77.1.1 is outside its replica's prefix 10.77.2.0/24", func(s *backend.Spec) {
			s.Prefixes[1] = netip.MustParsePrefix("10.77.2.0/24")
		}},
		{"gateway", "agent A: address 10.77.0.254 is the network's gateway", func(s *backend.Spec) {
			s.Replicas[0][0].Addr = netip.MustParseAddr("10.77.0.254")
		}},
		{"network address", "is the network address", func(s *backend.Spec) { s.Replicas[0][0].Addr = netip.MustParseAddr("10.77.0.0") }},
		{"relative mount", `mount "results": want an absolute path`, func(s *backend.Spec) { s.Mounts = []string{"results"} }},
		{"file mount", "want an existing directory", func(s *backend.Spec) { s.Mounts = []string{file} }},
		{"missing mount", "want an existing directory", func(s *backend.Spec) { s.Mounts = []string{filepath.Join(dir, "nope")} }},
	} {
		s := good()
		tc.edit(&s)
		if err := checkSpec(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestGatewayIsTheLastHostAddress(t *testing.T) {
	for p, want := range map[string]string{"10.77.0.0/24": "10.77.0.254", "10.77.3.0/24": "10.77.3.254", "10.0.0.8/29": "10.0.0.14", "10.77.0.0/16": "10.77.255.254"} {
		if got := gatewayOf(netip.MustParsePrefix(p)); got.String() != want {
			t.Errorf("gateway of %s: %v, want %s", p, got, want)
		}
	}
}

// The pod holder program is a valid static ELF executable that blocks
// until killed.
func TestPauseProgram(t *testing.T) {
	if _, err := PauseProgram("mips"); err == nil || !strings.Contains(err.Error(), "--backend netns") {
		t.Errorf("unknown GOARCH: %v", err)
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("the pod holder program exists for amd64 only; this is %s", runtime.GOARCH)
	}
	b, err := PauseProgram("")
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != elf.ET_EXEC || f.Machine != elf.EM_X86_64 || len(f.Progs) != 1 || f.Progs[0].Type != elf.PT_LOAD ||
		f.Progs[0].Flags != elf.PF_R|elf.PF_X || f.Entry != elfBase+64+56 {
		t.Errorf("ELF: type %v machine %v entry %#x progs %+v", f.Type, f.Machine, f.Entry, f.Progs)
	}
	if err := checkStatic(bytes.NewReader(b), "pause"); err != nil {
		t.Errorf("checkStatic: %v", err)
	}
	path := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited by itself: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("pause ended with %v, want killed", cmd.ProcessState)
	}
}

// Only a static ELF executable for this machine goes into an image FROM
// scratch.
func TestCheckStatic(t *testing.T) {
	f, err := os.Open(agentBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := checkStatic(f, agentBin); err != nil {
		t.Errorf("the static agent: %v", err)
	}
	dyn, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls to stand for a dynamically linked program")
	}
	if err := copyExecutable(dyn, filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("dynamically linked %s: %v", dyn, err)
	}
	script := filepath.Join(t.TempDir(), "s")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if err := copyExecutable(script, filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "not an ELF executable") {
		t.Errorf("script: %v", err)
	}
}

// The per-run image holds what the top-level Dockerfile's does (make
// image), plus the pod holder: the two must not drift apart.
func TestDockerfileMatchesTopLevel(t *testing.T) {
	top, err := os.ReadFile("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	instructions := func(df string) map[string][]string {
		m := map[string][]string{}
		for _, l := range strings.Split(df, "\n") {
			if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
				m[f[0]] = append(m[f[0]], f[1:]...)
			}
		}
		return m
	}
	tm, rm := instructions(string(top)), instructions(Dockerfile)
	if strings.Join(tm["FROM"], " ") != "scratch" || strings.Join(rm["FROM"], " ") != "scratch" {
		t.Errorf("FROM: top-level %v, per-run %v; want scratch (no registry)", tm["FROM"], rm["FROM"])
	}
	if strings.Join(tm["COPY"], " ") != "agent /" || strings.Join(rm["COPY"], " ") != "agent pause /" {
		t.Errorf("COPY: top-level %v, per-run %v; want agent / and agent pause /", tm["COPY"], rm["COPY"])
	}
	if AgentPath != "/agent" || PausePath != "/pause" || strings.Join(tm["ENTRYPOINT"], " ") != `["`+AgentPath+`"]` {
		t.Errorf("paths: agent %s, pause %s, top-level entrypoint %v", AgentPath, PausePath, tm["ENTRYPOINT"])
	}
}

// The real-time budget: rtShare per agent while the machine has it, less
// when it is short, none under rtMinShare; the group keeps one spare
// share, and never takes more than is free.
func TestRTBudget(t *testing.T) {
	for _, c := range []struct {
		free         int64
		n            int
		share, total int64
	}{
		{950000, 3, 30000, 120000},      // a three-agent run
		{950000, 24, 30000, 750000},     // endurance-smoke: 8 replicas
		{950000, 48, 19387, 19387 * 49}, // endurance: 16 replicas
		{100000, 24, 0, 0},              // 4000 µs each: below rtMinShare
		{0, 3, 0, 0},
	} {
		share, total := rtBudget(c.free, c.n)
		if share != c.share || total != c.total || total > c.free {
			t.Errorf("rtBudget(%d, %d) = %d, %d; want %d, %d", c.free, c.n, share, total, c.share, c.total)
		}
	}
}
