package experiments

import (
	"fmt"
	"slices"
	"time"

	"tokenbed/internal/strictyaml"
)

// An agent's state as far as the schedule proves it.
type life int

const (
	notStarted life = iota // a later agent before its join
	running
	down    // crashed or left
	unknown // possibly crashed: a crash of whoever held the token
)

// checkLifecycle rejects the steps that the schedule itself proves cannot
// work: a restart of an agent that is running (it would abort the run), a
// restart of a later agent that never joined (that is a join), a second
// join, a join through a member that is down, and a restart of a target
// word (token passing's "holder") before any crash of it. Each replica
// replays its own shard of the timeline from a fresh start, so the proof
// is per shard. What the schedule cannot prove (after crash: holder, any
// agent may be down) is left to the runner, which skips an impossible
// step and logs why.
func checkLifecycle(e *Experiment, yf *strictyaml.File) {
	shard := e.Duration / time.Duration(e.Replicas)
	if shard <= 0 {
		return
	}
	state := make([]map[string]life, e.Replicas)
	wordCrashed := make([]map[string]bool, e.Replicas) // target words crashed, per replica
	for r := range state {
		state[r] = map[string]life{}
		wordCrashed[r] = map[string]bool{}
		for _, a := range e.Agents {
			if a.Later {
				state[r][a.Name] = notStarted
			} else {
				state[r][a.Name] = running
			}
		}
	}
	for _, s := range e.Schedule {
		r := min(int(s.At/shard), e.Replicas-1)
		st := state[r]
		path := fmt.Sprintf("$.schedule[%d]", s.Index)
		where := ""
		if e.Replicas > 1 {
			where = fmt.Sprintf(" in replica %d (shard %v to %v)", r, time.Duration(r)*shard, time.Duration(r+1)*shard)
		}
		switch s.Action {
		case ActCrash:
			if !slices.Contains(e.Targets, s.Agent) {
				st[s.Agent] = down
				continue
			}
			wordCrashed[r][s.Agent] = true
			for n, l := range st {
				if l == running {
					st[n] = unknown
				}
			}
		case ActLeave:
			st[s.Agent] = down
		case ActRestart:
			if slices.Contains(e.Targets, s.Agent) {
				if !wordCrashed[r][s.Agent] {
					yf.Errorf(path+".agent", "restart of %s at %v%s: no crash of %s comes before it", s.Agent, s.At, where, s.Agent)
				}
				continue
			}
			switch st[s.Agent] {
			case running:
				yf.Errorf(path+".agent", "restart of %s at %v%s: it is running then (no crash or leave of it before); restarting a running agent is impossible", s.Agent, s.At, where)
			case notStarted:
				yf.Errorf(path+".agent", "restart of %s at %v%s: it is later: true and has not joined yet; use a join step", s.Agent, s.At, where)
			}
			st[s.Agent] = running
		case ActJoin:
			switch st[s.Agent] {
			case running:
				yf.Errorf(path+".agent", "join of %s at %v%s: it has joined already and is running", s.Agent, s.At, where)
			case down, unknown:
				yf.Errorf(path+".agent", "join of %s at %v%s: it joined before; start it again with a restart step", s.Agent, s.At, where)
			}
			if l := st[s.Via]; l == notStarted || l == down {
				yf.Errorf(path+".via", "join through %s at %v%s: %s is not running then", s.Via, s.At, where, s.Via)
			}
			st[s.Agent] = running
		}
	}
}
