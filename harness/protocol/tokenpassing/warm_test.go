package tokenpassing

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
)

// Replica 0 starts cold (its agents meet as the paper's did) unless the
// experiment asks for a warm start; then its peers' certificates are in
// its configuration like any later replica's, and its operation too.
func TestWarmStartOfReplicaZero(t *testing.T) {
	a := protocol.Process{Instance: "A", Name: "A", Addr: netip.MustParseAddrPort("10.77.0.1:7400")}
	b := protocol.Process{Instance: "B", Name: "B", Addr: netip.MustParseAddrPort("10.77.0.2:7400")}
	files := protocol.Files{CACert: "/k/ca.crt", Credentials: "/k", Log: "/r/A.jsonl",
		PeerCert: func(i string) string { return "/k/" + i + ".crt" }}
	for _, warm := range []bool{false, true} {
		out, err := Protocol{}.Config(&experiments.Experiment{TimeScale: 1, WarmStart: warm}, a, []protocol.Process{b}, files, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(out), "/k/B.crt"); got != warm {
			t.Errorf("warm_start %v: B's certificate in A's configuration: %v\n%s", warm, got, out)
		}
	}
}

// Simulated agents share their certificate verifications (ca.Verified),
// and still refuse what an agent process would refuse: a peer's
// certificate file that changed between two agents' starts to one not
// signed by the run's CA stops the second agent, as it would stop `agent
// run`; so does a certificate of another CA given to the first.
func TestSharedVerificationRefusesWhatAnAgentRefuses(t *testing.T) {
	keys, other := t.TempDir(), t.TempDir()
	for _, d := range []string{keys, other} {
		if err := ca.Init(d); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"A", "B", "C"} {
		if err := ca.Issue(keys, n); err != nil {
			t.Fatal(err)
		}
		if err := ca.Issue(other, n); err != nil {
			t.Fatal(err)
		}
	}
	ps := map[string]protocol.Process{}
	for i, n := range []string{"A", "B", "C"} {
		ps[n] = protocol.Process{Instance: n, Name: n, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 77, 0, byte(1 + i)}), 7400)}
	}
	logs := t.TempDir()
	// config writes n's configuration, its peers' certificates in dir.
	config := func(n, dir string, peers ...string) string {
		var pp []protocol.Process
		for _, p := range peers {
			pp = append(pp, ps[p])
		}
		files := protocol.Files{CACert: filepath.Join(keys, ca.CACertFile), Credentials: keys, Log: filepath.Join(logs, n+".jsonl"),
			PeerCert: func(i string) string { return filepath.Join(dir, ca.CertFile(i)) }}
		b, err := Protocol{}.Config(&experiments.Experiment{TimeScale: 1, WarmStart: true}, ps[n], pp, files, 1)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), n+".yaml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	now := time.Now()
	v := &ca.Verified{}
	start := func(cfg string) error {
		_, _, err := Protocol{}.SimProcess(cfg, protocol.Start{Verified: v}, now)
		return err
	}

	if err := start(config("A", keys, "B", "C")); err != nil {
		t.Fatalf("A, every certificate the run's: %v", err)
	}
	// B's certificate file, which A verified, now holds B's certificate
	// from another CA: C loads those bytes and refuses them.
	b, err := os.ReadFile(filepath.Join(other, ca.CertFile("B")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, ca.CertFile("B")), b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = start(config("C", keys, "A", "B"))
	if err == nil || !strings.Contains(err.Error(), "B.crt") || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("C with B's certificate replaced by another CA's: %v, want a refusal naming B.crt", err)
	}
	// Certificates of another CA for every peer, on a fresh start.
	err = start(config("B", other, "A", "C"))
	if err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("B with its peers' certificates from another CA: %v, want a refusal", err)
	}
}
