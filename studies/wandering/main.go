// Command wandering reproduces the tables and figures of the Wandering
// Token papers (seed 003: Figs. 2–5; seed 004: Tables 1, 3, 4, 5) on the
// testbed's simulator (harness/sim): every agent is the code `agent run`
// runs (agent/node with its policy: wandering, wandering-004 or
// baseline), built from the configuration the token passing plug-in
// writes for an experiment file, with real Ed25519 signatures, on the
// netem model, in virtual time. The runner's own loop is not used: the
// losses follow the tokens (crash whoever holds one; Table 5's next loss
// once the system is stable), which a fixed schedule cannot say; the
// seams are (the experiment file, protocol.Config, protocol.Simulated,
// sim.World).
//
//	wandering [-out results/wandering] [-only REGEXP] [-skip REGEXP] [-scale 1] [-scale003 1] [-scale004 1]
//	          [-transients 100] [-j NCPU] [-wall-limit D] [-real DIR,...] [-report-only]
//
// Each scenario writes OUT/NAME/ (experiment.yaml, manifest.json with the
// seed, the injected losses and the wall time, logs/); then package
// analysis/wandering reads them all and writes OUT/report.md and
// OUT/plots/, and OUT/claims.json: each figure of the papers' text
// beside ours with its tolerance and verdict. The command exits 1 when a
// figure the docs say matches its paper leaves its tolerance (the ✗
// documented as expected are printed, with their reason, and fail
// nothing). -scale shortens every run for a quick check, -scale003 the
// 10^5 s runs of 003, -scale004 the two long runs of 004 Tables 3 and 4,
// -transients the count of 004 Table 5; the report's first table says
// what ran, at which length. -j runs that many scenarios at once
// (default: one per CPU); each stays one single-loop, seeded simulation,
// so the results do not depend on it. -wall-limit ends a scenario early
// and says so in its manifest. -real takes finished real runs (make
// wandering-real), simulates their twins (r-wandering-nN: the same
// parameters, length, loss and seed) unless OUT has them, and writes
// OUT/combined.md: paper | sim | real.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"tokenbed/analysis/wandering"
)

const k = 1000 // 10^3 s

// The 003 runs are in scenarios003.go. The 004 runs (§6, Table 2 and the
// captions): 10^6 time units, Δop 4, Δskip 1, Δmin 600 (so Δmax 1800),
// K1 1.5, K2 0.05.
const (
	// The real runs' twins: the section of experiments/wandering-real-N.yaml.
	secReal = "{op: 4s, skip: 100ms, nmax: 300}"
	sec004  = "{op: 4s, skip: 1s, min: 600s}"
	// Fig. 2's removal rule as printed (wandering004.RemovalAny).
	sec004fig2 = "{op: 4s, skip: 1s, min: 600s, removal: any}"
	base004    = "{op: 4s, rule: \"004\"}"
)

func scenarios() []Scenario {
	s := []Scenario{
		{Name: "t1-baseline-n150", Role: "baseline", Section: base004, N: 150, Span: 1000 * k * time.Second, Seed: 41},
		{Name: "t1-baseline-n300", Role: "baseline", Section: base004, N: 300, Span: 1000 * k * time.Second, Seed: 42},
		{Name: "t3-w004-n150", Role: "wandering-004", Section: sec004, N: 150, Span: 1000 * k * time.Second, Seed: 43},
		{Name: "t3-w004-n300", Role: "wandering-004", Section: sec004, N: 300, Span: 1000 * k * time.Second, Seed: 44},
		{Name: "t5-w004-n150", Role: "wandering-004", Section: sec004, N: 150, Seed: 45, Transients: 100, Settle: 10 * k * time.Second},
		{Name: "t5-w004-n300", Role: "wandering-004", Section: sec004, N: 300, Seed: 46, Transients: 100, Settle: 10 * k * time.Second},
		// Table 5 again under Fig. 2's literal removal rule (any token
		// other than lasttoken), the same seeds: the reading §5's text
		// does not give, which docs/studies/wandering.md compares.
		{Name: "t5fig2-w004-n150", Role: "wandering-004", Section: sec004fig2, N: 150, Seed: 45, Transients: 100, Settle: 10 * k * time.Second},
		{Name: "t5fig2-w004-n300", Role: "wandering-004", Section: sec004fig2, N: 300, Seed: 46, Transients: 100, Settle: 10 * k * time.Second},
	}
	s = append(s, scenarios003()...)
	// The real runs' twins (experiments/wandering-real-N.yaml, make
	// wandering-real): 003's parameters, 10^5 s, one loss at 50,000 s, the
	// same seeds, for the combined report (-real). The real holder comes
	// back 100 s after its crash, the simulated one at once.
	for _, n := range realN {
		s = append(s, Scenario{Name: realScenario(n), Role: "wandering", Section: secReal, N: n,
			Span: 100 * k * time.Second, Seed: uint64(n), LossEvery: 50 * k * time.Second})
	}
	return append(s, scenarios004()...)
}

// realN: the agents of experiments/wandering-real-N.yaml.
var realN = []int{150, 300, 360}

func realScenario(n int) string { return fmt.Sprintf("r-wandering-n%d", n) }

func main() {
	out := flag.String("out", filepath.Join("results", "wandering"), "results directory")
	only := flag.String("only", "", "run only the scenarios whose name matches this regular expression")
	scale := flag.Float64("scale", 1, "fraction of every run's length to simulate (a quick check)")
	skip := flag.String("skip", "", "do not run the scenarios whose name matches this regular expression")
	scale003 := flag.Float64("scale003", 1, "fraction of the 10^5 s of 003's runs (Figs. 2-5) to simulate")
	scale004 := flag.Float64("scale004", 1, "fraction of the 10^6 time units of 004 Tables 3 and 4 to simulate (Table 1, the baseline, has no passes and always runs in full)")
	realFlag := flag.String("real", "", "finished real run directories (make wandering-real), comma-separated: also simulate their twins (r-wandering-nN) and write OUT/combined.md, paper | sim | real")
	transients := flag.Int("transients", 100, "loss transients per N for 004 Table 5 (the paper: 100)")
	reportOnly := flag.Bool("report-only", false, "only analyse what OUT holds")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here")
	wallLimit := flag.Duration("wall-limit", 0, "end each scenario after this much wall time, reporting what it simulated (manifest cut_short; 0: no limit)")
	jobs := flag.Int("j", runtime.NumCPU(), "scenarios simulated at once (each is one deterministic simulation: -j changes the wall time, not a byte of the results)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wandering: -only:", err)
		os.Exit(2)
	}
	skipRe, err := regexp.Compile(*skip)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wandering: -skip:", err)
		os.Exit(2)
	}
	for _, f := range []float64{*scale, *scale003, *scale004} {
		if f <= 0 || f > 1 || *transients < 1 || *jobs < 1 {
			fmt.Fprintln(os.Stderr, "wandering: -scale, -scale003, -scale004: want (0, 1]; -transients, -j: want at least 1")
			os.Exit(2)
		}
	}
	var realDirs []string
	twins := map[string]bool{} // the real runs' twins to simulate
	for _, d := range strings.FieldsFunc(*realFlag, func(r rune) bool { return r == ',' || r == ' ' }) {
		r, err := wandering.LoadReal(d)
		if err != nil {
			fail(fmt.Errorf("-real: %w", err))
		}
		realDirs = append(realDirs, d)
		twins[realScenario(r.N)] = true
	}
	// By default every scenario but the real runs' twins; with -real
	// only the twins of the runs given; -only picks by name.
	selected := func(name string) bool {
		switch {
		case *skip != "" && skipRe.MatchString(name):
			return false
		case *only != "":
			return re.MatchString(name)
		case len(realDirs) > 0:
			// A twin already simulated (manifest.json, not cut short) is
			// not run again: -real then only writes the combined report.
			var m wandering.Manifest
			if b, err := os.ReadFile(filepath.Join(*out, name, wandering.ManifestFile)); err == nil && json.Unmarshal(b, &m) == nil && !m.CutShort && *scale == 1 {
				fmt.Printf("%s: already in %s, not run again\n", name, *out)
				return false
			}
			return twins[name]
		}
		return !strings.HasPrefix(name, "r-")
	}
	if !*reportOnly {
		var todo []Scenario
		for _, s := range scenarios() {
			if !selected(s.Name) {
				continue
			}
			s.Span = time.Duration(float64(s.Span) * *scale)
			switch {
			case strings.HasPrefix(s.Name, "t3-"):
				s.Span = time.Duration(float64(s.Span) * *scale004)
			case strings.HasPrefix(s.Name, "f2-"), strings.HasPrefix(s.Name, "f3"):
				s.Span = time.Duration(float64(s.Span) * *scale003)
			}
			if s.Transients > 0 {
				// At most 10^5 time units per transient: a system that
				// does not settle ends the run instead of spinning.
				if strings.HasPrefix(s.Name, "t5") { // Fig. 1's runs keep their one loss
					s.Transients = *transients
				}
				s.Span = time.Duration(s.Transients) * 100 * k * time.Second
			}
			s.WallLimit = *wallLimit
			todo = append(todo, s)
		}
		if err := runAll(todo, *out, *jobs); err != nil {
			fail(err)
		}
	}
	path, err := wandering.Report(*out)
	var broken004 *wandering.ClaimsError
	if err != nil && !errors.As(err, &broken004) {
		pprof.StopCPUProfile()
		fail(err)
	}
	fmt.Println("report:", path)
	// Both papers' verdicts are printed before either fails the study:
	// 003's claims (claims.json) and 004's checks (ClaimsError).
	if err := errors.Join(verdicts(*out), err); err != nil {
		fail(err)
	}
	if len(realDirs) > 0 {
		path, err := wandering.Combined(*out, realDirs)
		if err != nil {
			pprof.StopCPUProfile()
			fail(err)
		}
		fmt.Println("paper | sim | real:", path)
	}
}

// runAll simulates the scenarios, jobs at a time, the costliest first
// (so that the last to finish is a short one). Each scenario is its own
// sim.World with its own seed, directory and tracker, on one goroutine
// (its Ahead workers compute only what the loop would: harness/sim), so
// running several at once changes no byte of any run. The first error
// stops the scenarios not yet started.
func runAll(todo []Scenario, out string, jobs int) error {
	slices.SortStableFunc(todo, func(a, b Scenario) int { return cmp.Compare(b.cost(), a.cost()) })
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next := make(chan Scenario)
	for range min(jobs, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				m, err := runOne(s, out)
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("%s: %w", s.Name, err)
				}
				if err == nil {
					cut := ""
					if m.CutShort {
						cut = " (cut short by -wall-limit)"
					}
					fmt.Printf("%s: N=%d, %.0f s simulated%s, seed %d, %d losses, %d datagrams, %.1f s wall\n",
						m.Scenario, m.N, m.SpanS, cut, m.Seed, len(m.Losses), m.Datagrams, m.WallS)
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range todo {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
		next <- s
	}
	close(next)
	wg.Wait()
	return first
}

func runOne(s Scenario, out string) (*wandering.Manifest, error) {
	dir := filepath.Join(out, s.Name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	return Simulate(s, dir, func(msg string) { fmt.Fprintln(os.Stderr, msg) })
}

// cost is a rough guess of a scenario's wall time, for the order only:
// the token's passes (signed datagrams) dominate; the baseline passes
// nothing. Table 5's span is its upper bound (it ends when its transients
// have settled, about a fifth of it).
func (s Scenario) cost() float64 {
	c := s.Span.Seconds() * float64(s.N)
	if s.Transients > 0 {
		c /= 5
	}
	if s.Role == "baseline" {
		c /= 50
	}
	return c
}

// verdicts prints the report's claims that do not hold and fails when
// one of them is documented as matching its paper.
func verdicts(out string) error {
	cs, err := wandering.ReadClaims(out)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if !c.OK || !c.Matches {
			fmt.Printf("%s %s (%s): paper %s, ours %s, tolerance %s: %s\n", c.Figure, c.What, c.Run, c.Paper, c.Ours, c.Tolerance, c.Mark())
		}
	}
	if b := wandering.Broken(cs); len(b) > 0 {
		return fmt.Errorf("%d figure(s) documented as matching their paper left their tolerance (%s)", len(b), filepath.Join(out, "report.md"))
	}
	fmt.Printf("%d figures checked against the papers: every one documented as matching does\n", len(cs))
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "wandering:", err)
	os.Exit(1)
}
