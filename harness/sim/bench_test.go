package sim_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkEndurance runs the 20-day endurance experiment of 002 §3.3
// (experiments/endurance.yaml) as one continuous replica in virtual time,
// with real signatures, and reports the loop's events per second and the
// paper seconds simulated per wall second (the real backend: about 2,000,
// with 16 replicas at time scale 1000). One iteration is the whole run,
// twice: "loop" verifies every signature in the event loop (Config.Workers
// -1), "ahead" on the workers beside it (the default: the loop never
// waits for a verification, agent/wire.VerifyAhead); their ratio is the
// workers' gain, measured under the same load:
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

// BenchmarkScale is the time and memory per simulated agent: N agents in one random walk (a token held 100 ms, 2 ms
// links), 60 paper seconds, set-up included. Set-up is linear in the
// directions, n(n-1); a direction's netem model is built when its first
// datagram needs it.
//
//	go test -run - -bench Scale -benchtime 1x ./harness/sim
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			path := walkExperiment(b, n, "name: scale\nseed: 3\nduration: 60s\n", "randomwalk: {hold: 100ms, regenerate_after: 10}")
			for b.Loop() {
				var before, after runtime.MemStats
				var ru0, ru1 syscall.Rusage
				runtime.GC()
				runtime.ReadMemStats(&before)
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				start := time.Now()
				_, w := simRunWorkers(b, path, "tb5ec000", 0, 0)
				wall := time.Since(start)
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				runtime.ReadMemStats(&after)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
				// CPU time as well as wall time: on a shared machine the
				// wall time is mostly other people's work.
				b.ReportMetric(wall.Seconds()*1e3/float64(n), "wall-ms/agent")
				b.ReportMetric(cpu.Seconds()*1e3/float64(n), "cpu-ms/agent")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/1e6, "alloc-MB/agent")
				b.ReportMetric(float64(after.Sys)/1e6, "sys-MB")
				b.ReportMetric(float64(w.Stats().Sent), "datagrams")
			}
		})
	}
}

// BenchmarkSetup is a simulated run's set-up at scale: N agents in one
// random walk that start warm (warm_start: every agent loads and verifies
// its N-1 peers' certificates, as the Wandering Token's simulations do),
// then one paper second of running. Set-up used to be quadratic in N:
// every agent's configuration lists every peer, written as YAML, parsed
// back, and each peer's certificate verified by each agent.
//
//	go test -run - -bench Setup -benchtime 1x -benchmem ./harness/sim
func BenchmarkSetup(b *testing.B) {
	for _, n := range []int{300, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			path := walkExperiment(b, n, "name: setup\nseed: 5\nduration: 1s\nwarm_start: true\n", "randomwalk: {hold: 100ms}")
			b.ReportAllocs()
			for b.Loop() {
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				_, w := simRunWorkers(b, path, "tb5ed000", 0, 0)
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
				b.ReportMetric(cpu.Seconds()*1e3/float64(n), "cpu-ms/agent")
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.Sys)/1e6, "sys-MB")
				b.ReportMetric(float64(w.Stats().Sent), "datagrams")
			}
		})
	}
}

// walkExperiment writes an experiment of n agents a0..a(n-1) in one
// random walk over 2 ms links, a0 generating the token: head is its
// first lines (name, seed, duration, ...), agent the agents' defaults.
func walkExperiment(b *testing.B, n int, head, agent string) string {
	var y strings.Builder
	fmt.Fprintf(&y, "%sdefaults:\n  profile: \"delay 2ms\"\n  agent:\n    %s\nagents:\n", head, agent)
	for i := range n {
		fmt.Fprintf(&y, "  - {name: a%d, generate: %v}\n", i, i == 0)
	}
	path := filepath.Join(b.TempDir(), "walk.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}
