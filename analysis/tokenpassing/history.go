package tokenpassing

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/results"
)

// history is what analysis keeps of the event logs: the events that carry
// a check, compactly, every agent's in one slice sorted by mono time.
type history struct {
	evs      []ev
	agents   map[string]*agentInfo // by instance
	harness  []eventlog.Event
	endMono  int64 // the last event's mono time
	parseErr []string
	// harnessDamage is where the harness's log is damaged (nil: whole):
	// it was read up to the line before.
	harnessDamage *damage
	// suppressed counts, per reason, rejections logged only in
	// rejections_summary events (not one by one).
	suppressed map[string]uint64
	// clock is, per sender and receiver, the largest lower bound on how
	// far the receiver's wall clock was behind the sender's (clock.go).
	clock map[clockPair]clockLag
	// threeWay names the agents running 004 §4's 3-way exchange
	// (threeWayAgents): their lost commitments explain token losses.
	threeWay map[string]bool
}

// ev is one kept event.
type ev struct {
	mono, wall int64
	agent      string // instance
	kind       eventlog.Kind
	token      string
	session    uint64
	peer       string
	reason     string
	latency    int64
	nonce      uint64
	attempt    int
	detail     string
}

type agentInfo struct {
	instance, name string
	replica        int
	holdNS         int64 // nominal hold, wall ns (0: unknown)
	lastMono       int64
	stopped        bool   // logged agent_stopping
	stopReason     string // its reason
	lines          int
	lastSeq        uint64
	lifetimes      int      // processes: lines with seq 1
	headless       int      // processes whose first line is not agent_started
	started        int      // agent_started events
	seqGaps        []string // within a process lifetime: lost lines
	noLog          bool
	log            string    // its file, relative to the results
	procs          []process // its processes, in the log's order
	damage         *damage   // where its log is damaged (nil: whole)
}

// process is one process lifetime in an agent's log: from its first line
// (seq 1) to its last.
type process struct {
	from, last int64 // mono of its first and last event
	lastLine   int   // line of the log of its last event
	stopped    bool  // logged agent_stopping, the last event of a process that ends by itself
}

// damage is where a log stops being readable: a line cut short (a full
// disk, a file cut by hand: Write writes whole lines) or one that is not
// an event. The log is read up to the line before.
type damage struct {
	file      string
	line      int
	err       error
	truncated bool // cut mid-line at the end of the file
}

func (d *damage) String() string { return fmt.Sprintf("%s line %d: %v", d.file, d.line, d.err) }

// damageOf is the damage a reader's error names, or nil if err is not a
// log's damage (a missing file, an I/O error).
func damageOf(err error, file string) *damage {
	pe, ok := err.(*eventlog.ParseError)
	if !ok {
		return nil
	}
	return &damage{file: file, line: pe.Line, err: pe.Err, truncated: strings.HasPrefix(pe.Err.Error(), "truncated line")}
}

// kept says which kinds analysis needs; datagram events are kept for the
// failure bundles' timelines only when few (see readLogs).
var kept = map[eventlog.Kind]bool{
	eventlog.AgentStarted: true, eventlog.AgentStopping: true,
	eventlog.PassStarted: true, eventlog.PassSucceeded: true, eventlog.PassCompleted: true, eventlog.PassFailed: true,
	eventlog.TokenAcquired: true, eventlog.TokenReleased: true, eventlog.TokenRegenerated: true, eventlog.TokenDiscarded: true,
	eventlog.DatagramRejected: true, eventlog.CommitSent: true, eventlog.AckReceived: true,
}

// newHistory starts a history of the run's agents.
func newHistory(agents []results.AgentInfo) *history {
	h := &history{agents: map[string]*agentInfo{}, suppressed: map[string]uint64{}, clock: map[clockPair]clockLag{}}
	for _, a := range agents {
		h.agents[a.Instance] = &agentInfo{instance: a.Instance, name: a.Name, replica: a.Replica, holdNS: a.HoldNS}
	}
	return h
}

// add keeps one event of an agent's log, in the log's order.
func (h *history) add(ai *agentInfo, e eventlog.Event) {
	ai.lines++
	// seq counts from 1 per process: a restarted agent starts again at 1
	// with its agent_started, so a gap is judged within one lifetime.
	if e.Seq == 1 {
		ai.lifetimes++
		if e.Kind != eventlog.AgentStarted {
			ai.headless++
		}
	} else if e.Seq != ai.lastSeq+1 {
		ai.seqGaps = append(ai.seqGaps, fmt.Sprintf("seq %d after %d", e.Seq, ai.lastSeq))
	}
	if e.Seq == 1 || len(ai.procs) == 0 {
		ai.procs = append(ai.procs, process{from: e.MonoNS})
	}
	pr := &ai.procs[len(ai.procs)-1]
	pr.last, pr.lastLine = max(pr.last, e.MonoNS), ai.lines
	if e.Kind == eventlog.AgentStopping {
		pr.stopped = true
	}
	ai.lastSeq = e.Seq
	ai.lastMono = max(ai.lastMono, e.MonoNS)
	switch e.Kind {
	case eventlog.AgentStarted:
		ai.stopped = false
		ai.started++
	case eventlog.AgentStopping:
		ai.stopped, ai.stopReason = true, e.Reason
	case eventlog.RejectionsSummary:
		for reason, n := range e.Counts {
			h.suppressed[reason] += n
		}
	}
	if receivedKinds[e.Kind] {
		h.clockSample(ai, e)
	}
	if kept[e.Kind] {
		h.evs = append(h.evs, ev{mono: e.MonoNS, wall: e.WallNS, agent: ai.instance, kind: e.Kind, token: e.Token,
			session: e.Session, peer: e.Peer, reason: e.Reason, latency: e.LatencyNS, nonce: e.Nonce, attempt: e.Attempt, detail: e.Detail})
	}
}

// finish orders the agents' events on the shared clock once all are in.
func (h *history) finish() {
	sort.SliceStable(h.evs, func(i, j int) bool { return h.evs[i].mono < h.evs[j].mono })
	for _, e := range h.evs {
		h.endMono = max(h.endMono, e.mono)
	}
	for _, e := range h.harness {
		h.endMono = max(h.endMono, e.MonoNS)
	}
}

// readLogs reads every log of the run.
func readLogs(dir string, topo results.Topology) (*history, error) {
	h := newHistory(topo.Agents)
	// Room for the kept events at once: growing the slice by doubling
	// copied 2 of the 22 CPU s of a 20-day run's analysis. A pass logs
	// about 200 bytes a line and keeps 7 of its 13 lines; a guess too
	// small only grows as before.
	var size int64
	for _, a := range topo.Agents {
		if st, err := os.Stat(filepath.Join(dir, a.Log)); err == nil {
			size += st.Size()
		}
	}
	h.evs = make([]ev, 0, size/400)
	for _, a := range topo.Agents {
		ai := h.agents[a.Instance]
		ai.log = a.Log
		path := filepath.Join(dir, a.Log)
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			ai.noLog = true // never started (a later joiner), or lost: see checkAgents
			continue
		}
		if err != nil {
			return nil, err
		}
		err = eventlog.Read(f, path, func(e eventlog.Event) error { h.add(ai, e); return nil })
		f.Close()
		if err != nil {
			// A damaged log is read up to its last good line and judged
			// by the agents check (checkAgents); an I/O error stops
			// analysis.
			if ai.damage = damageOf(err, a.Log); ai.damage == nil {
				return nil, err
			}
			h.parseErr = append(h.parseErr, ai.damage.String())
		}
	}
	hrel := filepath.Join(results.LogsDir, results.HarnessLog)
	hevs, err := eventlog.ReadFile(filepath.Join(dir, hrel))
	if h.harnessDamage = damageOf(err, hrel); h.harnessDamage == nil && err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	h.harness = hevs
	h.finish()
	return h, nil
}

// readHistory reads a literal history: one JSON-lines file holding every
// agent's events and the harness's ("agent": "harness"), each writer's in
// its own order. Agents are named by their events (replica 0). Checkers
// are tested on such files without a run (analysis/testdata/histories).
func readHistory(path string) (*history, error) {
	evs, err := eventlog.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var agents []results.AgentInfo
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Agent != "harness" && !seen[e.Agent] {
			seen[e.Agent] = true
			agents = append(agents, results.AgentInfo{Name: e.Agent, Instance: e.Agent})
		}
	}
	h := newHistory(agents)
	for _, e := range evs {
		if e.Agent == "harness" {
			h.harness = append(h.harness, e)
		} else {
			h.add(h.agents[e.Agent], e)
		}
	}
	h.finish()
	return h, nil
}

// instances lists the agents' instance names, sorted.
func (h *history) instances() []string {
	out := make([]string, 0, len(h.agents))
	for inst := range h.agents {
		out = append(out, inst)
	}
	sort.Strings(out)
	return out
}

// logical maps an instance name (A.r3) to its experiment name (A).
func (h *history) logical(inst string) string {
	if a := h.agents[inst]; a != nil {
		return a.name
	}
	name, _ := results.ParseInstance(inst)
	return name
}

// crashes returns, per instance, the mono times the harness killed or
// stopped it (agent_crash, agent_leave).
func (h *history) crashes() map[string][]int64 {
	m := map[string][]int64{}
	for _, e := range h.harness {
		if e.Kind == eventlog.AgentCrash || e.Kind == eventlog.AgentLeave {
			m[e.Peer] = append(m[e.Peer], e.MonoNS)
		}
	}
	return m
}

// runEndMono is when the run ended (run_finished, or the last event).
func (h *history) runEndMono() int64 {
	for _, e := range h.harness {
		if e.Kind == eventlog.RunFinished {
			return e.MonoNS
		}
	}
	return h.endMono
}

// replicaFinished returns, per replica, when the harness stopped it at the
// end of its shard (agents stopped after that are not leaving).
func (h *history) replicaFinished() map[int]int64 {
	m := map[int]int64{}
	for _, e := range h.harness {
		if e.Kind == eventlog.HarnessNotice && e.Reason == "replica_finished" {
			var r int
			if _, err := fmt.Sscanf(e.Detail, "replica %d", &r); err == nil {
				m[r] = e.MonoNS
			}
		}
	}
	return m
}
