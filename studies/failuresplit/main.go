// Command failuresplit is the study of docs/studies/endurance.md, "The
// failure split": which network failures the token passing operation detects by the
// ack timeout and which by the commit timeout (seed 002 §3.3: 37 and 23
// of 60), as a function of the outage's direction, its length, its
// position relative to the exchange, and the time scale of the run. Every
// run is a seeded simulation (harness/sim) of the endurance topology
// (experiments/endurance.yaml); the same command prints the same tables.
//
//	go run ./studies/failuresplit                # all parts, a few minutes
//	go run ./studies/failuresplit -part position # one outage placed on one pass
//	go run ./studies/failuresplit -part random   # many outages at random times, paper speed and compressed
//
// Part position runs the topology once without faults, takes passes from
// its logs, and reruns it once per pass and pattern with one outage placed
// on that pass: the simulation is deterministic, so every rerun is the
// baseline up to the outage. Part random spreads many outages of one
// pattern at seeded random times, at paper speed (time scale 1) and
// compressed as the netns backend runs the endurance experiment (1000).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/runner"
	"tokenbed/harness/sim"
	"tokenbed/internal/results"
)

// topology is experiments/endurance.yaml's, without its schedule and
// checks.
const topology = `
name: failuresplit
description: the failure split (docs/studies/endurance.md)
seed: %d
duration: %s
time_scale: %g
network_time_scale: 1
replicas: %d
defaults:
  role: randomwalk
  profile: "delay 2ms 150us distribution normal"
  agent:
    randomwalk:
      hold: 10s
      regenerate_after: 10
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
links:
  - between: [A, C]
    a_to_b: "delay 28ms 2ms distribution normal loss 0.75%%"
    b_to_a: "delay 28ms 2ms distribution normal"
  - between: [B, C]
    a_to_b: "delay 28ms 2ms distribution normal loss 0.75%%"
    b_to_a: "delay 28ms 2ms distribution normal"
`

const seed = 20090526 // experiments/endurance.yaml's

func main() {
	part := flag.String("part", "all", "position, random or all")
	passes := flag.Int("passes", 4, "part position: passes per link kind (LAN A–B, WAN to or from C)")
	outages := flag.Int("outages", 400, "part random: outages per run")
	work := flag.String("work", "", "keep every run's results under this directory (default: each run's are removed once read)")
	flag.Parse()
	if *part != "position" && *part != "random" && *part != "all" {
		fmt.Fprintf(os.Stderr, "failuresplit: -part %q: want position, random or all\n", *part)
		os.Exit(2)
	}
	s := &study{root: *work, keep: *work != ""}
	if !s.keep {
		d, err := os.MkdirTemp("", "failuresplit-")
		if err != nil {
			fail(err)
		}
		tmp, s.root = d, d
	}
	if *part == "position" || *part == "all" {
		s.position(*passes)
	}
	if *part == "random" || *part == "all" {
		s.random(*outages)
	}
	os.RemoveAll(tmp)
}

// tmp is the temporary results root, removed at the end, also on failure.
var tmp string

func fail(err error) {
	fmt.Fprintln(os.Stderr, "failuresplit:", err)
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(1)
}

type study struct {
	root string
	keep bool // keep each run's results (-work)
	n    int
}

// done removes a run's results once read, unless kept.
func (s *study) done(dir string) {
	if !s.keep {
		os.RemoveAll(dir)
	}
}

// run simulates the experiment src and returns its results directory.
func (s *study) run(src string, scale float64, replicas int) string {
	s.n++
	path := filepath.Join(s.root, fmt.Sprintf("exp%04d.yaml", s.n))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		fail(err)
	}
	e, err := experiments.Load(path)
	if err != nil {
		fail(err)
	}
	e.TimeScale, e.Replicas = scale, replicas
	b, err := backend.New(sim.Name, backend.Options{})
	if err != nil {
		fail(err)
	}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: path, ResultsRoot: s.root,
		RunID: fmt.Sprintf("tb%06x", s.n), Backend: b, Impair: runner.ImpairSim, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fail(fmt.Errorf("%s: %w", path, err))
	}
	return dir
}

func samples(dir string) *analysis.Samples {
	sm, err := analysis.ReadSamples(dir)
	if err != nil {
		fail(err)
	}
	return sm
}

// exchange is one pass as the baseline logged it: when each datagram
// first left, in paper seconds from the agents' start.
type exchange struct {
	from, to                 string
	move, ack, commit, early float64
}

// link is the pass's link kind.
func (x exchange) link() string {
	if x.from == "C" || x.to == "C" {
		return "WAN"
	}
	return "LAN"
}

// baseline runs the topology without faults and returns its passes.
func (s *study) baseline(length time.Duration) []exchange {
	dir := s.run(fmt.Sprintf(topology, seed, length, 1.0, 1), 1, 1)
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		fail(err)
	}
	type key struct {
		token   string
		session uint64
	}
	xs := map[key]*exchange{}
	var order []key
	at := func(e eventlog.Event) float64 { return float64(e.WallNS-info.AgentsStartNS) / 1e9 }
	for _, a := range []string{"A", "B", "C"} {
		evs, err := eventlog.ReadFile(filepath.Join(dir, results.LogsDir, a+".jsonl"))
		if err != nil {
			fail(err)
		}
		for _, e := range evs {
			k := key{e.Token, e.Session}
			if e.Attempt > 1 {
				continue
			}
			x := xs[k]
			if e.Kind == eventlog.MoveSent {
				if x != nil {
					continue // a second pass of the session (after a failure)
				}
				x = &exchange{from: a, to: e.Peer, move: at(e)}
				xs[k] = x
				order = append(order, k)
				continue
			}
			if x == nil {
				continue
			}
			switch e.Kind {
			case eventlog.AckSent:
				x.ack = at(e)
			case eventlog.CommitSent:
				x.commit = at(e)
			case eventlog.EarlyStopSent:
				x.early = at(e)
			}
		}
	}
	s.done(dir)
	var out []exchange
	for _, k := range order {
		if x := xs[k]; x.ack > 0 && x.commit > 0 && x.early > 0 {
			out = append(out, *x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].move < out[j].move })
	return out
}

// pattern is an outage relative to a pass from X to Y.
type pattern struct {
	name string
	link func(x exchange) string
}

var directions = []pattern{
	{"both directions", func(x exchange) string { return x.from + "-" + x.to }},
	{"sender→receiver only", func(x exchange) string { return x.from + ">" + x.to }},
	{"receiver→sender only", func(x exchange) string { return x.to + ">" + x.from }},
}

type position struct {
	name string
	at   func(x exchange) float64
}

var positions = []position{
	{"before the Move", func(x exchange) float64 { return x.move - 0.5 }},
	{"Move sent, before the Ack", func(x exchange) float64 { return (x.move + x.ack) / 2 }},
	{"Ack sent, before the Commit", func(x exchange) float64 { return (x.ack + x.commit) / 2 }},
	{"Commit sent, before the EarlyStop", func(x exchange) float64 { return (x.commit + x.early) / 2 }},
}

// tally is what one pattern's outages produced.
type tally struct {
	ack, commit int
	// masked: failures counted as ack timeouts although the receiver had
	// the Move (and acked it), logged no commit timeout and did not
	// acquire the token in that session. Before
	// agent/passing reported a wait cut short by a newer session of the
	// token (Receiver.Supersede), compressed runs masked many; now any is
	// a receiver wait lost without a report.
	masked int
	losses []string
}

func (t tally) String() string {
	s := fmt.Sprintf("%d / %d", t.ack, t.commit)
	if t.masked > 0 {
		s += fmt.Sprintf(", %d masked", t.masked)
	}
	if len(t.losses) > 0 {
		n := map[string]int{}
		for _, c := range t.losses {
			n[c]++
		}
		var cs []string
		for c, k := range n {
			cs = append(cs, fmt.Sprintf("%d %s", k, c))
		}
		sort.Strings(cs)
		s += fmt.Sprintf("; token lost: %s", strings.Join(cs, ", "))
	}
	return s
}

// add counts the failures and losses of the run in dir.
func (t *tally) add(s *study, dir string) {
	sm := samples(dir)
	for _, f := range sm.Failures {
		if f.DetectedBy == "commit_timeout" {
			t.commit++
		} else {
			t.ack++
		}
	}
	t.losses = append(t.losses, sm.Losses...)
	// Masked commit timeouts: from the logs (one replica: agents A, B, C).
	type key struct {
		token          string
		session        uint64
		sender, receiv string
	}
	moved, timedOut, acquired := map[key]bool{}, map[key]bool{}, map[key]bool{}
	var failed []key
	for _, a := range []string{"A", "B", "C"} {
		evs, err := eventlog.ReadFile(filepath.Join(dir, results.LogsDir, a+".jsonl"))
		if err != nil {
			fail(err)
		}
		for _, e := range evs {
			switch {
			case e.Kind == eventlog.MoveReceived:
				moved[key{e.Token, e.Session, e.Peer, a}] = true
			case e.Kind == eventlog.PassFailed && e.Reason == "commit_timeout":
				timedOut[key{e.Token, e.Session, e.Peer, a}] = true
			case e.Kind == eventlog.TokenAcquired && e.Session > 0:
				acquired[key{e.Token, e.Session, e.Peer, a}] = true
			case e.Kind == eventlog.PassFailed && e.Reason == "ack_timeout":
				failed = append(failed, key{e.Token, e.Session, a, e.Peer})
			}
		}
	}
	for _, k := range failed {
		// A later pass of the same session to the same receiver that got
		// through (the sender picked it again) ended the wait with the
		// token: no commit timeout to report.
		if moved[k] && !timedOut[k] && !acquired[k] {
			t.masked++
		}
	}
	s.done(dir)
}

// position places one outage on one pass per run.
func (s *study) position(perKind int) {
	base := s.baseline(900 * time.Second)
	var chosen []exchange
	count := map[string]int{}
	for _, x := range base {
		// Past the start-up, and the first Move answered (not a first
		// contact, whose Move is dropped for want of the sender's
		// certificate, 002 §3, nor a Move lost on the way).
		if x.move > 30 && x.ack-x.move < 0.2 && count[x.link()] < perKind {
			chosen = append(chosen, x)
			count[x.link()]++
		}
	}
	lengths := []time.Duration{time.Second, 2500 * time.Millisecond, 10 * time.Second}
	fmt.Printf("## Part position: one outage on one pass, paper speed (time scale 1)\n\n")
	fmt.Printf("Seed %d, the endurance topology; %d LAN passes (A–B) and %d WAN passes (to or from C) of a fault-free baseline, each rerun with one outage. ", seed, count["LAN"], count["WAN"])
	fmt.Printf("Cells: failures detected by the ack timeout / by the commit timeout, summed over the passes (one outage each).\n\n")
	fmt.Printf("| direction (relative to the pass) | outage starts | ")
	for _, l := range lengths {
		fmt.Printf("LAN, %v | WAN, %v | ", l, l)
	}
	fmt.Printf("\n|---|---|")
	for range lengths {
		fmt.Printf("---|---|")
	}
	fmt.Println()
	for _, d := range directions {
		for _, p := range positions {
			fmt.Printf("| %s | %s | ", d.name, p.name)
			for _, l := range lengths {
				byKind := map[string]*tally{"LAN": {}, "WAN": {}}
				for _, x := range chosen {
					at := p.at(x)
					src := fmt.Sprintf(topology, seed, fmt.Sprintf("%.3fs", at+l.Seconds()+30), 1.0, 1) +
						fmt.Sprintf("schedule:\n  - {action: outage, link: %q, at: %.4fs, for: %s}\n", d.link(x), at, l)
					byKind[x.link()].add(s, s.run(src, 1, 1))
				}
				fmt.Printf("%s | %s | ", byKind["LAN"], byKind["WAN"])
			}
			fmt.Println()
		}
	}
	fmt.Println()
}

// random spreads outages of one pattern at seeded random times.
func (s *study) random(n int) {
	specs := []struct{ name, links string }{
		{"A–C, both directions", `[A-C]`},
		{"A>C only", `["A>C"]`},
		{"C>A only", `["C>A"]`},
		{"the endurance mix (9 specs)", `[A-C, B-C, A-B, "A>C", "C>A", "B>C", "C>B", "A>B", "B>A"]`},
	}
	type shape struct {
		name     string
		scale    float64
		replicas int
		length   time.Duration
		// spacing: the mean paper time between outages. At paper speed
		// 250 s: a 30 s outage still meets at most a few passes. Outage
		// lengths are network time, not compressed: at 1000× a visit
		// lasts about 90 ms of wall time, so 2500 paper s put the
		// outages about 20 s of wall time apart, as endurance.yaml's
		// (30,000 paper s apart) are, and not on top of each other.
		spacing time.Duration
		// per: outages per run, a fraction of n (compressed, nearly
		// every outage fails a pass, and the run costs ten times more).
		per float64
	}
	shapes := []shape{
		{"paper speed, 2.5 s", 1, 1, 2500 * time.Millisecond, 250 * time.Second, 1},
		{"paper speed, 30 s", 1, 1, 30 * time.Second, 250 * time.Second, 1},
		{"compressed 1000×, 2.5 s", 1000, 1, 2500 * time.Millisecond, 2500 * time.Second, 0.25},
	}
	fmt.Printf("## Part random: outages at seeded random times, one pattern per run\n\n")
	fmt.Printf("Seed %d, the endurance topology; at paper speed %d outages 250 paper s apart on average, compressed %d outages 2500 paper s apart. Cells: failures tolerated, detected by the ack timeout / by the commit timeout (the share of the commit timeout); masked: counted as ack timeouts, but the receiver had the Move.\n\n", seed, n, n/4)
	fmt.Printf("| outages on | ")
	for _, sh := range shapes {
		fmt.Printf("%s | ", sh.name)
	}
	fmt.Printf("\n|---|")
	for range shapes {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, sp := range specs {
		fmt.Printf("| %s | ", sp.name)
		for _, sh := range shapes {
			k := int(float64(n) * sh.per)
			paper := time.Duration(k) * sh.spacing
			src := fmt.Sprintf(topology, seed, paper, sh.scale, sh.replicas) +
				fmt.Sprintf("schedule:\n  - {action: outage, at: 600s, until: %s, count: %d, for: %s, links: %s}\n", paper-time.Minute, k, sh.length, sp.links)
			var t tally
			t.add(s, s.run(src, sh.scale, sh.replicas))
			share := "–"
			if t.ack+t.commit > 0 {
				share = fmt.Sprintf("%.0f%%", 100*float64(t.commit)/float64(t.ack+t.commit))
			}
			fmt.Printf("%s (%s) | ", t, share)
		}
		fmt.Println()
	}
	fmt.Println()
	fmt.Println(strings.TrimSpace(`The paper: 60 failures, 37 / 23 (38% by the commit timeout).`))
}
