package resource

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"tokenbed/agent/eventlog"
	agentres "tokenbed/agent/resource"
	"tokenbed/internal/results"
)

// Tolerance is how far the two sources' shares of a concurrency level
// may differ in a run (absolute, per level). Each connection starts after
// its op_started (the TCP handshake and the client's hello: a few hundred
// µs, milliseconds when 2 CPUs carry hundreds of processes) and ends
// after its op_finished (the FIN's trip to the server's read): against an
// operation of Δop / time_scale (20 ms of wall time at Table 1's Δop and
// scale 200), a lag of up to 1 ms per end moves at most 5% of the busy
// time from one level to its neighbour.
const Tolerance = 0.05

// Replica is one replica's figures.
type Replica struct {
	Replica int
	// Ops counts the operations the agents logged, Conns the
	// connections the server logged, Matched the operations paired with
	// a connection (same client and token, in order).
	Ops, Conns, Matched int
	// From and To bound the window compared (mono ns): the first
	// operation's start to the last one's end.
	From, To int64
	// Agents and Server are the histograms of the two sources in wall
	// time, which is the agents' own (policy) time divided by the time
	// scale; Paper weights the agents' in paper time (holds stretched,
	// passes at real speed, as PaperClock).
	Agents, Server, Paper Histogram
	// Diff is the largest difference between Agents and Server, at
	// DiffLevel.
	Diff      float64
	DiffLevel int
	// ConnectLagNS and CloseLagNS are the lags of the matched
	// connections behind their operations: median and 99th percentile.
	ConnectLagNS, CloseLagNS [2]int64
}

// Run is a run's figures, per replica with a server.
type Run struct {
	Dir       string
	TimeScale float64
	Replicas  []Replica
}

// AnalyzeRun reads a run's topology, its agents' logs and its resource
// servers' logs (logs/resource-server[.rN].jsonl).
func AnalyzeRun(dir string) (*Run, error) {
	var top results.Topology
	if err := results.ReadJSON(dir, results.TopologyFile, &top); err != nil {
		return nil, err
	}
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		return nil, err
	}
	out := &Run{Dir: dir, TimeScale: info.TimeScale}
	byReplica := map[int][]results.AgentInfo{}
	for _, a := range top.Agents {
		byReplica[a.Replica] = append(byReplica[a.Replica], a)
	}
	reps := make([]int, 0, len(byReplica))
	for r := range byReplica {
		reps = append(reps, r)
	}
	slices.Sort(reps)
	for _, rep := range reps {
		srvLog := filepath.Join(dir, results.LogsDir, results.Instance(agentres.ServerName, rep)+".jsonl")
		sevs, err := eventlog.ReadFile(srvLog)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no server in this run
		}
		if err != nil {
			return nil, err
		}
		conns, err := FromServer(srvLog, sevs)
		if err != nil {
			return nil, err
		}
		var ops, holds []Interval
		for _, a := range byReplica[rep] {
			evs, err := eventlog.ReadFile(filepath.Join(dir, a.Log))
			if err != nil {
				return nil, err
			}
			ops = append(ops, FromAgent(evs)...)
			if len(evs) > 0 {
				holds = append(holds, Holds(evs, 0)...)
			}
		}
		out.Replicas = append(out.Replicas, compareReplica(rep, ops, conns, holds, info.TimeScale))
	}
	if len(out.Replicas) == 0 {
		return nil, fmt.Errorf("%s: no resource server log (logs/%s.jsonl)", dir, agentres.ServerName)
	}
	return out, nil
}

func compareReplica(rep int, ops, conns, holds []Interval, scale float64) Replica {
	r := Replica{Replica: rep, Ops: len(ops), Conns: len(conns)}
	if len(ops) == 0 {
		return r
	}
	r.From, r.To = ops[0].Start, ops[0].End
	for _, o := range ops {
		r.From, r.To = min(r.From, o.Start), max(r.To, o.End)
	}
	r.Agents = Concurrency(ops, r.From, r.To, nil, 1, Levels)
	r.Server = Concurrency(conns, r.From, r.To, nil, 1, Levels)
	r.Paper = Concurrency(ops, r.From, r.To, holds, scale, Levels)
	r.Diff, r.DiffLevel = Compare(r.Agents, r.Server)
	// Pair each operation with the connection of the same client and
	// token, in order.
	queue := map[string][]Interval{}
	for _, c := range conns {
		k := c.Client + "\x00" + c.Token
		queue[k] = append(queue[k], c)
	}
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b Interval) int { return int(a.Start - b.Start) })
	var up, down []int64
	for _, o := range sorted {
		k := o.Client + "\x00" + o.Token
		if q := queue[k]; len(q) > 0 {
			c := q[0]
			queue[k] = q[1:]
			r.Matched++
			up = append(up, c.Start-o.Start)
			if !c.Open && !o.Open {
				down = append(down, c.End-o.End)
			}
		}
	}
	r.ConnectLagNS, r.CloseLagNS = quantiles(up), quantiles(down)
	return r
}

func quantiles(v []int64) [2]int64 {
	if len(v) == 0 {
		return [2]int64{}
	}
	slices.Sort(v)
	at := func(q float64) int64 { return v[min(len(v)-1, int(math.Ceil(q*float64(len(v))))-1)] }
	return [2]int64{at(0.5), at(0.99)}
}

// String prints the run's figures.
func (r *Run) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (time scale %g)\n", r.Dir, r.TimeScale)
	for _, x := range r.Replicas {
		fmt.Fprintf(&b, "replica %d: %d operations (agents' logs), %d connections (server's log), %d matched; window %.1f s of wall time\n",
			x.Replica, x.Ops, x.Conns, x.Matched, float64(x.To-x.From)/1e9)
		fmt.Fprintf(&b, "  agents, wall (= policy) time: %v\n", x.Agents)
		fmt.Fprintf(&b, "  server, wall (= policy) time: %v\n", x.Server)
		fmt.Fprintf(&b, "  agents, paper time (PaperClock weighting): %v\n", x.Paper)
		verdict := "AGREE"
		if x.Diff > Tolerance {
			verdict = "DISAGREE"
		}
		fmt.Fprintf(&b, "  largest difference %.2f%% at level %d (tolerance %.0f%%): %s\n", 100*x.Diff, x.DiffLevel, 100*Tolerance, verdict)
		fmt.Fprintf(&b, "  server lag behind the agents: connect p50 %.3f ms p99 %.3f ms; close p50 %.3f ms p99 %.3f ms\n",
			float64(x.ConnectLagNS[0])/1e6, float64(x.ConnectLagNS[1])/1e6, float64(x.CloseLagNS[0])/1e6, float64(x.CloseLagNS[1])/1e6)
	}
	return b.String()
}
