// Package testenv is what the project's tests share about their
// environment: the agent binary, built once per test binary, and the
// preconditions a test skips on, each with a stated reason.
//
// # Two test runs
//
// `make test` runs everything as root: namespaces, UML guests, containers.
// `make test-unit` runs `go test -short`, which needs no root and no
// kernel feature: under -short every Require* here skips, so the root
// tests stay out of it even when it runs as root (as it does on the
// project's machines, where no unprivileged user is set up).
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"tokenbed/internal/uml"
)

// AgentEnv names a variable the host sets for a test binary it re-runs
// inside a UML guest: the path of the agent it built. Building in the guest
// would take minutes at the guest's system-call cost.
const AgentEnv = "TOKENBED_TEST_AGENT"

// MainWithAgent is a TestMain for packages that run the agent: it builds
// the agent (static, CGO_ENABLED=0, so a UML guest or a FROM scratch image
// runs it) once into a temporary directory, stores its path in *agent,
// runs the tests, removes the directory and exits with the tests' status.
func MainWithAgent(m *testing.M, agent *string) {
	if p := os.Getenv(AgentEnv); p != "" && uml.InGuest() {
		*agent = p
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "tokenbed-test-agent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*agent = filepath.Join(dir, "agent")
	cmd := exec.Command("go", "build", "-o", *agent, "tokenbed/agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "testenv: building the agent: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// RequireRoot skips t unless it runs as root and without -short. why says
// what needs root ("creates network namespaces"); the skip message says it.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("SKIP: -short (make test-unit): needs root, %s; make test runs it", why)
	}
	if os.Geteuid() != 0 {
		t.Skipf("SKIP: needs root, %s (make test runs as root)", why)
	}
}

// RequireTUN skips t unless RequireRoot passes and /dev/net/tun exists
// (the userspace netem engine's devices).
func RequireTUN(t testing.TB, why string) {
	t.Helper()
	RequireRoot(t, why)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("SKIP: no /dev/net/tun (%v): load the tun module", err)
	}
}

// RequireUML skips t under -short (guests take seconds to boot, more on a
// loaded machine), and when User Mode Linux is not usable and this is not
// root. As root it fails instead: `make deps` installs UML, so its absence
// is a broken setup, not a missing feature.
func RequireUML(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: -short (make test-unit): boots User Mode Linux guests; make test runs it")
	}
	if err := uml.Available(); err != nil {
		if os.Geteuid() == 0 {
			t.Fatalf("User Mode Linux is not usable here (run `make deps`): %v", err)
		}
		t.Skipf("SKIP: User Mode Linux is not usable and this is not root, so `make deps` cannot install it: %v", err)
	}
	// A boot shows what an installed kernel cannot do on this host. A
	// kernel that cannot run processes on this CPU is a missing feature
	// of the machine, said loudly; any other failure of the probe is a
	// broken setup.
	if err := uml.Probe(); errors.Is(err, uml.ErrHostCPU) {
		fmt.Fprintf(os.Stderr, "testenv: SKIPPING %s: User Mode Linux cannot run on this host CPU, so nothing that needs UML (kernel sch_netem on this host) is tested here: %v\n", t.Name(), err)
		t.Skipf("SKIP: User Mode Linux cannot run guest processes on this host CPU: %v", err)
	} else if err != nil {
		t.Fatalf("User Mode Linux is installed but a guest does not boot: %v", err)
	}
}

// RequireSlurm skips t unless RequireRoot passes and Slurm and munge are
// installed (slurmctld, slurmd, the client commands, munged): the tests
// that start a Slurm cluster in namespaces. `make deps` installs them, so
// on a set-up machine these tests run.
func RequireSlurm(t testing.TB, why string) {
	t.Helper()
	RequireRoot(t, why)
	for _, b := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo"} {
		if _, err := exec.LookPath(b); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: SKIPPING %s: %s not installed (scripts/install-deps.sh installs slurmctld, slurmd, slurm-client, munge)\n", t.Name(), b)
			t.Skipf("SKIP: %s not installed, %s: run scripts/install-deps.sh", b, why)
		}
	}
}
