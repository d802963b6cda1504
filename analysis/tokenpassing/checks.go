package tokenpassing

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/internal/results"
	"tokenbed/protocols"
	_ "tokenbed/protocols/tokenpassing" // the protocol of runs that name none, so that experiment.yaml parses
)

// hold is one agent holding one token, in mono time.
type hold struct {
	agent      string
	token      string
	session    uint64 // the session it was acquired in
	from, to   int64
	open       bool   // still held at the end of the log
	endedBy    string // released reason, "crash", "leave" or "end"
	acquiredBy string // commit, late_commit, generated
	peer       string // who passed it
}

// holds builds every holding interval from the logs and the harness's
// crashes.
func (h *history) holds() []hold {
	crashes := h.crashes()
	finished := h.replicaFinished()
	openAt := map[[2]string]int{} // (agent, token) → index in out
	var out []hold
	for _, e := range h.evs {
		k := [2]string{e.agent, e.token}
		switch e.kind {
		case eventlog.TokenAcquired:
			openAt[k] = len(out)
			out = append(out, hold{agent: e.agent, token: e.token, session: e.session, from: e.mono, open: true,
				acquiredBy: e.reason, peer: e.peer})
		case eventlog.TokenReleased:
			if i, ok := openAt[k]; ok {
				out[i].to, out[i].open, out[i].endedBy = e.mono, false, e.reason
				delete(openAt, k)
			}
		}
	}
	// Holds still open: a crash (SIGKILL leaves no trace in the log) or
	// the end of the agent's log closes them.
	for i := range out {
		hd := &out[i]
		if !hd.open {
			if hd.endedBy == "stopping" {
				ai := h.agents[hd.agent]
				if f, ok := finished[ai.replica]; ok && hd.to >= f {
					hd.endedBy = "end"
				} else if leftAt(crashes[hd.agent], hd.from, hd.to) {
					hd.endedBy = "leave"
				} else {
					hd.endedBy = "end"
				}
			}
			continue
		}
		end := h.agents[hd.agent].lastMono
		hd.endedBy = "end-of-log"
		for _, c := range crashes[hd.agent] {
			if c >= hd.from {
				end, hd.endedBy = c, "crash"
				break
			}
		}
		hd.to = max(end, hd.from)
	}
	return out
}

func leftAt(times []int64, from, to int64) bool {
	for _, t := range times {
		if t >= from && t <= to {
			return true
		}
	}
	return false
}

// Violation is a duplication: two agents holding one token at once.
type Violation struct {
	Token      string
	Agents     [2]string
	Sessions   [2]uint64
	FromMono   int64
	ToMono     int64
	OverlapSec float64
}

// duplication checks requirement (ii): holding intervals of a token never
// overlap (002 §2).
func duplication(hs []hold) []Violation {
	by := map[string][]hold{}
	for _, hd := range hs {
		by[hd.token] = append(by[hd.token], hd)
	}
	var vs []Violation
	for tok, list := range by {
		sort.Slice(list, func(i, j int) bool { return list[i].from < list[j].from })
		last := list[0]
		for _, cur := range list[1:] {
			if cur.from < last.to && cur.agent != last.agent {
				vs = append(vs, Violation{Token: tok, Agents: [2]string{last.agent, cur.agent}, Sessions: [2]uint64{last.session, cur.session},
					FromMono: cur.from, ToMono: min(cur.to, last.to), OverlapSec: float64(min(cur.to, last.to)-cur.from) / 1e9})
			}
			if cur.to > last.to {
				last = cur
			}
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].FromMono < vs[j].FromMono })
	return vs
}

// Loss is a token that disappeared without a successor holder.
type Loss struct {
	Token string
	Mono  int64
	// Cause: holder-crashed, holder-left, holder-died, crash-in-window;
	// commit-rejected (delivered and rejected by the receiver, with the
	// reasons), commit-delivered-not-acquired (captured arriving, neither
	// acquired nor logged as rejected), commit-not-delivered; unexplained.
	Cause    string
	Agent    string // the holder, or the receiver of the pass in flight
	Session  uint64
	Explains bool // a crash or leave of the holder (or partner, 002 §3.1) explains it
	Detail   string
}

// losses applies requirement (i): every token's fate at the end of the run.
// A pass whose Commit never led to an acquisition is told apart by what
// the receiver logged and what the capture saw: a Commit delivered and
// rejected (a poisoned key cache, 002 §3.1) is not a Commit lost.
func (h *history) losses(hs []hold, cf *captureFacts) []Loss {
	last := map[string]hold{}
	for _, hd := range hs {
		if l, ok := last[hd.token]; !ok || hd.from >= l.from {
			last[hd.token] = hd
		}
	}
	// Passes that succeeded at the sender, by token, latest last.
	type pass struct {
		mono    int64
		from    string
		to      string
		session uint64
	}
	passes := map[string]pass{}
	commitTimeouts := map[string]bool{}        // token/session/receiver
	rejected := map[commitKey]map[string]int{} // Commits the receiver rejected, by reason
	for _, e := range h.evs {
		switch {
		case e.kind == eventlog.PassSucceeded:
			passes[e.token] = pass{e.mono, e.agent, e.peer, e.session}
		case e.kind == eventlog.PassFailed && e.reason == "commit_timeout":
			commitTimeouts[fmt.Sprintf("%s/%d/%s", e.token, e.session, e.agent)] = true
		case e.kind == eventlog.DatagramRejected && strings.HasPrefix(e.detail, wire.Commit.String()+" "):
			k := commitKey{e.token, e.session, e.peer, e.agent}
			if rejected[k] == nil {
				rejected[k] = map[string]int{}
			}
			rejected[k][e.reason]++
		}
	}
	crashes := h.crashes()
	finished := h.replicaFinished()
	runEnd := h.runEndMono()
	var out []Loss
	for tok, hd := range last {
		ai := h.agents[hd.agent]
		switch hd.endedBy {
		case "end", "discarded":
			continue // alive at the end of the run, or removed on purpose (sandwich)
		case "end-of-log":
			// The log stops with the token held and no crash recorded: fine
			// at the end of the run, else the process died on its own.
			if hd.to >= runEnd-int64(10*time.Second) {
				continue
			}
			out = append(out, Loss{Token: tok, Mono: hd.to, Cause: "holder-died", Agent: hd.agent, Session: hd.session, Explains: true,
				Detail: "the holder's log ends without a stop or a crash by the harness: the process died on its own"})
			continue
		case "crash":
			out = append(out, Loss{Token: tok, Mono: hd.to, Cause: "holder-crashed", Agent: hd.agent, Session: hd.session, Explains: true})
			continue
		case "leave":
			out = append(out, Loss{Token: tok, Mono: hd.to, Cause: "holder-left", Agent: hd.agent, Session: hd.session, Explains: true})
			continue
		}
		p, ok := passes[tok]
		if !ok || p.mono < hd.from {
			continue
		}
		// In flight at the end of the run (or of the replica): not a loss.
		end := runEnd
		if f, ok := finished[ai.replica]; ok {
			end = f
		}
		if p.mono >= end-int64(5*time.Second) {
			continue
		}
		l := Loss{Token: tok, Mono: p.mono, Agent: p.to, Session: p.session}
		switch {
		case leftAt(crashes[p.to], p.mono-int64(time.Second), p.mono+int64(10*time.Second)):
			l.Cause, l.Explains, l.Detail = "crash-in-window", true, "the receiver crashed between its Ack and the Commit (002 §3.1)"
		case leftAt(crashes[p.from], p.mono, p.mono+int64(time.Second)):
			l.Cause, l.Explains, l.Detail = "crash-in-window", true, "the sender crashed before its Commit got through (002 §3.1)"
		case rejected[commitKey{tok, p.session, p.from, p.to}] != nil:
			l.Cause = "commit-rejected"
			l.Detail = "the sender got the Ack; the receiver got its Commit and rejected it (" + reasonList(rejected[commitKey{tok, p.session, p.from, p.to}]) + ")"
		case cf.present && (cf.verified[commitKey{tok, p.session, p.from, p.to}] || cf.badSig[commitKey{tok, p.session, p.from, p.to}]):
			sig := "its signature verifies against the CA"
			if !cf.verified[commitKey{tok, p.session, p.from, p.to}] {
				sig = "its signature does not verify"
			}
			l.Cause = "commit-delivered-not-acquired"
			l.Detail = "the capture shows the Commit arriving at the receiver (" + sig + "), which neither acquired the token nor logged the Commit's rejection one by one (a flood's rejections are only counted in rejections_summary)"
		case commitTimeouts[fmt.Sprintf("%s/%d/%s", tok, p.session, p.to)]:
			l.Cause, l.Detail = "commit-not-delivered", "the sender got the Ack; every Commit was lost (002 §3.1): the receiver logged none rejected"
			if cf.present {
				l.Detail += " and the capture shows none arriving"
			} else {
				l.Detail += "; no capture to confirm none arrived"
			}
		default:
			l.Cause, l.Detail = "unexplained", "the sender released the token and the receiver never acquired it"
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Mono < out[j].Mono })
	return out
}

// Failure is a network failure the passing operation tolerated: a pass
// that failed at the sender, which kept the token.
type Failure struct {
	Mono     int64
	From, To string // instances
	Token    string
	Session  uint64
	// DetectedBy: "ack_timeout" when only the sender noticed (the Move
	// never got through), "commit_timeout" when the receiver got the Move
	// and timed out waiting for the Commit (002 §3.3: 37 and 23).
	DetectedBy string
}

func (h *history) failures() []Failure {
	ct := map[string]bool{}
	for _, e := range h.evs {
		if e.kind == eventlog.PassFailed && e.reason == "commit_timeout" {
			ct[fmt.Sprintf("%s/%d/%s/%s", e.token, e.session, e.peer, e.agent)] = true
		}
	}
	// Passes toward an agent that was down (crashed or left, and not yet
	// restarted) are not network failures.
	type period struct{ from, to int64 }
	down := map[string][]period{}
	for _, e := range h.harness {
		switch e.Kind {
		case eventlog.AgentCrash, eventlog.AgentLeave:
			down[e.Peer] = append(down[e.Peer], period{e.MonoNS, math.MaxInt64})
		case eventlog.AgentRestart, eventlog.AgentJoin:
			if ps := down[e.Peer]; len(ps) > 0 && ps[len(ps)-1].to == math.MaxInt64 {
				ps[len(ps)-1].to = e.MonoNS
			}
		}
	}
	isDown := func(inst string, t int64) bool {
		for _, p := range down[inst] {
			if t >= p.from && t <= p.to {
				return true
			}
		}
		return false
	}
	var out []Failure
	for _, e := range h.evs {
		if e.kind == eventlog.PassFailed && e.reason == "ack_timeout" && !isDown(e.peer, e.mono) {
			f := Failure{Mono: e.mono, From: e.agent, To: e.peer, Token: e.token, Session: e.session, DetectedBy: "ack_timeout"}
			if ct[fmt.Sprintf("%s/%d/%s/%s", e.token, e.session, e.agent, e.peer)] {
				f.DetectedBy = "commit_timeout"
			}
			out = append(out, f)
		}
	}
	return out
}

// paperTimes maps every acquisition to paper time with each replica's
// PaperClock (holds stretched back by the time scale), keyed by the event's
// index in h.evs.
func (h *history) paperTimes(info results.RunInfo) map[int]time.Duration {
	clocks := map[int]*results.PaperClock{}
	shard := time.Duration(info.ShardSeconds * float64(time.Second))
	scale := info.TimeScale
	if scale == 0 {
		scale = 1
	}
	start := info.AgentsStartNS
	if start == 0 && len(h.evs) > 0 {
		start = h.evs[0].wall
	}
	crashIdx := 0
	type crash struct {
		wall int64
		inst string
	}
	var cs []crash
	for _, e := range h.harness {
		if e.Kind == eventlog.AgentCrash {
			cs = append(cs, crash{e.WallNS, e.Peer})
		}
	}
	nominal := map[string]int64{}
	for inst, a := range h.agents {
		nominal[inst] = a.holdNS
	}
	var basis results.Basis
	if p, err := protocols.Lookup(info.Protocol); err == nil {
		basis = p.Basis
	}
	out := map[int]time.Duration{}
	for i, e := range h.evs {
		ai := h.agents[e.agent]
		c := clocks[ai.replica]
		if c == nil {
			rs := start
			if info.AgentsStartNS != 0 {
				rs = info.StartNS(ai.replica)
			}
			c = results.NewPaperClock(scale, rs, basis)
			c.Nominal = nominal
			clocks[ai.replica] = c
		}
		for crashIdx < len(cs) && cs[crashIdx].wall <= e.wall {
			if a := h.agents[cs[crashIdx].inst]; a != nil && clocks[a.replica] != nil {
				clocks[a.replica].Crash(cs[crashIdx].inst, cs[crashIdx].wall)
			}
			crashIdx++
		}
		c.Observe(eventlog.Event{Agent: e.agent, Kind: e.kind, Token: e.token, WallNS: e.wall})
		if e.kind == eventlog.TokenAcquired || e.kind == eventlog.TokenRegenerated {
			out[i] = time.Duration(ai.replica)*shard + c.At(e.wall)
		}
	}
	return out
}

// reasonList is "bad-signature ×8, stale-session ×1", by reason.
func reasonList(m map[string]int) string {
	var l []string
	for r, n := range m {
		l = append(l, fmt.Sprintf("%s ×%d", r, n))
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}
