package ctrbackend

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/runner"
)

// passBenchExperiment is the experiment the pass benchmark runs: the
// endurance smoke run's topology, profiles and replicas (24 agents in 48
// containers, many more than a 2-core host's CPUs: the loaded case), cut to
// passBenchPaper of paper time (about 25 s of wall time per run).
const (
	passBenchExperiment = "../../../experiments/endurance-smoke.yaml"
	passBenchPaper      = 25000 * time.Second
)

// passVariant is one way of running the experiment.
type passVariant struct {
	name   string
	ctr    bool // container backend (else network namespaces)
	rtPrio int  // the agents' SCHED_FIFO priority (0: normal scheduling)
}

// loadavg is the 1-minute load average, for the record: figures from a
// loaded machine are pessimistic in their tails.
func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// runPassVariant runs the experiment once as v says and returns the
// stages of its A–B passes.
func runPassVariant(b *testing.B, e *experiments.Experiment, v passVariant, impair string) stageSummary {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var be backend.Backend
	if v.ctr {
		be = New(Options{AgentBin: agentBin, Log: log})
	}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: passBenchExperiment, ResultsRoot: b.TempDir(),
		Backend: be, Impair: impair, ImpairReason: "benchmark", AgentBin: agentBin, RTPriority: v.rtPrio, Duration: passBenchPaper, Log: log})
	if err != nil {
		b.Fatalf("%s: %v", v.name, err)
	}
	ps, err := breakdown(dir, "A>B", "B>A")
	if err != nil {
		b.Fatalf("%s: %v", v.name, err)
	}
	s := summarize(ps)
	b.Logf("%-16s load %.2f: %v", v.name, loadavg(), s)
	return s
}

// BenchmarkPassLatency measures what a pass between A and B costs on each
// path, against the network-namespace backend in the same run (the same
// machine load, one run after the other): the endurance smoke run's 24
// agents, cut to 25,000 paper seconds, once per path. Every clean pass
// (each datagram sent once) is split into send (the agent's step: check,
// sign, log, send), net (interface to interface: the profile's 4 × 2 ms
// and the engine) and wake (the receiver's wake-up and read); see
// passStages. Metrics, pooled over A>B and B>A: each path's p50 and p99
// pass latency, its ratio to the netns baseline, the per-pass overhead in
// ms, and the mean of each stage; load1 is the load average before the
// runs. Timings are figures, not assertions: a loaded machine moves the
// tails of both paths.
func BenchmarkPassLatency(b *testing.B) {
	requireDocker(b)
	e, err := experiments.Load(passBenchExperiment)
	if err != nil {
		b.Fatal(err)
	}
	impair := hostImpairment()
	variants := []passVariant{
		{name: "netns", ctr: false, rtPrio: 5}, // the baseline: harness run's default
		{name: "container", ctr: true, rtPrio: 5},
		{name: "netns-rt0", ctr: false, rtPrio: 0},
		{name: "container-rt0", ctr: true, rtPrio: 0},
	}
	sums := make([][]stageSummary, len(variants))
	b.ReportMetric(loadavg(), "load1")
	for b.Loop() {
		for i, v := range variants {
			sums[i] = append(sums[i], runPassVariant(b, e, v, impair))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	// The median over iterations of each figure.
	med := func(i int, f func(stageSummary) time.Duration) time.Duration {
		var ds []time.Duration
		for _, s := range sums[i] {
			ds = append(ds, f(s))
		}
		return quantile(ds, 0.5)
	}
	p50 := func(s stageSummary) time.Duration { return s.p50.total }
	p99 := func(s stageSummary) time.Duration { return s.p99.total }
	base50, base99 := med(0, p50), med(0, p99)
	for i, v := range variants {
		b.ReportMetric(ms(med(i, p50)), v.name+"-p50-ms")
		b.ReportMetric(ms(med(i, p99)), v.name+"-p99-ms")
		b.ReportMetric(ms(med(i, func(s stageSummary) time.Duration { return s.mean.send })), v.name+"-send-ms")
		b.ReportMetric(ms(med(i, func(s stageSummary) time.Duration { return s.mean.net })), v.name+"-net-ms")
		b.ReportMetric(ms(med(i, func(s stageSummary) time.Duration { return s.mean.wake })), v.name+"-wake-ms")
		if i == 0 {
			continue
		}
		b.ReportMetric(float64(med(i, p50))/float64(base50), v.name+"-p50-ratio")
		b.ReportMetric(float64(med(i, p99))/float64(base99), v.name+"-p99-ratio")
		b.ReportMetric(ms(med(i, p50)-base50), v.name+"-p50-over-ms")
		b.ReportMetric(ms(med(i, p99)-base99), v.name+"-p99-over-ms")
	}
}
