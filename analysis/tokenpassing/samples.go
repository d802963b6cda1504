package tokenpassing

import (
	"sort"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
)

// readSamples reads the samples of the run in c.Dir() (analysis.ReadSamples).
func readSamples(c *analysis.Context) (*analysis.Samples, error) {
	dir, info, topo := c.Dir(), c.Info(), c.Topology()
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
	out := &analysis.Samples{Info: info, Return: returnTimes(h, paper)}
	out.Latency = latencies(&summary{&analysis.Summary{}, &Figures{Rejections: map[string]int{}}}, h)
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
		out.Failures = append(out.Failures, analysis.FailureSample{PaperS: t.Seconds(), Link: h.logical(f.From) + ">" + h.logical(f.To), DetectedBy: f.DetectedBy})
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
