package tokenpassing

import (
	"tokenbed/analysis"

	"fmt"
	"sort"
	"strings"
	"time"

	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/config"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
)

// Liveness is the circulation going on, which 002's requirements do not
// judge: checks (i)–(iv) judge what happened to the token, and all pass
// when nothing happens at all.

// livenessBounds are derived from the experiment's agent settings, the
// most lenient agent's: a visit is a hold, then a pass that may use up its
// whole Move retry budget (002 §3: (move_retries+1) × move_timeout, at
// network scale); a lost token is replaced after regenerate_after ×
// expected return, with its jitter (002 §3.2).
type livenessBounds struct {
	holdPaper  time.Duration // the hold, paper time
	holdWall   time.Duration // the hold, wall time (÷ time_scale)
	budgetWall time.Duration // (move_retries+1) × move_timeout ÷ network_time_scale
	regenWall  time.Duration // wait before a regeneration, wall; 0: regeneration off
	retries    int
	moveTO     time.Duration // paper
}

// visitWall bounds one visit in wall time; visitPaper in paper time
// (network time counts at real speed in paper time, results.PaperClock).
func (lb livenessBounds) visitWall() time.Duration  { return lb.holdWall + lb.budgetWall }
func (lb livenessBounds) visitPaper() time.Duration { return lb.holdPaper + lb.budgetWall }

// bounds resolves every agent's settings as the agent would.
func bounds(exp *experiments.Experiment) (livenessBounds, string) {
	var lb livenessBounds
	ts, nts := exp.TimeScale, exp.NetworkTimeScale
	if ts <= 0 {
		ts = 1
	}
	if nts <= 0 {
		nts = 1
	}
	for _, a := range exp.Agents {
		if a.Role != "" && a.Role != config.RoleRandomWalk {
			return lb, fmt.Sprintf("agent %s runs role %s, which has no fixed hold to derive a bound from", a.Name, a.Role)
		}
		c, err := config.Decode(a.Config)
		if err != nil {
			return lb, fmt.Sprintf("agent %s: %v", a.Name, err)
		}
		c.Name, c.Listen, c.CA, c.Credentials, c.Role = "x", "10.0.0.1:1", "x", "x", a.Role
		r, err := c.Validate()
		if err != nil {
			return lb, fmt.Sprintf("agent %s: %v", a.Name, err)
		}
		rw, ok := r.Policy.(randomwalk.Config)
		if !ok {
			return lb, fmt.Sprintf("agent %s runs role %s, which has no fixed hold to derive a bound from", a.Name, r.Role)
		}
		p := r.Passing
		lb.holdPaper = max(lb.holdPaper, rw.Hold)
		lb.moveTO = max(lb.moveTO, p.MoveTimeout)
		lb.retries = max(lb.retries, p.MoveRetries)
		budget := time.Duration(float64(time.Duration(p.MoveRetries+1)*p.MoveTimeout) / nts)
		lb.budgetWall = max(lb.budgetWall, budget)
		if rw.RegenerateAfter > 0 {
			// The agent's default expected return (agent/config), or the
			// one configured if larger.
			ret := max(rw.ExpectedReturn, time.Duration(len(exp.Agents))*(rw.Hold+2*p.MoveTimeout))
			w := time.Duration(rw.RegenerateAfter * (1 + rw.RegenerateJitter) * float64(ret) / ts)
			lb.regenWall = max(lb.regenWall, w)
		}
	}
	lb.holdWall = time.Duration(float64(lb.holdPaper) / ts)
	return lb, ""
}

type span struct{ from, to int64 } // mono ns

// excused is the total overlap of [from, to] with spans.
func excused(spans []span, from, to int64) int64 {
	// Union first: an outage of two links at once excuses its time once.
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var n, reach int64 = 0, from
	for _, s := range spans {
		a, b := max(s.from, reach), min(s.to, to)
		if b > a {
			n += b - a
			reach = b
		}
	}
	return n
}

// Phase is one stretch of a replica between schedule events.
type Phase struct {
	Replica      int     `json:"replica"`
	FromS        float64 `json:"from_s"` // seconds of run time since the replica's start
	ToS          float64 `json:"to_s"`
	Acquisitions int     `json:"acquisitions"`
	// PerPaperS is acquisitions per paper second, between the phase's
	// first and last acquisition; Judged: the phase was long enough and
	// free of faults (outages, agents down) to be held to the bound.
	PerPaperS float64 `json:"acquisitions_per_paper_s"`
	Judged    bool    `json:"judged"`
	Pass      bool    `json:"pass"`
}

// checkLiveness judges, per replica, the longest time without any
// acquisition and the throughput of each phase between schedule events.
func checkLiveness(s *summary, h *history, exp *experiments.Experiment, losses []Loss, paper map[int]time.Duration, b *bundler) analysis.Requirement {
	if exp == nil {
		return analysis.Unjudged("no experiment file in the results to derive a liveness bound from")
	}
	lb, why := bounds(exp)
	if why != "" {
		return analysis.Unjudged(why)
	}
	reps := h.timeline()
	for _, l := range losses {
		if !l.Explains {
			continue // an unexplained loss fails (i); it excuses no stall
		}
		rp := reps.get(h.replicaOf(l.Agent))
		w := rp.end // regeneration off: a lost token stays lost (002 §2 accepts it after a crash)
		if lb.regenWall > 0 {
			w = l.Mono + int64(lb.regenWall+lb.visitWall())
		}
		rp.lossWaits = append(rp.lossWaits, span{l.Mono, w})
	}

	gapBound := 2 * lb.visitWall()
	rateBound := 1 / lb.visitPaper().Seconds()
	var worstGap, worstFrom int64
	var worstAt string
	var phases []Phase
	var slow []string
	for _, r := range reps.replicas() {
		rp := reps.reps[r]
		ex := append(rp.faults(), rp.lossWaits...)
		prev := max(rp.start, creatorStart(h, rp.acqs))
		for _, t := range append(monos(h, rp.acqs), rp.end) {
			if g := t - prev - excused(ex, prev, t); g > worstGap {
				worstGap, worstFrom = g, prev
				worstAt = fmt.Sprintf("replica %d, %.3f s to %.3f s of its run", r, float64(prev-rp.start)/1e9, float64(t-rp.start)/1e9)
			}
			prev = max(prev, t)
		}
		for _, pb := range rp.phases() {
			from, to := pb.from, pb.to
			ph := Phase{Replica: r, FromS: float64(from-rp.start) / 1e9, ToS: float64(to-rp.start) / 1e9, Pass: true}
			var first, last time.Duration
			for _, j := range rp.acqs {
				if m := h.evs[j].mono; m >= from && m < to {
					if ph.Acquisitions == 0 {
						first = paper[j]
					}
					last = paper[j]
					ph.Acquisitions++
				}
			}
			if ph.Acquisitions > 1 && last > first {
				ph.PerPaperS = float64(ph.Acquisitions-1) / (last - first).Seconds()
			}
			// Ten visits' worth of fault-free time, or the phase says
			// little about throughput (the gap check still covers it).
			ph.Judged = time.Duration(to-from) >= 10*lb.visitWall() && excused(ex, from, to) == 0
			if ph.Judged && ph.PerPaperS < rateBound {
				ph.Pass = false
				slow = append(slow, fmt.Sprintf("replica %d %.1f–%.1f s: %d acquisitions, %.3g per paper s", r, ph.FromS, ph.ToS, ph.Acquisitions, ph.PerPaperS))
			}
			phases = append(phases, ph)
		}
	}
	s.Phases = phases
	s.LongestGapS = float64(worstGap) / 1e9
	how := fmt.Sprintf("bounds from the experiment: a visit is at most the hold (%v paper, %v wall at time scale %g) plus a pass that uses up its Move retries ((%d+1) × move_timeout %v, %v at network scale); "+
		"the longest time without an acquisition must stay under two visits (%.3f s of run time), not counting outages, agents down and, after a token loss by a crash, the regeneration wait (%v); "+
		"a fault-free phase of at least ten visits must reach one acquisition per visit (%.3g per paper s)",
		lb.holdPaper, lb.holdWall, exp.TimeScale, lb.retries, lb.moveTO, lb.budgetWall, gapBound.Seconds(), lb.regenWall, rateBound)
	judgedN := 0
	for _, p := range phases {
		if p.Judged {
			judgedN++
		}
	}
	if len(phases) == 0 {
		return analysis.Unjudged("no agent event in the logs")
	}
	r := analysis.VerdictOf(time.Duration(worstGap) <= gapBound && len(slow) == 0)
	r.Value = fmt.Sprintf("longest gap %.3f s", s.LongestGapS)
	r.Detail = fmt.Sprintf("longest time without an acquisition %.3f s (%s); %d phases, %d judged for throughput", s.LongestGapS, worstAt, len(phases), judgedN)
	if len(slow) > 0 {
		r.Detail += "; too slow: " + strings.Join(slow, "; ")
	}
	r.Detail += "; " + how
	if !r.Pass {
		r.Bundle = b.bundle("liveness", "", 0, worstFrom, "circulation stalled: "+r.Detail)
	}
	return r
}

func monos(h *history, idx []int) []int64 {
	out := make([]int64, len(idx))
	for i, j := range idx {
		out[i] = h.evs[j].mono
	}
	return out
}

// creatorStart is when the process that made the replica's first
// acquisition started (its last agent_started before it), or 0. The
// runner starts token creators after their peers, and on the container
// backend starting a replica's members takes seconds: the wait for the
// creator is start-up, not a stall.
func creatorStart(h *history, acqs []int) int64 {
	if len(acqs) == 0 {
		return 0
	}
	first := h.evs[acqs[0]]
	var at int64
	for _, e := range h.evs[:acqs[0]] {
		if e.agent == first.agent && e.kind == eventlog.AgentStarted {
			at = e.mono
		}
	}
	return at
}
