package analysis

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/results"
)

// history is what analysis keeps of the event logs: the events that carry
// a check, compactly, every agent's in one slice sorted by mono time.
type history struct {
	evs      []ev
	agents   map[string]*agentInfo // by instance
	harness  []eventlog.Event
	endMono  int64 // the last event's mono time
	parseErr []string
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
}

type agentInfo struct {
	instance, name string
	replica        int
	holdNS         int64 // nominal hold, wall ns (0: unknown)
	lastMono       int64
	stopped        bool   // logged agent_stopping
	stopReason     string // its reason
	lines          int
	seqGap         bool
}

// kept says which kinds analysis needs; datagram events are kept for the
// failure bundles' timelines only when few (see readLogs).
var kept = map[eventlog.Kind]bool{
	eventlog.AgentStarted: true, eventlog.AgentStopping: true,
	eventlog.PassStarted: true, eventlog.PassSucceeded: true, eventlog.PassCompleted: true, eventlog.PassFailed: true,
	eventlog.TokenAcquired: true, eventlog.TokenReleased: true, eventlog.TokenRegenerated: true, eventlog.TokenDiscarded: true,
	eventlog.DatagramRejected: true, eventlog.CommitSent: true, eventlog.AckReceived: true,
}

// readLogs reads every log of the run.
func readLogs(dir string, topo results.Topology) (*history, error) {
	h := &history{agents: map[string]*agentInfo{}}
	for _, a := range topo.Agents {
		ai := &agentInfo{instance: a.Instance, name: a.Name, replica: a.Replica, holdNS: a.HoldNS}
		h.agents[a.Instance] = ai
		path := filepath.Join(dir, a.Log)
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue // an agent that never started (a later joiner)
		}
		if err != nil {
			return nil, err
		}
		var lastSeq uint64
		err = eventlog.Read(f, path, func(e eventlog.Event) error {
			ai.lines++
			if e.Seq != lastSeq+1 {
				ai.seqGap = true
			}
			lastSeq = e.Seq
			ai.lastMono = max(ai.lastMono, e.MonoNS)
			switch e.Kind {
			case eventlog.AgentStarted:
				ai.stopped = false
			case eventlog.AgentStopping:
				ai.stopped, ai.stopReason = true, e.Reason
			}
			if kept[e.Kind] {
				h.evs = append(h.evs, ev{mono: e.MonoNS, wall: e.WallNS, agent: a.Instance, kind: e.Kind, token: e.Token,
					session: e.Session, peer: e.Peer, reason: e.Reason, latency: e.LatencyNS, nonce: e.Nonce, attempt: e.Attempt})
			}
			return nil
		})
		f.Close()
		if err != nil {
			// A log cut by a crash mid-line is read up to its last whole
			// line; anything else malformed is reported and stops analysis.
			if pe, ok := err.(*eventlog.ParseError); ok && strings.Contains(pe.Err.Error(), "truncated line") {
				h.parseErr = append(h.parseErr, err.Error())
			} else {
				return nil, err
			}
		}
	}
	hpath := filepath.Join(dir, results.LogsDir, results.HarnessLog)
	hevs, err := eventlog.ReadFile(hpath)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	h.harness = hevs
	sort.SliceStable(h.evs, func(i, j int) bool { return h.evs[i].mono < h.evs[j].mono })
	for _, e := range h.evs {
		h.endMono = max(h.endMono, e.mono)
	}
	for _, e := range h.harness {
		h.endMono = max(h.endMono, e.MonoNS)
	}
	return h, nil
}

// logical maps an instance name (A.r3) to its experiment name (A).
func (h *history) logical(inst string) string {
	if a := h.agents[inst]; a != nil {
		return a.name
	}
	if i := strings.Index(inst, ".r"); i > 0 {
		return inst[:i]
	}
	return inst
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
