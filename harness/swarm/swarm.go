// Package swarm is swarm search for bugs in the simulator (the idea is
// swarm testing and FoundationDB's simulation, the shrinking Jepsen's): many seeds of one experiment, each
// with its own random fault schedule drawn from the experiment's fault
// mix (experiments.FaultMix), each run in the simulator and judged by the
// analysis's own checkers of the protocol's invariants (token passing:
// duplication, and loss only where a crash explains it, 002 §2 (i)–(ii)
// and §3.1). A failing seed is shrunk by delta debugging over its faults
// to a minimal schedule that still fails, each candidate replayed.
//
// Each simulation is single-threaded and deterministic; the swarm runs
// one per worker. What a seed runs is a function of the experiment file
// and the seed (Draw, File): its replay is that file.
package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/runner"
)

// Invariants are the checkers (package analysis) a swarm run must pass:
// the safety properties; latency and liveness figures are the paper's to
// compare, not invariants of every fault schedule.
var Invariants = []string{"duplication", "loss"}

// Options of a swarm.
type Options struct {
	// Experiment, as loaded: its Raw bytes are what every seed varies.
	Experiment *experiments.Experiment
	// Root is where each seed's results go (ROOT/seed-S/RUNID); passing
	// seeds' results are removed, failing ones kept beside their
	// experiment file ROOT/seed-S.yaml.
	Root string
	// Workers is how many simulations run at once (default: every CPU).
	Workers int
	// Duration overrides the experiment's length (paper time).
	Duration time.Duration
	// Log receives the runner's log (default: discarded).
	Log *slog.Logger
	// Keep keeps every run's results and file, passing or not.
	Keep bool
}

// Result is one seed's run.
type Result struct {
	Seed   uint64
	Faults []Fault
	// Failed names each invariant that failed, with the checker's detail.
	Failed []string
	// File is the experiment file that ran (File); Path where it is kept
	// when the seed failed.
	File []byte
	Path string
	Dir  string // results directory, kept when the seed failed
	Wall time.Duration
	Err  error // the run or its analysis could not finish
}

// Fails reports whether an invariant failed.
func (r Result) Fails() bool { return len(r.Failed) > 0 }

// Swarm runs experiments' seeds.
type Swarm struct {
	o Options
}

// New checks o and returns a swarm.
func New(o Options) (*Swarm, error) {
	if o.Experiment == nil || o.Experiment.Swarm == nil {
		return nil, errors.New("swarm: the experiment has no swarm section (its fault mix)")
	}
	if len(o.Experiment.Raw) == 0 {
		return nil, errors.New("swarm: the experiment's file bytes (Raw) are missing")
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(o.Root, 0o755); err != nil {
		return nil, err
	}
	return &Swarm{o: o}, nil
}

// Seeds runs seeds first..first+n-1 on the workers and calls report with
// each result, in seed order, as soon as it and every earlier seed are
// done.
func (s *Swarm) Seeds(ctx context.Context, first uint64, n int, report func(Result)) {
	results := make([]chan Result, n)
	for i := range results {
		results[i] = make(chan Result, 1)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(s.o.Workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				seed := first + uint64(i)
				results[i] <- s.Run(ctx, seed, Draw(s.o.Experiment, seed), "")
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range n {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for i := range n {
		select {
		case r := <-results[i]:
			report(r)
		case <-ctx.Done():
			wg.Wait()
			return
		}
	}
	wg.Wait()
}

// Run runs seed with faults and judges it; name tells kept files apart
// ("" for the seed's own faults, "shrunk" for the shrinker's result).
func (s *Swarm) Run(ctx context.Context, seed uint64, faults []Fault, name string) Result {
	start := time.Now()
	r := Result{Seed: seed, Faults: faults}
	defer func() { r.Wall = time.Since(start) }()
	b, err := File(s.o.Experiment.Raw, seed, faults)
	if err != nil {
		r.Err = err
		return r
	}
	r.File = b
	base := fmt.Sprintf("seed-%d", seed)
	if name != "" {
		base += "-" + name
	}
	r.Path = filepath.Join(s.o.Root, base+".yaml")
	e, err := experiments.Parse(r.Path, b)
	if err != nil {
		r.Err = fmt.Errorf("the drawn schedule: %w", err)
		return r
	}
	root, err := os.MkdirTemp(s.o.Root, base+".")
	if err != nil {
		r.Err = err
		return r
	}
	dir, _, err := runner.RunSimulated(ctx, runner.Options{Experiment: e, ExperimentFile: r.Path, ResultsRoot: root,
		RunID: fmt.Sprintf("tb%06x", seed&0xffffff), Duration: s.o.Duration, Log: s.o.Log}, -1)
	r.Dir = dir
	if err == nil {
		var sum *analysis.Summary
		if sum, err = analysis.Analyze(dir); err == nil {
			for _, n := range Invariants {
				if q, ok := sum.Requirements[n]; ok && q.Verdict == analysis.VerdictFail {
					r.Failed = append(r.Failed, n+": "+q.Detail)
				}
			}
		}
	}
	r.Err = err
	if r.Fails() || r.Err != nil || s.o.Keep {
		if werr := os.WriteFile(r.Path, b, 0o644); werr != nil && r.Err == nil {
			r.Err = werr
		}
		return r
	}
	os.RemoveAll(root)
	r.Dir, r.Path = "", ""
	return r
}

// Shrink reduces a failing result's faults to a minimal set that still
// fails an invariant that failed (ddmin, Zeller and Hildebrandt 2002:
// drop chunks, then complements, halving the chunk until single faults;
// every candidate is a replay of the seed with those faults). The
// candidates of a round run on the workers; the first that fails, in
// order, wins, so the result is the same whatever the timing. It returns
// the shrunk run and how many replays it took.
func (s *Swarm) Shrink(ctx context.Context, r Result) (Result, int) {
	want := func(c Result) bool {
		for _, f := range c.Failed {
			name, _, _ := strings.Cut(f, ":")
			for _, g := range r.Failed {
				if strings.HasPrefix(g, name+":") {
					return true
				}
			}
		}
		return false
	}
	runs := 0
	best := r
	// first runs a round's candidates on the workers and keeps the first
	// that fails, in order, as the best so far.
	first := func(cands [][]Fault) int {
		out := make([]Result, len(cands))
		sem := make(chan struct{}, s.o.Workers)
		var wg sync.WaitGroup
		for i, c := range cands {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				out[i] = s.Run(ctx, r.Seed, c, fmt.Sprintf("try%d", runs+i))
			}()
		}
		wg.Wait()
		runs += len(cands)
		found := -1
		for i, c := range out {
			if found < 0 && want(c) {
				found = i
				continue
			}
			c.discard()
		}
		if found >= 0 {
			if best.Path != r.Path {
				best.discard()
			}
			best = out[found]
		}
		return found
	}
	// Does it fail without any drawn fault at all?
	if first([][]Fault{nil}) < 0 {
		ddmin(r.Faults, func(c [][]Fault) int {
			if ctx.Err() != nil {
				return -1
			}
			return first(c)
		})
	}
	return s.keep(best, r), runs
}

// ddmin reduces xs to a 1-minimal subset that still fails (Zeller and
// Hildebrandt 2002): split into n chunks, keep the first chunk that fails
// alone, else the first complement that fails, else split finer. first
// runs a round's candidates and returns the index of the first, in order,
// that fails, or -1; xs itself is known to fail.
func ddmin(xs []Fault, first func([][]Fault) int) []Fault {
	for n := 2; len(xs) >= 2; {
		chunks := split(xs, n)
		if i := first(chunks); i >= 0 {
			xs, n = chunks[i], max(n-1, 2)
			continue
		}
		if n > 2 {
			var comps [][]Fault
			for i := range chunks {
				var c []Fault
				for j, ch := range chunks {
					if j != i {
						c = append(c, ch...)
					}
				}
				comps = append(comps, c)
			}
			if i := first(comps); i >= 0 {
				xs, n = comps[i], max(n-1, 2)
				continue
			}
		}
		if n >= len(xs) {
			break
		}
		n = min(2*n, len(xs))
	}
	return xs
}

// keep names the shrunk run's files seed-S-shrunk.yaml and its results.
func (s *Swarm) keep(best, orig Result) Result {
	if best.Path == orig.Path {
		return best
	}
	p := filepath.Join(s.o.Root, fmt.Sprintf("seed-%d-shrunk.yaml", best.Seed))
	if err := os.Rename(best.Path, p); err == nil {
		best.Path = p
	}
	return best
}

// discard removes a candidate's kept files.
func (r Result) discard() {
	if r.Path != "" {
		os.Remove(r.Path)
	}
	if r.Dir != "" {
		os.RemoveAll(filepath.Dir(r.Dir))
	}
}

// split cuts xs into n chunks of nearly equal length, in order.
func split(xs []Fault, n int) [][]Fault {
	var out [][]Fault
	for i := range n {
		lo, hi := i*len(xs)/n, (i+1)*len(xs)/n
		if hi > lo {
			out = append(out, slices.Clone(xs[lo:hi]))
		}
	}
	return out
}
