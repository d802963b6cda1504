package tokenpassing

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"

	"tokenbed/analysis"
	"tokenbed/experiments"
)

// Fairness: checks (i)–(iv) and liveness judge the token and the
// circulation as a whole; an agent that never gets the token passes them
// all. 002 §3.2's walk routes the token "to a peer chosen at random among
// those recorded in a local cache": with n live members each choosing
// uniformly among the others, the walk on the complete graph K_n has the
// uniform stationary distribution, so over a phase each member gets 1/n of
// the acquisitions (002 §3.3: with three agents, A's expected return time
// is three holds, 30 s, and A got 61,206 hits, a third of the run's).

// fairnessAlpha is the chance that a correct phase fails the check for
// one member: two-sided, 1e-9. A nightly campaign makes at most about
// 10^4 such comparisons (runs × replicas × phases × members), so a
// correct night fails one with a chance under 1e-5. The binomial is
// conservative for the walk: two consecutive acquisitions are never by the
// same agent, so a member's count varies less than a binomial's, by the
// factor (n−2)/n (the walk's second eigenvalue is −1/(n−1)); for n = 2 it
// does not vary at all.
const fairnessAlpha = 1e-9

// fairnessSlack widens the binomial bounds by a tenth of the expected
// share, for what the uniform walk leaves out and runs do: a pass that
// fails goes to another member (the walk avoids a lossy link), a spurious
// token walks beside the first until removed (002 §3.2). 002 §3.3's own
// run is one: A's mean return time was 29.29 s against the 30 s of three
// 10 s holds, so A got at least 34.1% of the visits, not a third; over
// about 178,000 visits that is 8 binomial standard deviations, and it is
// no starvation. A member at 90% of its share or less, over a phase long
// enough, fails; one that never gets the token fails as soon as a phase
// has enough acquisitions for the bound to exclude 0.
const fairnessSlack = 0.1

// FairPhase is one phase as the fairness check saw it: its members (the
// agents live throughout it), their acquisitions and the bounds each was
// held to; or why it was not judged.
type FairPhase struct {
	Replica      int            `json:"replica"`
	FromS        float64        `json:"from_s"` // run time since the replica's start
	ToS          float64        `json:"to_s"`
	Acquisitions int            `json:"acquisitions"`
	ByAgent      map[string]int `json:"acquisitions_by_agent"`
	// Low and High bound each member's acquisitions: Binomial(N, 1/n)'s
	// quantiles at fairnessAlpha/2 and 1 − fairnessAlpha/2, widened by
	// fairnessSlack × N/n.
	Low    int    `json:"low"`
	High   int    `json:"high"`
	Judged bool   `json:"judged"`
	Why    string `json:"not_judged_because,omitempty"`
	Pass   bool   `json:"pass"`
}

// fairBounds are the counts a member of members with n acquisitions
// among them must stay within: the binomial bounds at fairnessAlpha,
// widened by fairnessSlack of the expected share.
func fairBounds(n, members int) (lo, hi int) {
	lo, hi = binomialBounds(n, 1/float64(members), fairnessAlpha)
	slack := int(math.Ceil(fairnessSlack * float64(n) / float64(members)))
	return max(0, lo-slack), min(n, hi+slack)
}

// binomialBounds are the smallest and largest counts of Binomial(n, p)
// inside the two-sided alpha: P(X < lo) < alpha/2, P(X > hi) < alpha/2,
// and lo, hi the tightest such.
func binomialBounds(n int, p, alpha float64) (lo, hi int) {
	b := distuv.Binomial{N: float64(n), P: p}
	// CDF is monotone: the first k with CDF(k) >= alpha/2, and the first
	// with Survival(k) = P(X > k) < alpha/2.
	lo = sort.Search(n+1, func(k int) bool { return b.CDF(float64(k)) >= alpha/2 })
	hi = sort.Search(n+1, func(k int) bool { return b.Survival(float64(k)) < alpha/2 })
	return lo, hi
}

// member is an agent live throughout (part of) a phase.
type member struct {
	inst     string
	from, to int64 // its process's span
}

// lives are the agents' process spans, by replica: from agent_started to
// agent_stopping, the schedule's crash or leave that ended the process,
// or, for neither (a run that did not finish), the end of the replica.
func (h *history) lives(tl *timeline) map[int][]member {
	crashes := h.crashes()
	out := map[int][]member{}
	for _, inst := range h.instances() {
		a := h.agents[inst]
		killed := a.killedAt(crashes[inst])
		for i, pr := range a.procs {
			end := pr.last
			switch {
			case killed[i] > 0:
				end = killed[i]
			case !pr.stopped:
				end = tl.get(a.replica).end
			}
			out[a.replica] = append(out[a.replica], member{inst, pr.from, end})
		}
	}
	return out
}

// fairPhase judges one phase [from, to) of replica r: its members are the
// processes live in it, judged over the stretch all of them are up.
func (h *history) fairPhase(r int, rp *rep, ph span, lives []member) FairPhase {
	fp := FairPhase{Replica: r, FromS: float64(ph.from-rp.start) / 1e9, ToS: float64(ph.to-rp.start) / 1e9, ByAgent: map[string]int{}}
	lo, hi := ph.from, ph.to
	for _, m := range lives {
		if m.from < ph.to && m.to > ph.from {
			fp.ByAgent[m.inst] = 0
			lo, hi = max(lo, m.from), min(hi, m.to)
		}
	}
	n := len(fp.ByAgent)
	for _, j := range rp.acqs {
		e := h.evs[j]
		if _, ok := fp.ByAgent[e.agent]; ok && e.mono >= lo && e.mono < hi {
			fp.ByAgent[e.agent]++
			fp.Acquisitions++
		}
	}
	switch {
	case n < 2:
		fp.Why = fmt.Sprintf("%d member live", n)
	case hi <= lo:
		fp.Why = "its members are never all up at once"
	case excused(rp.outages, lo, hi) > 0:
		fp.Why = "an outage: the walk goes around the link"
	case excused(rp.downs, lo, hi) > 0:
		fp.Why = "an agent down"
	case slices.ContainsFunc(rp.joins, func(t int64) bool { return t <= hi }):
		// A joiner enters the others' caches by directory
		// synchronisation, pass by pass (002 §3.2): shares converge
		// only as its entry spreads.
		fp.Why = "after a join"
	}
	if fp.Why != "" {
		return fp
	}
	fp.Low, fp.High = fairBounds(fp.Acquisitions, n)
	if fp.Low == 0 {
		fp.Why = fmt.Sprintf("too short: %d acquisitions among %d members, too few for a member with none to fall outside the bound", fp.Acquisitions, n)
		return fp
	}
	fp.Judged, fp.Pass = true, true
	for _, k := range fp.ByAgent {
		if k < fp.Low || k > fp.High {
			fp.Pass = false
		}
	}
	return fp
}

// checkFairness compares, in every phase long enough and free of faults,
// each live member's acquisitions with the uniform random walk's share
// (a binomial bound at fairnessAlpha): an agent that never or hardly ever
// gets the token, or one that gets it far too often, fails, named.
func checkFairness(s *summary, h *history, exp *experiments.Experiment) analysis.Requirement {
	if exp == nil {
		return analysis.Unjudged("no experiment file in the results to know the agents' circulation policy")
	}
	if _, why := bounds(exp); why != "" {
		return analysis.Unjudged(why + "; the uniform share is the random walk's (002 §3.2)")
	}
	tl := h.timeline()
	lives := h.lives(tl)
	var bad []string
	skipped := map[string]int{}
	var firstSkip []string
	judged := 0
	for _, r := range tl.replicas() {
		rp := tl.reps[r]
		for _, ph := range rp.phases() {
			fp := h.fairPhase(r, rp, ph, lives[r])
			s.Fairness = append(s.Fairness, fp)
			if !fp.Judged {
				why, _, _ := strings.Cut(fp.Why, ":")
				skipped[why]++
				if len(firstSkip) < 3 {
					firstSkip = append(firstSkip, fmt.Sprintf("replica %d %.1f–%.1f s: %s", r, fp.FromS, fp.ToS, fp.Why))
				}
				continue
			}
			judged++
			for _, inst := range sortedKeys(fp.ByAgent) {
				if k := fp.ByAgent[inst]; k < fp.Low || k > fp.High {
					bad = append(bad, fmt.Sprintf("%s got %d of the %d acquisitions in replica %d %.1f–%.1f s, outside [%d, %d] (a uniform walk among %d members: %.1f)",
						inst, k, fp.Acquisitions, r, fp.FromS, fp.ToS, fp.Low, fp.High, len(fp.ByAgent), float64(fp.Acquisitions)/float64(len(fp.ByAgent))))
				}
			}
		}
	}
	how := fmt.Sprintf("each member's acquisitions in a phase against Binomial(N, 1/n) of a uniform random walk among its n live members (002 §3.2), two-sided at %.0e, widened by %.0f%% of the share N/n",
		fairnessAlpha, 100*fairnessSlack)
	var skips []string
	for _, why := range sortedKeys(skipped) {
		skips = append(skips, fmt.Sprintf("%d %s", skipped[why], why))
	}
	skipNote := ""
	if len(skips) > 0 {
		skipNote = fmt.Sprintf("; phases not judged: %s (first: %s)", strings.Join(skips, ", "), strings.Join(firstSkip, "; "))
	}
	if judged == 0 {
		return analysis.Unjudged(fmt.Sprintf("no phase to judge%s; %s", skipNote, how))
	}
	r := analysis.VerdictOf(len(bad) == 0)
	if r.Pass {
		r.Value = fmt.Sprintf("%d phases fair", judged)
		r.Detail = fmt.Sprintf("%d phases judged, every member within its bound%s; %s", judged, skipNote, how)
		return r
	}
	r.Value = fmt.Sprintf("%d out of bound", len(bad))
	r.Detail = fmt.Sprintf("%s; %d phases judged%s; %s", strings.Join(bad, "; "), judged, skipNote, how)
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
