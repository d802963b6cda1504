package ftn

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
	ftnproto "tokenbed/protocols/ftn"
)

// Perf is the service's performance in one history, derived from the same
// events as the checks.
type Perf struct {
	// Pairs counts the completed acquire+release pairs: a successful
	// acquire and the same client's next release of that name, also
	// successful. Their latency is the acquire's (invocation to
	// completion) plus the release's: what the client waits, the hold
	// excluded.
	Pairs     int        `json:"pairs"`
	PairP50MS float64    `json:"acquire_release_p50_ms"`
	PairP99MS float64    `json:"acquire_release_p99_ms"`
	AcqP50MS  float64    `json:"acquire_p50_ms"`
	RelP50MS  float64    `json:"release_p50_ms"`
	Ops       int        `json:"ops_ok"` // successful operations of every kind
	WindowS   float64    `json:"window_s"`
	OpsPerS   float64    `json:"ops_per_s"`   // Ops over WindowS
	PairsPerS float64    `json:"pairs_per_s"` // Pairs over WindowS
	Clients   int        `json:"clients"`
	Failovers []Failover `json:"failovers,omitempty"`
}

// Failover is the service's recovery from a crash of the leader: from
// the crash to the first leader elected after it, and to the end of the
// survivors' query rounds that the crashed server's DOWN declaration
// starts (001 "Server crash": no reclaimed token is served before), when
// every token is served again.
type Failover struct {
	Leader     string  `json:"leader"`
	AtS        float64 `json:"at_s"`                 // the crash, seconds into the history
	ElectedS   float64 `json:"elected_s"`            // crash to the new leader; -1 none
	NewLeader  string  `json:"new_leader,omitempty"` // who
	RecoveredS float64 `json:"recovered_s"`          // crash to the last survivor's round_done; -1 none
}

// Performance derives Perf from a history (every event of every process
// and of the harness, in any order). The window of the throughput is
// from the first invocation to the last completion of a successful
// operation: a workload with faults counts its faults in it.
func Performance(evs []eventlog.Event) (Perf, error) {
	h, err := parse(evs)
	if err != nil {
		return Perf{}, err
	}
	var p Perf
	var pairs, acqs, rels []int64
	type life struct {
		client string
		life   int
	}
	held := map[life]map[string]*Op{} // ok acquires awaiting their release
	clients := map[string]bool{}
	first, last := int64(-1), int64(-1)
	for _, o := range h.ops { // in invocation order
		clients[o.Client] = true
		l := life{o.Client, o.Life}
		if held[l] == nil {
			held[l] = map[string]*Op{}
		}
		if o.Result != ftnlog.OK {
			if o.Kind == msg.Release {
				delete(held[l], o.Name)
			}
			continue
		}
		p.Ops++
		if first < 0 || o.Inv < first {
			first = o.Inv
		}
		last = max(last, o.Done)
		switch o.Kind {
		case msg.Acquire:
			held[l][o.Name] = o
			acqs = append(acqs, o.Done-o.Inv)
		case msg.Release:
			rels = append(rels, o.Done-o.Inv)
			if a := held[l][o.Name]; a != nil {
				pairs = append(pairs, a.Done-a.Inv+o.Done-o.Inv)
				delete(held[l], o.Name)
			}
		}
	}
	p.Clients = len(clients)
	p.Pairs = len(pairs)
	p.PairP50MS, p.PairP99MS = quantileMS(pairs, 0.50), quantileMS(pairs, 0.99)
	p.AcqP50MS, p.RelP50MS = quantileMS(acqs, 0.50), quantileMS(rels, 0.50)
	if last > first {
		p.WindowS = float64(last-first) / 1e9
		p.OpsPerS = float64(p.Ops) / p.WindowS
		p.PairsPerS = float64(p.Pairs) / p.WindowS
	}
	p.Failovers = failovers(evs)
	return p, nil
}

// quantileMS is the nearest-rank q-quantile of ns durations, in ms (0
// for none).
func quantileMS(ns []int64, q float64) float64 {
	if len(ns) == 0 {
		return 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return float64(s[min(max(i, 0), len(s)-1)]) / 1e6
}

// failovers finds each crash of the server leading at the time (the last
// to log ftn_leader, unless it logged ftn_step_down since).
func failovers(evs []eventlog.Event) []Failover {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b eventlog.Event) int {
		return cmp.Or(cmp.Compare(a.MonoNS, b.MonoNS), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Seq, b.Seq))
	})
	if len(evs) == 0 {
		return nil
	}
	base := evs[0].MonoNS
	var out []Failover
	leader := ""
	for i, e := range evs {
		switch e.Kind {
		case ftnproto.EventLeader:
			leader = e.Agent
		case ftnproto.EventStepDown:
			if leader == e.Agent {
				leader = ""
			}
		case eventlog.AgentCrash:
			if e.Peer == "" || e.Peer != leader {
				continue
			}
			leader = ""
			f := Failover{Leader: e.Peer, AtS: float64(e.MonoNS-base) / 1e9, ElectedS: -1, RecoveredS: -1}
			declared := int64(-1)
			rounds := map[string]int64{}
			for _, n := range evs[i+1:] {
				if n.Agent == e.Peer {
					continue // its next life
				}
				switch n.Kind {
				case ftnproto.EventLeader:
					if f.NewLeader == "" {
						f.NewLeader, f.ElectedS = n.Agent, float64(n.MonoNS-e.MonoNS)/1e9
					}
				case ftnproto.EventDeclareDown:
					if declared < 0 && f.NewLeader != "" {
						declared = n.MonoNS
					}
				case ftnproto.EventRoundDone:
					if _, seen := rounds[n.Agent]; declared >= 0 && !seen {
						rounds[n.Agent] = n.MonoNS
					}
				}
			}
			for _, t := range rounds {
				f.RecoveredS = max(f.RecoveredS, float64(t-e.MonoNS)/1e9)
			}
			out = append(out, f)
		}
	}
	return out
}

// Markdown is the performance section of an FTN run's report.
func (p Perf) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Performance\n\n")
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| acquire+release latency p50 / p99 (the client's waits, hold excluded; %d pairs) | %.2f ms / %.2f ms |\n", p.Pairs, p.PairP50MS, p.PairP99MS)
	fmt.Fprintf(&b, "| acquire p50, release p50 | %.2f ms, %.2f ms |\n", p.AcqP50MS, p.RelP50MS)
	fmt.Fprintf(&b, "| throughput (%d clients, %.1f s, faults included) | %.1f operations/s (%.1f acquire+release pairs/s) |\n", p.Clients, p.WindowS, p.OpsPerS, p.PairsPerS)
	for _, f := range p.Failovers {
		el, rec := "none", "none"
		if f.ElectedS >= 0 {
			el = fmt.Sprintf("%.2f s (%s)", f.ElectedS, f.NewLeader)
		}
		if f.RecoveredS >= 0 {
			rec = fmt.Sprintf("%.2f s", f.RecoveredS)
		}
		fmt.Fprintf(&b, "| failover after the crash of leader %s at %.1f s: new leader, query rounds done | %s, %s |\n", f.Leader, f.AtS, el, rec)
	}
	b.WriteString("\nA workload client starts an operation at its ticks, one per tick at most: a closed loop's throughput is bounded by the clients' ticks as well as by the servers. A latency is an operation's invocation to its completion, on the clients' clock.\n")
	return b.String()
}
