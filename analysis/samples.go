package analysis

import (
	"fmt"
	"sort"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/results"
)

// Samples are the raw figures behind summary.json's statistics, read from
// a results directory as Analyze reads it: for comparing two runs'
// distributions (analysis/crossval: the simulator against real
// processes). Nothing is written.
type Samples struct {
	Info results.RunInfo `json:"info"`
	// Latency is every completed pass's latency per direction ("A>B",
	// logical names: replicas pooled), in seconds, in the order of the
	// shared clock.
	Latency map[string][]float64 `json:"latency_s"`
	// Return is every return time per agent (logical name), in paper
	// seconds: the time between two successive hits of one instance.
	Return map[string][]float64 `json:"return_time_s"`
	// Acquisitions counts token_acquired events (every reason).
	Acquisitions int `json:"acquisitions"`
	// Intervals are the paper seconds between successive acquisitions
	// within one replica (any agent, any token): a visit, the hold and
	// the pass that ends it.
	Intervals []float64 `json:"intervals_s"`
	// Failures are the network failures tolerated (passes that failed at
	// the sender and kept the token), as Summary counts them.
	Failures []FailureSample `json:"failures"`
	// Losses are the causes of the token losses (Summary.Losses).
	Losses []string `json:"token_losses"`
}

// FailureSample is one tolerated network failure.
type FailureSample struct {
	PaperS     float64 `json:"paper_s"`
	Link       string  `json:"link"` // "A>C": from the sender to the receiver, logical names
	DetectedBy string  `json:"detected_by"`
}

// ReadSamples reads the samples of the run in dir.
func ReadSamples(dir string) (*Samples, error) {
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", results.RunFile, err)
	}
	var topo results.Topology
	if err := results.ReadJSON(dir, results.TopologyFile, &topo); err != nil {
		return nil, fmt.Errorf("%s: %w", results.TopologyFile, err)
	}
	h, err := readLogs(dir, topo)
	if err != nil {
		return nil, err
	}
	paper := h.paperTimes(info)
	// Only what falls inside each replica's shard of the paper timeline:
	// a real replica is stopped when the harness's clock, which reads the
	// logs as they are written, reaches the end of its shard, a few visits
	// late at high compression; the simulator stops it on time.
	shard := time.Duration(info.ShardSeconds * float64(time.Second))
	for i, t := range paper {
		if a := h.agents[h.evs[i].agent]; shard > 0 && a != nil && (t < time.Duration(a.replica)*shard || t >= time.Duration(a.replica+1)*shard) {
			delete(paper, i)
		}
	}
	out := &Samples{Info: info, Return: returnTimes(h, paper)}
	out.Latency = latencies(&Summary{Rejections: map[string]int{}}, h)
	last := map[int]time.Duration{}
	for i, e := range h.evs {
		if _, ok := paper[i]; !ok || e.kind != eventlog.TokenAcquired {
			continue
		}
		out.Acquisitions++
		rep := 0
		if a := h.agents[e.agent]; a != nil {
			rep = a.replica
		}
		if t, ok := last[rep]; ok {
			out.Intervals = append(out.Intervals, (paper[i] - t).Seconds())
		}
		last[rep] = paper[i]
	}
	for _, f := range h.failures() {
		t := h.paperAt(paper, f.Mono, f.From)
		if a := h.agents[f.From]; shard > 0 && a != nil && t >= time.Duration(a.replica+1)*shard {
			continue
		}
		out.Failures = append(out.Failures, FailureSample{PaperS: t.Seconds(), Link: h.logical(f.From) + ">" + h.logical(f.To), DetectedBy: f.DetectedBy})
	}
	cf, err := readCapture(dir, topo, h.logical)
	if err != nil {
		return nil, err
	}
	for _, l := range h.losses(h.holds(), cf) {
		out.Losses = append(out.Losses, l.Cause)
	}
	return out, nil
}

// returnTimes are the paper times between successive hits of each
// instance, pooled per logical agent, instances in name order.
func returnTimes(h *history, paper map[int]time.Duration) map[string][]float64 {
	hits := map[string][]time.Duration{}
	for i, e := range h.evs {
		if t, ok := paper[i]; ok && e.kind == eventlog.TokenAcquired {
			hits[e.agent] = append(hits[e.agent], t)
		}
	}
	insts := make([]string, 0, len(hits))
	for inst := range hits {
		insts = append(insts, inst)
	}
	sort.Strings(insts)
	rets := map[string][]float64{}
	for _, inst := range insts {
		ts, n := hits[inst], h.logical(inst)
		for i := 1; i < len(ts); i++ {
			rets[n] = append(rets[n], (ts[i] - ts[i-1]).Seconds())
		}
	}
	return rets
}
