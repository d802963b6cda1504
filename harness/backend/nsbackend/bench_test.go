package nsbackend

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"tokenbed/harness/backend"
	"tokenbed/internal/testenv"
)

// BenchmarkSetupTeardown measures building and removing the network for
// 3 and for 100 agents (one replica), per whole topology.
func BenchmarkSetupTeardown(b *testing.B) {
	testenv.RequireRoot(b, "creates network namespaces")
	for _, n := range []int{3, 100} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			pfx := netip.MustParsePrefix("10.77.0.0/16")
			var as []backend.Agent
			for i := 0; i < n; i++ {
				name := fmt.Sprintf("a%d", i)
				as = append(as, backend.Agent{Name: name, Instance: name, Addr: backend.AgentAddr(pfx, i)})
			}
			for i := 0; b.Loop(); i++ {
				bk := New()
				spec := backend.Spec{RunID: fmt.Sprintf("tb%06x", 0xbe0000+i%0x10000), Replicas: [][]backend.Agent{as}, Prefixes: []netip.Prefix{pfx}}
				if err := bk.Setup(context.Background(), spec); err != nil {
					b.Fatal(err)
				}
				if err := bk.Teardown(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(n), "ms/agent")
		})
	}
}
