package runner

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/backend"
	"tokenbed/harness/sim"
)

// A partition step in the simulator cuts exactly the links between its
// groups, at once, and heals them at once: the harness log has one
// outage_start and one outage_end per direction between A,B and C,D and
// none within a side, and during the cut the token passes within a side
// and never across (passes across fail and the sender keeps the token,
// 002 §3), while before and after it does cross.
func TestPartitionCutsTheLinksBetweenGroups(t *testing.T) {
	e, path := load(t, `
name: partition
seed: 5
duration: 60s
defaults:
  profile: "delay 1ms"
  agent:
    randomwalk: {hold: 200ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
  - {name: D}
schedule:
  - {action: partition, groups: [[A, B], ["*"]], at: 20s, for: 20s}
`)
	be, err := backend.New(sim.Name, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Run(t.Context(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
		Backend: be, Impair: ImpairSim, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	side := map[string]int{"A": 0, "B": 0, "C": 1, "D": 1}
	var starts, ends []string
	var cutAt, healAt int64
	for _, ev := range readLog(t, dir, "harness") {
		switch ev.Kind {
		case eventlog.OutageStart:
			starts = append(starts, ev.Link)
			if cutAt != 0 && ev.MonoNS != cutAt {
				t.Errorf("outage_start %s at %d, the first at %d: not at once", ev.Link, ev.MonoNS, cutAt)
			}
			cutAt = ev.MonoNS
		case eventlog.OutageEnd:
			ends = append(ends, ev.Link)
			if healAt != 0 && ev.MonoNS != healAt {
				t.Errorf("outage_end %s at %d, the first at %d: not at once", ev.Link, ev.MonoNS, healAt)
			}
			healAt = ev.MonoNS
		}
	}
	var want []string
	for _, a := range []string{"A", "B", "C", "D"} {
		for _, b := range []string{"A", "B", "C", "D"} {
			if side[a] != side[b] {
				want = append(want, a+">"+b)
			}
		}
	}
	slices.Sort(starts)
	slices.Sort(ends)
	if !slices.Equal(starts, want) || !slices.Equal(ends, want) {
		t.Fatalf("outage starts %v, ends %v; want %v", starts, ends, want)
	}
	if got := time.Duration(healAt - cutAt); got != 20*time.Second {
		t.Errorf("cut for %v, want 20s", got)
	}
	// Passes by the receiver's acquisition (Peer: the sender).
	var crossBefore, crossAfter, within int
	for _, n := range []string{"A", "B", "C", "D"} {
		for _, ev := range readLog(t, dir, n) {
			if ev.Kind != eventlog.TokenAcquired || ev.Reason != "commit" {
				continue
			}
			cross := side[ev.Peer] != side[n]
			switch {
			case ev.MonoNS < cutAt:
				crossBefore += b2i(cross)
			case ev.MonoNS > healAt:
				crossAfter += b2i(cross)
			case cross:
				t.Errorf("%s acquired from %s during the partition", n, ev.Peer)
			default:
				within++
			}
		}
	}
	if crossBefore == 0 || crossAfter == 0 || within == 0 {
		t.Errorf("passes across the sides before %d, after %d; within a side during the cut %d: want some of each", crossBefore, crossAfter, within)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
