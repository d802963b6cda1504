// Package runnertest holds the checks that the tests of several backends
// run on a finished run's results directory, so that one experiment is
// judged the same way whichever backend ran it.
package runnertest

import (
	"slices"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
)

// PartitionExperiment (a format string of its time_scale) has four agents
// and one partition step that cuts A,B from C,D from 20 s to 40 s.
const PartitionExperiment = `
name: partition
seed: 5
duration: 60s
time_scale: %g
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
`

// CheckPartition reads the run in dir: the cut of A,B from C,D lasted
// cut, set and healed within slack (paper time, as the logs are).
func CheckPartition(t *testing.T, dir string, cut, slack time.Duration) {
	side := map[string]int{"A": 0, "B": 0, "C": 1, "D": 1}
	var starts, ends []string
	var cutAt, healAt int64
	for _, ev := range ReadLog(t, dir, "harness") {
		switch ev.Kind {
		case eventlog.OutageStart:
			starts = append(starts, ev.Link)
			atOnce(t, ev, &cutAt, slack)
		case eventlog.OutageEnd:
			ends = append(ends, ev.Link)
			atOnce(t, ev, &healAt, slack)
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
	if got := time.Duration(healAt - cutAt); got < cut-slack || got > cut+slack {
		t.Errorf("cut for %v, want %v (±%v)", got, cut, slack)
	}
	// Passes by the receiver's acquisition (Peer: the sender).
	var crossBefore, crossAfter, within int
	for _, n := range []string{"A", "B", "C", "D"} {
		for _, ev := range ReadLog(t, dir, n) {
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
				if ev.MonoNS <= cutAt+int64(slack) {
					continue // its Commit left before the cut
				}
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

// atOnce checks that ev is within slack of the first event of its kind,
// whose time *first holds (0 before it).
func atOnce(t *testing.T, ev eventlog.Event, first *int64, slack time.Duration) {
	t.Helper()
	if *first == 0 {
		*first = ev.MonoNS
	}
	if d := time.Duration(ev.MonoNS - *first); d > slack {
		t.Errorf("%s %s %v after the first: not at once", ev.Kind, ev.Link, d)
	}
}
