package tokenpassing

import (
	"math"
	"sort"
	"strings"

	"tokenbed/agent/eventlog"
)

// rep is one replica's timeline: its span, its acquisitions and the
// schedule's events that cut it into phases (liveness, fairness).
type rep struct {
	start, end int64
	acqs       []int // indices in h.evs
	cuts       []int64
	outages    []span // links down
	downs      []span // agents down (crashed or left, until restarted or joined)
	joins      []int64
	lossWaits  []span // after a token loss by a crash: regeneration (liveness)
}

// faults are the spans of the replica's outages and agents down.
func (rp *rep) faults() []span { return append(append([]span{}, rp.outages...), rp.downs...) }

// phases are the stretches of the replica between schedule events.
func (rp *rep) phases() []span {
	cuts := []int64{rp.start, rp.end}
	for _, c := range rp.cuts {
		if c > rp.start && c < rp.end {
			cuts = append(cuts, c) // initial profiles come before the agents
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	var out []span
	for i := 1; i < len(cuts); i++ {
		if cuts[i] > cuts[i-1] {
			out = append(out, span{cuts[i-1], cuts[i]})
		}
	}
	return out
}

// timeline is every replica's, by replica number.
type timeline struct {
	reps     map[int]*rep
	finished map[int]int64
	runEnd   int64
}

func (tl *timeline) get(r int) *rep {
	if tl.reps[r] == nil {
		end := tl.runEnd
		if f, ok := tl.finished[r]; ok {
			end = f
		}
		tl.reps[r] = &rep{start: math.MaxInt64, end: end}
	}
	return tl.reps[r]
}

// replicas lists the replicas that logged an event, in order.
func (tl *timeline) replicas() []int {
	var out []int
	for r, rp := range tl.reps {
		if r >= 0 && rp.start != math.MaxInt64 {
			out = append(out, r)
		}
	}
	sort.Ints(out)
	return out
}

// replicaOf is the replica of an instance, -1 if unknown.
func (h *history) replicaOf(inst string) int {
	if a := h.agents[inst]; a != nil {
		return a.replica
	}
	return -1
}

// timeline reads the replicas' timelines from the logs and the harness's
// schedule: outages, crashes and leaves (until a restart or join), link
// profile changes and joins cut a replica into phases.
func (h *history) timeline() *timeline {
	tl := &timeline{reps: map[int]*rep{}, finished: h.replicaFinished(), runEnd: h.runEndMono()}
	for i, e := range h.evs {
		rp := tl.get(h.replicaOf(e.agent))
		rp.start = min(rp.start, e.mono)
		if e.kind == eventlog.TokenAcquired {
			rp.acqs = append(rp.acqs, i)
		}
	}
	openOut := map[string]int64{}
	downAt := map[string]int64{}
	for _, e := range h.harness {
		inst := e.Peer
		if e.Link != "" {
			inst, _, _ = strings.Cut(e.Link, ">")
		}
		r := h.replicaOf(inst)
		if r < 0 {
			continue
		}
		rp := tl.get(r)
		switch e.Kind {
		case eventlog.OutageStart:
			openOut[e.Link] = e.MonoNS
		case eventlog.OutageEnd:
			if t, ok := openOut[e.Link]; ok {
				rp.outages = append(rp.outages, span{t, e.MonoNS})
				delete(openOut, e.Link)
			}
		case eventlog.AgentCrash, eventlog.AgentLeave:
			downAt[e.Peer] = e.MonoNS
		case eventlog.AgentRestart, eventlog.AgentJoin:
			if t, ok := downAt[e.Peer]; ok {
				rp.downs = append(rp.downs, span{t, e.MonoNS})
				delete(downAt, e.Peer)
			}
			if e.Kind == eventlog.AgentJoin {
				rp.joins = append(rp.joins, e.MonoNS)
			}
		case eventlog.LinkProfile:
		default:
			continue
		}
		rp.cuts = append(rp.cuts, e.MonoNS)
	}
	for link, t := range openOut {
		inst, _, _ := strings.Cut(link, ">")
		rp := tl.get(h.replicaOf(inst))
		rp.outages = append(rp.outages, span{t, rp.end})
	}
	for inst, t := range downAt {
		rp := tl.get(h.replicaOf(inst))
		rp.downs = append(rp.downs, span{t, rp.end})
	}
	return tl
}
