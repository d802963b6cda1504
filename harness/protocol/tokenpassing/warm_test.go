package tokenpassing

import (
	"net/netip"
	"strings"
	"testing"

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
