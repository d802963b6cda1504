package sim_test

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkEndurance runs the 20-day endurance experiment of 002 §3.3
// (experiments/endurance.yaml) as one continuous replica in virtual time,
// with real signatures, and reports the loop's events per second and the
// paper seconds simulated per wall second (the real backend: about 2,000,
// with 16 replicas at time scale 1000). One iteration is the whole run,
// twice: "loop" verifies every signature in the event loop (Config.Workers
// -1), "ahead" on the workers ahead of it (the default); their ratio is
// the workers' gain, measured under the same load:
//
//	go test -run - -bench Endurance -benchtime 1x ./harness/sim
func BenchmarkEndurance(b *testing.B) {
	path := filepath.Join("..", "..", "experiments", "endurance.yaml")
	for _, c := range []struct {
		name    string
		workers int
	}{{"loop", -1}, {"ahead", 0}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				start := time.Now()
				_, w := simRunWorkers(b, path, "tb5eb000", 0, c.workers)
				wall := time.Since(start)
				paper := w.Now().Sub(w.Epoch())
				st := w.Stats()
				b.ReportMetric(float64(st.Events)/wall.Seconds(), "events/s")
				b.ReportMetric(paper.Seconds()/wall.Seconds(), "paper-s/wall-s")
				b.ReportMetric(float64(st.Sent), "datagrams")
			}
		})
	}
}
