package etcdbench

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
	ftncheck "tokenbed/analysis/ftn"
	"tokenbed/harness/backend"
	"tokenbed/internal/stats"
)

// Completions reads one client's history (ftnlog schema) and returns the
// times (CLOCK_MONOTONIC) at which its operations completed ok, and
// those at which they completed fail or unknown, each in order.
func Completions(evs []eventlog.Event) (ok, notOK []int64, err error) {
	for _, e := range evs {
		r, is, err := ftnlog.Parse(e)
		if err != nil {
			return nil, nil, err
		}
		if !is || e.Kind != ftnlog.Complete {
			continue
		}
		if r.Result == ftnlog.OK {
			ok = append(ok, e.MonoNS)
		} else {
			notOK = append(notOK, e.MonoNS)
		}
	}
	slices.Sort(ok)
	slices.Sort(notOK)
	return ok, notOK, nil
}

// count counts the times in [from, to) over every client's.
func count(clients [][]int64, from, to int64) (n int) {
	for _, ts := range clients {
		for _, t := range ts {
			if t >= from && t < to {
				n++
			}
		}
	}
	return n
}

// Throughput is the operations completed ok in [from, to) over every
// client's completions, and their rate per second.
func Throughput(clients [][]int64, from, to int64) (n int, perS float64) {
	n = count(clients, from, to)
	if to <= from {
		return n, 0
	}
	return n, float64(n) / (float64(to-from) / 1e9)
}

// Failover is what the clients saw of a crash of the leader (the failover
// time after a leader crash), from their completions alone,
// so that both systems are measured alike. A client's interruption is
// its longest gap between two consecutive completions (ok) that reaches
// into the window W after the crash; the client is served again at the
// end of that gap. The last of those ends, counted from the crash, is
// the failover: the time until every live client completed an
// operation again after what the crash did to it. A client served at
// once after the crash and stalled later (an FTN server keeps serving
// until its lease on the leader's broadcast runs out) is counted at the
// end of the stall, not at its first completion.
type Failover struct {
	Leader  string // the server crashed
	CrashNS int64  // CLOCK_MONOTONIC
	Window  time.Duration
	Clients int // live clients: completed an operation before the crash
	Served  int // of them, completed one after the crash
	// Recovered is the failover; 0 when a live client was never served
	// again (Served < Clients).
	Recovered time.Duration
	// GapP50 and GapMax are over the clients' interruptions; BaseP50 and
	// BaseMax the same over each client's longest gap within the W
	// before the crash: the workload's own pace, the floor.
	GapP50, GapMax   time.Duration
	BaseP50, BaseMax time.Duration
	NotOK            int // operations completed fail or unknown in the window
}

// MeasureFailover measures a crash at crash from each client's ok
// completions (sorted), with window w after it and before it.
func MeasureFailover(clients [][]int64, crash int64, w time.Duration) Failover {
	f := Failover{CrashNS: crash, Window: w}
	end := crash + w.Nanoseconds()
	var gaps, base []float64
	var last int64
	for _, ts := range clients {
		i, _ := slices.BinarySearch(ts, crash) // first completion at or after the crash
		if i == 0 {
			continue // not running before the crash
		}
		f.Clients++
		if i == len(ts) {
			continue
		}
		f.Served++
		// The longest gap (ts[j-1], ts[j]) with ts[j] after the crash and
		// ts[j-1] before the window's end.
		var g, gEnd int64
		for j := i; j < len(ts) && ts[j-1] < end; j++ {
			if d := ts[j] - ts[j-1]; d > g {
				g, gEnd = d, ts[j]
			}
		}
		gaps = append(gaps, float64(g))
		last = max(last, gEnd-crash)
		// Before: gaps wholly in [crash-w, crash).
		var b int64
		for j := i - 1; j > 0 && ts[j-1] >= crash-w.Nanoseconds(); j-- {
			b = max(b, ts[j]-ts[j-1])
		}
		base = append(base, float64(b))
	}
	if f.Served == f.Clients && f.Clients > 0 {
		f.Recovered = time.Duration(last)
	}
	f.GapP50, f.GapMax = quantile(gaps, 0.5), quantile(gaps, 1)
	f.BaseP50, f.BaseMax = quantile(base, 0.5), quantile(base, 1)
	return f
}

func quantile(v []float64, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	return time.Duration(stats.Quantile(stats.Sorted(v), q))
}

// ftnLeader names the FTN server leading now, from the servers' logs as
// the FTN plug-in's observer reads them: the last to log ftn_leader that
// has not logged ftn_step_down or ftn_reinit since.
func ftnLeader(logs string, servers []member) (string, error) {
	var evs []eventlog.Event
	for _, m := range servers {
		path := filepath.Join(logs, m.inst+".jsonl")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		// The server is writing: read its complete lines only.
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		if err := eventlog.Read(bytes.NewReader(b), path, func(e eventlog.Event) error {
			evs = append(evs, e)
			return nil
		}); err != nil {
			return "", err
		}
	}
	slices.SortStableFunc(evs, func(a, b eventlog.Event) int { return cmp.Compare(a.MonoNS, b.MonoNS) })
	leader := ""
	for _, e := range evs {
		switch e.Kind {
		case "ftn_leader":
			leader = e.Agent
		case "ftn_step_down", "ftn_reinit":
			if leader == e.Agent {
				leader = ""
			}
		}
	}
	if leader == "" {
		return "", fmt.Errorf("no FTN server leads now (logs in %s)", logs)
	}
	return leader, nil
}

// ftnDefaultTick is the FTN machines' tick for which their default
// timeouts are counted (protocols/ftn.Tick).
const ftnDefaultTick = 50 * time.Millisecond

// ftnTiming is the machines' default timeouts (agent/ftn/server and
// agent/ftn/client: heartbeat 1, election 10, lease 6, server down 10,
// client down 60, retry 2 ticks; the client's heartbeat 3, retry 2,
// leader silent 6) in ticks of tick, for the same wall times as at the
// default tick: the perf experiments' settings (experiments/ftn-perf-*)
// at 5 ms.
func ftnTiming(tick time.Duration) (ftnconfig.Server, ftnconfig.Client) {
	k := int(ftnDefaultTick / tick)
	return ftnconfig.Server{HeartbeatTicks: 1 * k, ElectionTicks: 10 * k, LeaseTicks: 6 * k, ServerDownTicks: 10 * k,
			ClientDownTicks: 60 * k, RetryTicks: 2 * k},
		ftnconfig.Client{HeartbeatTicks: 3 * k, RetryTicks: 2 * k, LeaderSilentTicks: 6 * k}
}

// crashLeader finds the leader and SIGKILLs it, and logs the crash as
// the harness's runner does (logs/harness.jsonl: agent_crash, peer the
// server), so that analysis/ftn reads it.
func crashLeader(s starter, c Config, servers, clients []member, procs []backend.Process) (string, int64, error) {
	leader, err := findLeader(s, c, servers, clients)
	if err != nil {
		return "", 0, fmt.Errorf("crash: %w", err)
	}
	i := slices.IndexFunc(servers, func(m member) bool { return m.inst == leader })
	if i < 0 {
		return "", 0, fmt.Errorf("crash: leader %q is no server", leader)
	}
	at, wall := eventlog.Now()
	if err := procs[i].Signal(syscall.SIGKILL); err != nil {
		return "", 0, fmt.Errorf("crash of %s: %w", leader, err)
	}
	w, f, err := eventlog.Create(filepath.Join(s.logs, "harness.jsonl"), "harness")
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return leader, at, w.Write(eventlog.Event{Kind: eventlog.AgentCrash, Peer: leader, MonoNS: at, WallNS: wall, Detail: "SIGKILL of the leader"})
}

// findLeader names the server leading now: FTN's from the servers'
// logs, etcd's from its Status API.
func findLeader(s starter, c Config, servers, clients []member) (string, error) {
	if c.System == FTN {
		return ftnLeader(s.logs, servers)
	}
	return etcdLeader(s, c, servers, clients[0])
}

// etcdLeader asks etcd's maintenance Status API which member leads: it
// runs the leader subcommand (LeaderMain) in a client's namespace, where
// the members are reachable, and reads the name it prints.
func etcdLeader(s starter, c Config, servers []member, from member) (string, error) {
	out := "leader-query.out"
	_ = os.Remove(filepath.Join(s.logs, out))
	args := append(append([]string(nil), c.ClientCmd[1:]...), "leader", "--endpoints", etcdEndpoints(servers))
	p, err := s.start(from.inst, out, c.ClientCmd[0], args, c.ClientEnv)
	if err != nil {
		return "", err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Wait()
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second): // it gives up after 5 s itself
		_ = p.Signal(syscall.SIGKILL)
		<-done
	}
	if code, _, _ := p.Wait(); code != 0 {
		b, _ := os.ReadFile(filepath.Join(s.logs, out))
		return "", fmt.Errorf("etcd leader query: exit %d: %s", code, bytes.TrimSpace(b))
	}
	b, err := os.ReadFile(filepath.Join(s.logs, out))
	if err != nil {
		return "", err
	}
	name, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "leader ")
	if !ok || name == "" {
		return "", fmt.Errorf("etcd leader query printed %q, want \"leader NAME\"", b)
	}
	return name, nil
}

// ftnElected is the time from the crash at crash to the next leader's
// election, from the servers' logs and the harness's crash event, by
// analysis/ftn.Performance; -1 when none was elected.
func ftnElected(logs string, servers []member, crash int64) (time.Duration, error) {
	var evs []eventlog.Event
	for _, n := range append(names(servers), "harness") {
		e, err := eventlog.ReadFile(filepath.Join(logs, n+".jsonl"))
		if err != nil {
			return -1, err
		}
		evs = append(evs, e...)
	}
	p, err := ftncheck.Performance(evs)
	if err != nil {
		return -1, err
	}
	for _, f := range p.Failovers {
		if f.ElectedS >= 0 {
			return time.Duration(f.ElectedS * 1e9), nil
		}
	}
	return -1, nil
}

func names(ms []member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.inst)
	}
	return out
}
