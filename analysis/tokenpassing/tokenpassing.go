// Package tokenpassing is token passing's analysis (seed 002), plugged
// into package analysis by protocol name from init: its history of holds
// from the agents' event logs, the capture's facts, the checkers of
// requirements (i)–(iv) of 002 §2, liveness, fairness (each member's
// share of acquisitions against a uniform random walk's, 002 §3.2) and
// agents (the processes, and their logs whole), the agents' clocks as
// far apart as the datagrams' nonces prove them, its figures in
// summary.json (Figures), its report sections (the paper's figures beside
// this run's, latency, return times, losses) and plots. Every figure is
// computed from the agents' event logs and cross-checked against the
// packet capture, nothing else. Link it in with a blank import where
// analysis.Analyze is called.
//
// # Its figures in summary.json
//
// Beside the envelope: passes, hits and return times per agent (paper
// time), latency per direction, network failures tolerated and how they
// were detected, token losses with their causes, datagrams lost by the
// network, regenerations, discards and rejections, duplications,
// unvalidated acquisitions, the longest gap and the phases, and each
// phase's acquisitions by agent against the fairness bounds.
package tokenpassing

import (
	"tokenbed/analysis"

	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// Stats summarises a sample of durations, in seconds.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_s"`
	P50  float64 `json:"p50_s"`
	P99  float64 `json:"p99_s"`
	Max  float64 `json:"max_s"`
}

func stats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)] }
	return Stats{N: len(s), Mean: sum / float64(len(s)), P50: q(0.5), P99: q(0.99), Max: s[len(s)-1]}
}

// Direction is the pass latency from one agent to another.
type Direction struct {
	Link    string `json:"link"` // "A>B"
	Latency Stats  `json:"latency"`
	// Dispersion is p99/p50 (requirement iii: small).
	Dispersion float64 `json:"dispersion"`
	Profile    string  `json:"profile"`
	// OneWay is the profile's mean delay; a pass takes two round trips,
	// four one-way delays, without loss.
	OneWayS float64 `json:"one_way_delay_s"`
	// Rescaled is Latency × network_time_scale: what the same profiles
	// give at real network scale when delays were scaled down.
	RescaledMeanS float64 `json:"rescaled_mean_s"`
	RescaledP50S  float64 `json:"rescaled_p50_s"`
	RescaledP99S  float64 `json:"rescaled_p99_s"`
	Paper         *experiments.LatencyCheck
}

// AgentFigures are an agent's hits and return times (paper time).
type AgentFigures struct {
	Agent  string `json:"agent"`
	Hits   int    `json:"hits"`
	Return Stats  `json:"return_time"`
}

// Figures are token passing's part of summary.json (analysis.Summary's
// Figures), written beside the envelope.
type Figures struct {
	Passes     int            `json:"passes"`
	Agents     []AgentFigures `json:"agents"`
	Directions []Direction    `json:"directions"`
	Failures   struct {
		Tolerated     int `json:"tolerated"`
		AckTimeout    int `json:"detected_by_ack_timeout"`
		CommitTimeout int `json:"detected_by_commit_timeout"`
	} `json:"network_failures"`
	Outages         int            `json:"outages"`
	Losses          []LossOut      `json:"token_losses"`
	FirstLossPaperS float64        `json:"first_loss_paper_s,omitempty"`
	DatagramsSent   int            `json:"datagrams_sent"`
	DatagramsLost   int            `json:"datagrams_lost_by_network"`
	LossRatio       float64        `json:"token_losses_per_datagram_lost"`
	Regenerations   int            `json:"regenerations"`
	Discards        int            `json:"sandwich_discards"`
	Rejections      map[string]int `json:"datagrams_rejected"`
	Duplications    []Violation    `json:"duplications"`
	Unvalidated     []string       `json:"unvalidated_acquisitions"`
	LongestGapS     float64        `json:"longest_time_without_acquisition_s"`
	Phases          []Phase        `json:"phases"`
	Fairness        []FairPhase    `json:"fairness_phases"`
	// Clocks are how far each agent's wall clock was measured behind
	// another's, at least, from the nonces of the datagrams it received.
	Clocks []ClockDifference `json:"clock_differences"`
}

// FiguresOf is token passing's figures of a summary (empty ones for a
// run of another protocol).
func FiguresOf(s *analysis.Summary) *Figures {
	if f, ok := s.Figures.(*Figures); ok {
		return f
	}
	return &Figures{Rejections: map[string]int{}}
}

// summary is what token passing's code reads and writes: the envelope
// (time scales, notes) and its own figures.
type summary struct {
	*analysis.Summary
	*Figures
}

// LossOut is a token loss in summary.json.
type LossOut struct {
	Token   string  `json:"token"`
	PaperS  float64 `json:"paper_s"`
	Cause   string  `json:"cause"`
	Agent   string  `json:"agent"`
	Session uint64  `json:"session"`
	Explain bool    `json:"explained_by_a_crash"`
	Detail  string  `json:"detail,omitempty"`
}

// checkDuplication is requirement (ii): no two agents hold one token at
// once. Whoever caused it (a broken agent, an insider minting a copy of
// the token: outside 002's trust model, §2) it is a duplication: nothing
// explains one away.
func checkDuplication(hs []hold, vs []Violation, b *bundler) analysis.Requirement {
	if len(hs) == 0 {
		return analysis.Unjudged("no holding intervals in the logs (no token was ever acquired)")
	}
	r := analysis.VerdictOf(len(vs) == 0)
	r.Value = fmt.Sprintf("%d", len(vs))
	if r.Pass {
		r.Detail = fmt.Sprintf("no two agents held the same token at once (%d holding intervals)", len(hs))
		return r
	}
	v := vs[0]
	r.Detail = fmt.Sprintf("%d duplications; first: token %s held by %s (session %d) and %s (session %d) at once for %.3f s", len(vs), v.Token, v.Agents[0], v.Sessions[0], v.Agents[1], v.Sessions[1], v.OverlapSec)
	r.Bundle = b.bundle("duplication", v.Token, v.Sessions[1], v.FromMono, r.Detail)
	return r
}

// checkLoss is requirement (i): every token that disappears is explained
// by a crash of its holder (or partner, 002 §3.1).
func checkLoss(s *summary, h *history, hs []hold, cf *captureFacts, exp *experiments.Experiment, paper map[int]time.Duration, b *bundler) (analysis.Requirement, []Loss) {
	losses := h.losses(hs, cf)
	maxUnexplained := 0
	if exp != nil {
		maxUnexplained = exp.Checks.MaxLosses
	}
	unexplained := 0
	var firstBad *Loss
	for i, l := range losses {
		lo := LossOut{Token: l.Token, Cause: l.Cause, Agent: l.Agent, Session: l.Session, Explain: l.Explains, Detail: l.Detail}
		lo.PaperS = h.paperAt(paper, l.Mono, l.Agent).Seconds()
		s.Losses = append(s.Losses, lo)
		// Replicas replay different shards side by side: the first loss
		// in paper time need not be the first on the wall clock.
		if i == 0 || lo.PaperS < s.FirstLossPaperS {
			s.FirstLossPaperS = lo.PaperS
		}
		if !l.Explains {
			unexplained++
			if firstBad == nil {
				firstBad = &losses[i]
			}
		}
	}
	s.DatagramsSent, s.DatagramsLost = cf.sent, cf.lostTotal()
	if s.DatagramsLost > 0 {
		s.LossRatio = float64(len(losses)) / float64(s.DatagramsLost)
	}
	if len(hs) == 0 {
		return analysis.Unjudged("no token was ever held, so none could be lost"), losses
	}
	r := analysis.VerdictOf(unexplained <= maxUnexplained)
	r.Value = fmt.Sprintf("%d", unexplained)
	lost := fmt.Sprintf("%d datagrams lost by the network", s.DatagramsLost)
	if !cf.present {
		lost = "no capture to count datagrams lost by the network"
	}
	explained := fmt.Sprintf("%d explained by a crash of the holder, 002 §3.1, or injected by lose-token", len(losses)-unexplained)
	if len(h.threeWay) > 0 {
		byCommit := 0
		for _, l := range losses {
			if l.Explains && commitLossCause(l.Cause) {
				byCommit++
			}
		}
		explained = fmt.Sprintf("%d explained by a crash of the holder, 002 §3.1, or injected by lose-token, %d by a commitment lost in 004 §4's 3-way exchange",
			len(losses)-unexplained-byCommit, byCommit)
	}
	r.Detail = fmt.Sprintf("%d tokens held; %d token losses (%s); %d not, tolerated %d; %s",
		len(tokens(hs)), len(losses), explained, unexplained, maxUnexplained, lost)
	if firstBad != nil {
		r.Detail += fmt.Sprintf("; first unexplained: %s %s: %s", firstBad.Token, firstBad.Cause, firstBad.Detail)
		r.Bundle = b.bundle("loss", firstBad.Token, firstBad.Session, firstBad.Mono, "token lost: "+firstBad.Cause+": "+firstBad.Detail)
	}
	return r, losses
}

func tokens(hs []hold) map[string]bool {
	m := map[string]bool{}
	for _, hd := range hs {
		m[hd.token] = true
	}
	return m
}

// latencies collects pass latencies per direction, and the counts of
// passes, regenerations, discards and rejections.
func latencies(s *summary, h *history) map[string][]float64 {
	lat := map[string][]float64{}
	for _, e := range h.evs {
		switch e.kind {
		case eventlog.PassCompleted:
			k := h.logical(e.agent) + ">" + h.logical(e.peer)
			lat[k] = append(lat[k], float64(e.latency)/1e9)
			s.Passes++
		case eventlog.TokenRegenerated:
			s.Regenerations++
		case eventlog.TokenDiscarded:
			s.Discards++
		case eventlog.DatagramRejected:
			s.Rejections[e.reason]++
		}
	}
	// Rejections not logged one by one (a flood) are counted in summaries.
	for reason, n := range h.suppressed {
		s.Rejections[reason] += int(n)
	}
	return lat
}

// checkLatency is requirement (iii): each figure the experiment gives
// (mean, p50, p99 of a direction) against this run's, within tolerance.
// The detail names every figure compared, and only those.
func checkLatency(s *summary, topo results.Topology, exp *experiments.Experiment, lat map[string][]float64, b *bundler) analysis.Requirement {
	profiles := map[string]string{}
	for _, d := range topo.Directions {
		profiles[d.From+">"+d.To] = d.Profile
	}
	links := make([]string, 0, len(lat))
	for k := range lat {
		links = append(links, k)
	}
	sort.Strings(links)
	var fails, checked []string
	var worst string
	for _, k := range links {
		st := stats(lat[k])
		d := Direction{Link: k, Latency: st, Profile: profiles[k], RescaledMeanS: st.Mean * s.NetworkTimeScale,
			RescaledP50S: st.P50 * s.NetworkTimeScale, RescaledP99S: st.P99 * s.NetworkTimeScale}
		if st.P50 > 0 {
			d.Dispersion = st.P99 / st.P50
		}
		if p, err := netem.Parse(profiles[k]); err == nil {
			d.OneWayS = p.Delay.Seconds()
		}
		for i, c := range latencyChecks(exp) {
			if c.Link != k {
				continue
			}
			d.Paper = &latencyChecks(exp)[i]
			for _, f := range latencyFigures(c) {
				got := d.rescaled(f.name)
				rel := got/f.want.Seconds() - 1
				line := fmt.Sprintf("%s %s %.4f s vs %.4f s (%+.0f%%, tolerance ±%.0f%%)", k, f.name, got, f.want.Seconds(), 100*rel, 100*c.Tolerance)
				checked = append(checked, line)
				if math.Abs(rel) > c.Tolerance {
					fails = append(fails, line)
					worst = k
				}
			}
		}
		s.Directions = append(s.Directions, d)
	}
	for _, c := range latencyChecks(exp) {
		if _, ok := lat[c.Link]; !ok {
			fails = append(fails, c.Link+": no completed pass to measure")
		}
	}
	if exp == nil {
		return analysis.Unjudged("no experiment file in the results, so no latency figures to compare")
	}
	if len(exp.Checks.Latency) == 0 {
		return analysis.Unjudged("no latency figures in the experiment (checks.latency) to compare with")
	}
	r := analysis.VerdictOf(len(fails) == 0)
	if r.Pass {
		r.Value = "within tolerance"
		r.Detail = "checked: " + strings.Join(checked, "; ")
		return r
	}
	r.Value = fmt.Sprintf("%d out of tolerance", len(fails))
	r.Detail = strings.Join(fails, "; ")
	if worst != "" {
		r.Bundle = b.latencyBundle(worst, lat[worst])
	}
	return r
}

// figure is one latency figure an experiment asks to compare.
type figure struct {
	name string // mean, p50, p99
	want time.Duration
}

// latencyFigures are the figures c sets (a zero one is not compared).
func latencyFigures(c experiments.LatencyCheck) []figure {
	var fs []figure
	for _, f := range []figure{{"mean", c.Mean}, {"p50", c.P50}, {"p99", c.P99}} {
		if f.want > 0 {
			fs = append(fs, f)
		}
	}
	return fs
}

// rescaled is a figure of the direction at real network scale.
func (d Direction) rescaled(name string) float64 {
	switch name {
	case "mean":
		return d.RescaledMeanS
	case "p99":
		return d.RescaledP99S
	}
	return d.RescaledP50S
}

// checkValidation is requirement (iv): every acquisition by Commit has a
// Commit in the capture whose signature verifies against the CA. Only
// acquisitions before the capture's end are judged.
func checkValidation(s *summary, h *history, cf *captureFacts, b *bundler) analysis.Requirement {
	if !cf.present {
		return analysis.Unjudged("no capture in the results: acquisitions cannot be validated")
	}
	acqs, after := 0, 0
	var first *ev
	for i, e := range h.evs {
		if e.kind != eventlog.TokenAcquired || (e.reason != "commit" && e.reason != "late_commit") {
			continue
		}
		k := commitKey{e.token, e.session, e.peer, e.agent}
		if !cf.verified[k] && cf.endWall > 0 && e.wall > cf.endWall {
			after++ // its Commit may be among the records lost with the capture
			continue
		}
		acqs++
		if !cf.verified[k] {
			why := "no Commit in the capture"
			if cf.badSig[k] {
				why = "its Commit in the capture does not verify"
			}
			s.Unvalidated = append(s.Unvalidated, fmt.Sprintf("%s acquired %s in session %d from %s: %s", e.agent, e.token, e.session, e.peer, why))
			if first == nil {
				first = &h.evs[i]
			}
		}
	}
	cut := ""
	if after > 0 {
		cut = fmt.Sprintf("; %d acquisitions after the capture ends without their Commit in it (%s, its last record: %s) not judged",
			after, time.Unix(0, cf.endWall).UTC().Format("15:04:05.000"), cf.endWhy)
	}
	if acqs == 0 {
		return analysis.Unjudged("no acquisition by Commit to validate" + cut)
	}
	r := analysis.VerdictOf(len(s.Unvalidated) == 0)
	r.Value = fmt.Sprintf("%d of %d", acqs-len(s.Unvalidated), acqs)
	r.Detail = fmt.Sprintf("%d acquisitions, each matched by a Commit in the capture whose Ed25519 signature verifies against the CA certificate%s", acqs, cut)
	if !r.Pass {
		r.Detail = fmt.Sprintf("%d of %d acquisitions without a verified Commit in the capture; first: %s%s", len(s.Unvalidated), acqs, s.Unvalidated[0], cut)
		if n := cf.totalDrops(); n > 0 {
			r.Detail += fmt.Sprintf("; the capture itself dropped %d packets (%s): a Commit may be missing from the capture, not from the network", n, cf.dropList())
		}
		r.Bundle = b.bundle("validation", first.token, first.session, first.mono, s.Unvalidated[0])
	}
	return r
}

// agentFigures are hits and return times per agent, in paper time.
func agentFigures(h *history, paper map[int]time.Duration) []AgentFigures {
	hits := map[string][]time.Duration{}
	for i, e := range h.evs {
		if e.kind == eventlog.TokenAcquired {
			hits[e.agent] = append(hits[e.agent], paper[i])
		}
	}
	byName := map[string]*AgentFigures{}
	rets := map[string][]float64{}
	for inst, ts := range hits {
		n := h.logical(inst)
		if byName[n] == nil {
			byName[n] = &AgentFigures{Agent: n}
		}
		byName[n].Hits += len(ts)
		for i := 1; i < len(ts); i++ {
			rets[n] = append(rets[n], (ts[i] - ts[i-1]).Seconds())
		}
	}
	var out []AgentFigures
	for n, af := range byName {
		af.Return = stats(rets[n])
		out = append(out, *af)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out
}

// latencyChecks tolerates a results directory without its experiment.
func latencyChecks(e *experiments.Experiment) []experiments.LatencyCheck {
	if e == nil {
		return nil
	}
	return e.Checks.Latency
}

// paperAt is the paper time of a mono instant in agent's replica: that of
// the replica's latest event at or before it with a paper time. (Other
// replicas' events of the same instant are in other shards of the paper
// timeline.)
func (h *history) paperAt(paper map[int]time.Duration, mono int64, agent string) time.Duration {
	rep := -1
	if a := h.agents[agent]; a != nil {
		rep = a.replica
	}
	i := sort.Search(len(h.evs), func(i int) bool { return h.evs[i].mono > mono })
	for j := i - 1; j >= 0; j-- {
		if p, ok := paper[j]; ok && (rep < 0 || h.agents[h.evs[j].agent].replica == rep) {
			return p
		}
	}
	return 0
}
