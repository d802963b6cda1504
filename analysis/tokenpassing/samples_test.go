package tokenpassing

import (
	"testing"

	"tokenbed/analysis"
)

// analysis.ReadSamples reaches token passing's reader by the run's
// protocol, and its samples are the figures Analyze summarises.
func TestReadSamplesByProtocol(t *testing.T) {
	dir := copyRun(t, "clean")
	sm, err := analysis.ReadSamples(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := analyzed(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, xs := range sm.Latency {
		n += len(xs)
	}
	hits := 0
	for _, a := range s.Agents {
		hits += a.Hits
	}
	if n == 0 || n != s.Passes || sm.Acquisitions != hits {
		t.Errorf("samples: %d latencies, %d acquisitions; summary: %d passes, %d hits", n, sm.Acquisitions, s.Passes, hits)
	}
}
