package ctrbackend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
)

// readyTimes is one backend's start-to-ready measurement for n agents.
type readyTimes struct {
	setup time.Duration // Setup
	build time.Duration // of which: the image build (container backend)
	start time.Duration // first Start until every agent logged agent_started
}

// startToReady builds the network with be, starts every agent as the
// runner does (one after the other), and waits until each has logged
// agent_started; then tears down.
func startToReady(b *testing.B, be backend.Backend, runID string, names []string) readyTimes {
	b.Helper()
	ctx := context.Background()
	keyDir := credentials(b, names...)
	logDir, err := os.MkdirTemp("", "ctrbackend-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(logDir)
	spec := testSpec(runID, 1, names, keyDir, logDir)
	var cfgs []string
	for i, n := range names {
		cfgs = append(cfgs, agentConfig(b, spec, keyDir, logDir, n, i == 0))
	}
	var rt readyTimes
	t0 := time.Now()
	if err := be.Setup(ctx, spec); err != nil {
		b.Fatal(err)
	}
	defer be.Teardown(ctx)
	t1 := time.Now()
	rt.setup = t1.Sub(t0)
	if cb, ok := be.(*Backend); ok {
		rt.build = cb.Timings().ImageBuild
	}
	for i, n := range names {
		if _, err := be.Start(ctx, n, backend.Cmd{Path: agentBin, Args: []string{"run", "--config", cfgs[i]}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range names {
		if err := waitLog(filepath.Join(logDir, n+".jsonl"), `"kind":"agent_started"`, 1, 30*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	rt.start = time.Since(t1)
	if err := be.Teardown(ctx); err != nil {
		b.Fatal(err)
	}
	return rt
}

// BenchmarkStartToReady compares, per agent, the time from nothing to an
// agent that logged agent_started: the netns backend (the baseline) and
// the container backend, in the same run, for 3 agents. Metrics, per
// agent: total (Setup + Start until ready), the same without the
// container image build, and Start alone (what a restart costs); the
// ratios are container/netns.
func BenchmarkStartToReady(b *testing.B) {
	requireDocker(b)
	names := []string{"A", "B", "C"}
	n := float64(len(names))
	var ns, ct readyTimes
	i := 0
	for b.Loop() {
		r := startToReady(b, nsbackend.New(), fmt.Sprintf("tbbe%04x", i), names)
		ns.setup += r.setup
		ns.start += r.start
		r = startToReady(b, New(Options{AgentBin: agentBin}), fmt.Sprintf("tbbf%04x", i), names)
		ct.setup += r.setup
		ct.build += r.build
		ct.start += r.start
		i++
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(i) / n }
	nsTotal, ctTotal := per(ns.setup+ns.start), per(ct.setup+ct.start)
	ctNoBuild := per(ct.setup - ct.build + ct.start)
	b.ReportMetric(nsTotal, "netns-ms/agent")
	b.ReportMetric(ctTotal, "ctr-ms/agent")
	b.ReportMetric(ctTotal/nsTotal, "ratio-total")
	b.ReportMetric(ctNoBuild, "ctr-nobuild-ms/agent")
	b.ReportMetric(ctNoBuild/nsTotal, "ratio-nobuild")
	b.ReportMetric(float64(ct.build.Milliseconds())/float64(i), "build-ms")
	b.ReportMetric(per(ns.start), "netns-start-ms/agent")
	b.ReportMetric(per(ct.start), "ctr-start-ms/agent")
	b.ReportMetric(per(ct.start)/per(ns.start), "ratio-start")
}
