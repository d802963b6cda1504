// Package analysis turns a run's results directory (harness/results) into
// verdicts on requirements (i)–(iv) of seed 002 §2 and a report: every
// figure is computed from the agents' event logs and cross-checked against
// the packet capture, nothing else. Analyze can run again on any results
// directory, including one whose run was killed.
//
// # summary.json
//
// A Summary (schema_version 1): the run's identity (run_id, experiment,
// seed, git_revision, kernel, backend, impairment, time scales, replicas,
// partial), a requirements object with one Requirement per check
// ("duplication", "loss", "latency", "validation": pass, value, detail,
// bundle), and the headline figures: passes, hits and return times per
// agent (paper time), latency per direction, network failures tolerated
// and how they were detected, token losses with their causes, datagrams
// lost by the network, regenerations, discards and rejections.
package analysis

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/results"
	"tokenbed/netem"
)

// SchemaVersion of summary.json.
const SchemaVersion = 1

// Requirement is one check's verdict.
type Requirement struct {
	Pass   bool   `json:"pass"`
	Value  string `json:"value"`
	Detail string `json:"detail"`
	// Bundle is the failure bundle's directory, relative to the results.
	Bundle string `json:"bundle,omitempty"`
}

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
	RescaledP99S  float64 `json:"rescaled_p99_s"`
	Paper         *experiments.LatencyCheck
}

// AgentFigures are an agent's hits and return times (paper time).
type AgentFigures struct {
	Agent  string `json:"agent"`
	Hits   int    `json:"hits"`
	Return Stats  `json:"return_time"`
}

// Summary is summary.json.
type Summary struct {
	SchemaVersion    int                    `json:"schema_version"`
	RunID            string                 `json:"run_id"`
	Experiment       string                 `json:"experiment"`
	Seed             uint64                 `json:"seed"`
	GitRevision      string                 `json:"git_revision"`
	Kernel           string                 `json:"kernel"`
	Backend          string                 `json:"backend"`
	Impairment       string                 `json:"impairment"`
	TimeScale        float64                `json:"time_scale"`
	NetworkTimeScale float64                `json:"network_time_scale"`
	Replicas         int                    `json:"replicas"`
	Status           string                 `json:"status"`
	Partial          bool                   `json:"partial"`
	PaperSeconds     float64                `json:"paper_seconds"`
	WallSeconds      float64                `json:"wall_seconds"`
	Requirements     map[string]Requirement `json:"requirements"`
	Passes           int                    `json:"passes"`
	Agents           []AgentFigures         `json:"agents"`
	Directions       []Direction            `json:"directions"`
	Failures         struct {
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
	Notes           []string       `json:"notes"`
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

// Analyze computes every check from the logs and the capture in dir and
// writes report.md, summary.json, junit.xml, plots and failure bundles.
func Analyze(dir string) (*Summary, error) {
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", results.RunFile, err)
	}
	var topo results.Topology
	if err := results.ReadJSON(dir, results.TopologyFile, &topo); err != nil {
		return nil, fmt.Errorf("%s: %w", results.TopologyFile, err)
	}
	var exp *experiments.Experiment
	if b, err := os.ReadFile(filepath.Join(dir, results.ExperimentFile)); err == nil {
		if exp, err = experiments.Parse(filepath.Join(dir, results.ExperimentFile), b); err != nil {
			return nil, err
		}
	}
	h, err := readLogs(dir, topo)
	if err != nil {
		return nil, err
	}
	cf, err := readCapture(dir, topo, h.logical)
	if err != nil {
		return nil, err
	}
	s := &Summary{SchemaVersion: SchemaVersion, RunID: info.RunID, Experiment: info.Experiment, Seed: info.Seed, GitRevision: info.GitRevision,
		Kernel: info.Kernel, Backend: info.Backend, Impairment: info.Impairment, TimeScale: info.TimeScale, NetworkTimeScale: info.NetScale,
		Replicas: info.Replicas, Status: info.Status, Partial: info.Status != "ok", Requirements: map[string]Requirement{},
		Rejections: map[string]int{}}
	if s.NetworkTimeScale == 0 {
		s.NetworkTimeScale = 1
	}
	if !info.Finished.IsZero() {
		s.WallSeconds = info.Finished.Sub(info.Started).Seconds()
	}
	s.Notes = append(s.Notes, h.parseErr...)
	if cf.truncated != "" {
		s.Notes = append(s.Notes, "capture: "+cf.truncated)
	}
	s.Notes = append(s.Notes, cf.keyErrs...)
	for _, a := range h.agents {
		if a.seqGap {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: the event log has a gap in its sequence numbers", a.instance))
		}
	}
	if s.Partial {
		s.Notes = append(s.Notes, fmt.Sprintf("the run did not finish (status %q): figures cover what was recorded", info.Status))
	}

	hs := h.holds()
	paper := h.paperTimes(info)
	b := &bundler{dir: dir, h: h, topo: topo}

	// (ii) Duplication.
	s.Duplications = duplication(hs)
	dup := Requirement{Pass: len(s.Duplications) == 0, Value: fmt.Sprintf("%d", len(s.Duplications))}
	if dup.Pass {
		dup.Detail = fmt.Sprintf("no two agents held the same token at once (%d holding intervals)", len(hs))
	} else {
		v := s.Duplications[0]
		dup.Detail = fmt.Sprintf("token %s held by %s (session %d) and %s (session %d) at once for %.3f s", v.Token, v.Agents[0], v.Sessions[0], v.Agents[1], v.Sessions[1], v.OverlapSec)
		dup.Bundle = b.bundle("duplication", v.Token, v.Sessions[1], v.FromMono, dup.Detail)
	}
	s.Requirements["duplication"] = dup

	// (i) Loss.
	losses := h.losses(hs)
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
	loss := Requirement{Pass: unexplained <= maxUnexplained, Value: fmt.Sprintf("%d", unexplained),
		Detail: fmt.Sprintf("%d token losses (%d explained by a crash of the holder, 002 §3.1); %d not, tolerated %d; %d datagrams lost by the network",
			len(losses), len(losses)-unexplained, unexplained, maxUnexplained, s.DatagramsLost)}
	if firstBad != nil {
		loss.Bundle = b.bundle("loss", firstBad.Token, firstBad.Session, firstBad.Mono, "token lost: "+firstBad.Cause+": "+firstBad.Detail)
	}
	s.Requirements["loss"] = loss

	// (iii) Latency.
	lat := map[string][]float64{}
	for _, e := range h.evs {
		switch e.kind {
		case eventlog.PassCompleted:
			lat[h.logical(e.agent)+">"+h.logical(e.peer)] = append(lat[h.logical(e.agent)+">"+h.logical(e.peer)], float64(e.latency)/1e9)
			s.Passes++
		case eventlog.TokenRegenerated:
			s.Regenerations++
		case eventlog.TokenDiscarded:
			s.Discards++
		case eventlog.DatagramRejected:
			s.Rejections[e.reason]++
		}
	}
	profiles := map[string]string{}
	for _, d := range topo.Directions {
		profiles[d.From+">"+d.To] = d.Profile
	}
	links := make([]string, 0, len(lat))
	for k := range lat {
		links = append(links, k)
	}
	sort.Strings(links)
	latReq := Requirement{Pass: true}
	var latFail []string
	var latWorst string
	for _, k := range links {
		st := stats(lat[k])
		d := Direction{Link: k, Latency: st, Profile: profiles[k], RescaledMeanS: st.Mean * s.NetworkTimeScale, RescaledP99S: st.P99 * s.NetworkTimeScale}
		if st.P50 > 0 {
			d.Dispersion = st.P99 / st.P50
		}
		if p, err := netem.Parse(profiles[k]); err == nil {
			d.OneWayS = p.Delay.Seconds()
		}
		if checks := latencyChecks(exp); checks != nil {
			for i := range checks {
				c := &checks[i]
				if c.Link != k {
					continue
				}
				d.Paper = c
				check := func(what string, got float64, want time.Duration) {
					if want <= 0 {
						return
					}
					rel := got/want.Seconds() - 1
					if math.Abs(rel) > c.Tolerance {
						latReq.Pass = false
						latFail = append(latFail, fmt.Sprintf("%s %s %.4f s vs paper %.4f s (%+.0f%%, tolerance ±%.0f%%)", k, what, got, want.Seconds(), 100*rel, 100*c.Tolerance))
						latWorst = k
					}
				}
				check("mean", d.RescaledMeanS, c.Mean)
				check("p50", d.Latency.P50*s.NetworkTimeScale, c.P50)
				check("p99", d.RescaledP99S, c.P99)
			}
		}
		s.Directions = append(s.Directions, d)
	}
	if exp != nil && len(exp.Checks.Latency) == 0 {
		latReq.Detail = "no latency figures to compare in the experiment; "
	}
	for _, c := range latencyChecks(exp) {
		if _, ok := lat[c.Link]; !ok {
			latReq.Pass = false
			latFail = append(latFail, c.Link+": no completed pass to measure")
		}
	}
	if latReq.Pass {
		latReq.Value = "within tolerance"
		latReq.Detail += "every direction's mean and p99 within the experiment's tolerance of the paper's figures"
	} else {
		latReq.Value = fmt.Sprintf("%d out of tolerance", len(latFail))
		latReq.Detail = strings.Join(latFail, "; ")
		latReq.Bundle = b.latencyBundle(latWorst, lat[latWorst])
	}
	s.Requirements["latency"] = latReq

	// (iv) Validation: every acquisition by Commit has a Commit in the
	// capture whose signature verifies against the CA.
	acqs := 0
	for _, e := range h.evs {
		if e.kind != eventlog.TokenAcquired || (e.reason != "commit" && e.reason != "late_commit") {
			continue
		}
		acqs++
		k := commitKey{e.token, e.session, e.peer, e.agent}
		if !cf.verified[k] {
			why := "no Commit in the capture"
			if cf.badSig[k] {
				why = "its Commit in the capture does not verify"
			}
			s.Unvalidated = append(s.Unvalidated, fmt.Sprintf("%s acquired %s in session %d from %s: %s", e.agent, e.token, e.session, e.peer, why))
			if len(s.Unvalidated) == 1 {
				defer func(e ev, why string) {
					r := s.Requirements["validation"]
					r.Bundle = b.bundle("validation", e.token, e.session, e.mono, s.Unvalidated[0])
					s.Requirements["validation"] = r
				}(e, why)
			}
		}
	}
	val := Requirement{Pass: len(s.Unvalidated) == 0 && cf.present, Value: fmt.Sprintf("%d of %d", acqs-len(s.Unvalidated), acqs),
		Detail: fmt.Sprintf("%d acquisitions, each matched by a Commit in the capture whose Ed25519 signature verifies against the CA certificate", acqs)}
	if !cf.present {
		val.Detail = "no capture: acquisitions cannot be validated"
	} else if !val.Pass {
		val.Detail = fmt.Sprintf("%d of %d acquisitions without a verified Commit in the capture; first: %s", len(s.Unvalidated), acqs, s.Unvalidated[0])
		if n := cf.totalDrops(); n > 0 {
			val.Detail += fmt.Sprintf("; the capture itself dropped %d packets (%s): a Commit may be missing from the capture, not from the network", n, cf.dropList())
		}
	}
	s.Requirements["validation"] = val

	// Return times and hits, in paper time.
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
	for n, af := range byName {
		af.Return = stats(rets[n])
		s.Agents = append(s.Agents, *af)
	}
	sort.Slice(s.Agents, func(i, j int) bool { return s.Agents[i].Agent < s.Agents[j].Agent })

	// Network failures tolerated, and outages.
	for _, f := range h.failures() {
		s.Failures.Tolerated++
		if f.DetectedBy == "commit_timeout" {
			s.Failures.CommitTimeout++
		} else {
			s.Failures.AckTimeout++
		}
	}
	// One outage of both directions logs two starts, for A>C and C>A, at
	// the same moment and with the same detail: count outages, not
	// directions.
	outages := map[string]bool{}
	for _, e := range h.harness {
		if e.Kind == eventlog.OutageStart {
			ends := strings.SplitN(e.Link, ">", 2)
			slices.Sort(ends)
			outages[fmt.Sprintf("%s|%s|%d", e.Detail, strings.Join(ends, "-"), e.MonoNS/1e8)] = true
		}
	}
	s.Outages = len(outages)
	s.PaperSeconds = info.PaperSeconds

	if err := writeOutputs(dir, s, exp, h, hs, paper, lat); err != nil {
		return s, err
	}
	return s, nil
}

// latencyChecks tolerates a results directory without its experiment.
func latencyChecks(e *experiments.Experiment) []experiments.LatencyCheck {
	if e == nil {
		return nil
	}
	return e.Checks.Latency
}

// Failed lists the requirements that failed.
func (s *Summary) Failed() []string {
	var f []string
	for _, k := range []string{"duplication", "loss", "latency", "validation"} {
		if r, ok := s.Requirements[k]; ok && !r.Pass {
			f = append(f, k)
		}
	}
	return f
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

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
