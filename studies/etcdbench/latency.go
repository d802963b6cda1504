package etcdbench

import (
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnlog"
)

// Sample is one hold of a workload client: the latency of its acquire
// (invocation to completion, waiting for an earlier holder included) and
// of the release that ended it.
type Sample struct {
	Client  string
	Name    string
	Acquire time.Duration
	Release time.Duration
	// InvokedNS is the acquire's invocation, CLOCK_MONOTONIC.
	InvokedNS int64
}

// Total is the acquire+release latency: the headline figure of a lock service.
func (s Sample) Total() time.Duration { return s.Acquire + s.Release }

// Samples reads one client's history (its log's events in order, the
// ftnlog schema that both systems' clients write): every acquire that
// completed ok followed by a release of the same name that completed
// ok. An acquire that failed or whose result is unknown, and a hold
// whose release did not complete ok, give no sample: they are counted
// in Counts.
func Samples(evs []eventlog.Event) ([]Sample, Counts, error) {
	var out []Sample
	var n Counts
	invoked := map[uint64]eventlog.Event{} // request → its invocation
	held := map[string]Sample{}            // name → the hold's acquire
	for _, e := range evs {
		r, ok, err := ftnlog.Parse(e)
		if err != nil {
			return nil, n, err
		}
		if !ok {
			continue
		}
		if e.Kind == ftnlog.Invoke {
			invoked[r.Req] = e
			continue
		}
		in, found := invoked[r.Req]
		if !found {
			continue
		}
		delete(invoked, r.Req)
		d := time.Duration(e.MonoNS - in.MonoNS)
		switch r.Op {
		case "acquire":
			n.Acquires++
			if r.Result != ftnlog.OK {
				n.NotOK++
				continue
			}
			held[r.Name] = Sample{Client: e.Agent, Name: r.Name, Acquire: d, InvokedNS: in.MonoNS}
		case "release":
			s, was := held[r.Name]
			delete(held, r.Name)
			if !was {
				continue
			}
			if r.Result != ftnlog.OK {
				n.NotOK++
				continue
			}
			s.Release = d
			out = append(out, s)
		}
	}
	return out, n, nil
}

// Counts are what Samples saw besides the samples.
type Counts struct {
	Acquires int // acquires completed (any result)
	NotOK    int // acquires or releases that completed fail or unknown
}

// Quantiles returns the p50 and p99 of the samples' acquire+release
// latency (nearest rank), zero with no sample.
func Quantiles(ss []Sample) (p50, p99 time.Duration) {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = float64(s.Total())
	}
	return quantile(v, 0.50), quantile(v, 0.99)
}
