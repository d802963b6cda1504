// Package ftn is the analysis half of the FTN lock service (seed 001): a
// Jepsen-style checker over the clients' histories (agent/ftn/ftnlog:
// ftn_invoke and ftn_complete events), with the servers' and the
// harness's events as evidence. It is a pure function from the events to
// verdicts; it reads no run directory and no clock.
//
// # What is checked
//
// A client holds a token, in its own view, from the completion of its
// acquire until it invokes the release, or until it stops (crash), or
// until it learns its ID is invalid (ftn_invalid). Those are the intervals
// in which it may act on the token, so those are the ones judged.
//
//   - Mutual exclusion: no two holds of one name overlap when either is
//     exclusive. An overlap whose earlier holder had been dropped from the
//     client list (the leader's ftn_drop_client) before the later hold
//     began is the window 001 admits ("a client declared down has not
//     truly crashed"): it is reported apart, with the drop and both
//     fences, and is not a failure.
//   - Fencing (beyond the seed): for every two conflicting holds of a
//     name, the one that began later has the larger fence. In an admitted
//     window this is what lets a resource refuse the stale holder.
//   - Data: a holder's read (get-data, or the data an acquire returns)
//     gives the value of the last set-data that completed before the read
//     began, or of one concurrent with it; "" or an older value only when
//     a server went down in between (001: data "can be lost if a server
//     ... crashes"), reported as loss.
//   - Liveness: after each fault (crash, restart, outage start or end), how long
//     the service kept clients waiting: the longest wait, counted from the
//     fault or from the request if later, of any release, set-data or
//     get-data that was outstanding between this fault and the next.
//     These requests never wait for another client, so their wait is the
//     service's unavailability (an acquire also waits for the holders).
//     A request of any kind left unanswered for AnswerWithin while its
//     client lives fails it (one invoked closer than that to the end of
//     the history, or to its client's stop, is not judged). And an
//     acquire that waits longer than AnswerWithin while no other client
//     holds the name in its own view (the name is free, or its holder
//     released, crashed or never learned of its grant) fails it, with the
//     wait-for cycle the servers' grants show (stall.go); a wait behind a
//     busy holder, however long, does not.
package ftn

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
	"tokenbed/analysis"
	"tokenbed/internal/results"
	ftnproto "tokenbed/protocols/ftn"
)

// Op is one client operation of the history.
type Op struct {
	Client string // the client process (eventlog agent)
	Life   int    // its life (restarts count from 1)
	ID     string // its client ID
	Req    uint64
	Kind   msg.Kind
	Name   string
	Mode   msg.Mode
	Inv    int64 // invocation, mono ns
	Done   int64 // completion, mono ns (-1: none: unknown)
	Result string
	Fence  msg.Fence
	Data   string // set-data: written; get-data and acquire: read
}

// Hold is a client's belief that it holds a token.
type Hold struct {
	Op         *Op
	Start, End int64 // End: math.MaxInt64 while held at the end
	EndWhy     string
}

// Overlap is two conflicting holds of one name at once.
type Overlap struct {
	Name     string
	A, B     Hold // A began first
	Admitted bool
	Evidence string
}

func (o Overlap) String() string {
	return fmt.Sprintf("%s: %s(%s) %s fence %s [%s] and %s(%s) %s fence %s from %s%s", o.Name,
		o.A.Op.Client, o.A.Op.ID, o.A.Op.Mode, o.A.Op.Fence, span(o.A), o.B.Op.Client, o.B.Op.ID, o.B.Op.Mode, o.B.Op.Fence,
		ms(o.B.Start), func() string {
			if o.Evidence != "" {
				return "; " + o.Evidence
			}
			return ""
		}())
}

func ms(t int64) string { return fmt.Sprintf("%.3fs", float64(t)/1e9) }

func span(h Hold) string {
	if h.End == math.MaxInt64 {
		return ms(h.Start) + "–end"
	}
	return ms(h.Start) + "–" + ms(h.End)
}

// Report is the verdicts and their evidence.
type Report struct {
	Ops         []*Op
	Holds       []Hold
	Overlaps    []Overlap // violations and admitted windows
	FenceErrors []string
	DataErrors  []string
	DataLoss    []string
	Recovery    []int64 // ns per fault, in order
	Unrecovered []string
	// Stalls are the acquires that waited longer than the bound with the
	// name free or its holder idle or gone (stall.go); IdleWaitMax is the
	// longest such wait of any acquire.
	Stalls          []string
	IdleWaitMax     int64
	MutualExclusion analysis.Requirement
	Fencing         analysis.Requirement
	Data            analysis.Requirement
	Liveness        analysis.Requirement
	// Dropped: client ID → when the leader first dropped it from the
	// client list (its ftn_drop_client).
	Dropped map[string]int64
	// BaseWall is the wall clock (ns) of time 0, the history's first
	// event: the capture's view is shown on the same origin.
	BaseWall int64
}

// AnswerWithin is how long a request may stay unanswered, in a history
// with faults, before liveness fails: longer than any recovery the
// protocol's timeouts allow at the default tick (election, DOWN
// declaration, query round: about 2 s), with margin.
const AnswerWithin = 10 * time.Second

// Names of the checks, in report order.
var Names = []string{"mutual-exclusion", "fencing", "data", "liveness"}

// Requirement returns the named check's verdict.
func (r *Report) Requirement(name string) analysis.Requirement {
	switch name {
	case "mutual-exclusion":
		return r.MutualExclusion
	case "fencing":
		return r.Fencing
	case "data":
		return r.Data
	case "liveness":
		return r.Liveness
	}
	return analysis.Requirement{}
}

type history struct {
	ops      []*Op
	dropped  map[string]int64   // client ID → first drop
	ends     map[string][]int64 // client process → its crashes and invalidations, with why
	endWhy   map[string][]string
	downs    []int64 // servers crashed or declared down
	faults   []int64
	faultWhy []string
	last     int64
	baseWall int64
	// granted: the servers' grants, releases, frees and drops, in time
	// order: who the servers believe holds each name (stall.go).
	granted []srvEvent

	answerWithin int64
}

// Options of a check.
type Options struct {
	// AnswerWithin overrides the package's AnswerWithin (histories on
	// another time scale, such as the in-memory cluster's 1 ms ticks).
	AnswerWithin time.Duration
}

// Check judges a history: every event of every process and of the
// harness, in any order (they are sorted on the shared clock).
func Check(evs []eventlog.Event) (*Report, error) { return CheckWith(evs, Options{}) }

// CheckWith is Check with options.
func CheckWith(evs []eventlog.Event, o Options) (*Report, error) {
	h, err := parse(evs)
	if err != nil {
		return nil, err
	}
	h.answerWithin = int64(AnswerWithin)
	if o.AnswerWithin > 0 {
		h.answerWithin = int64(o.AnswerWithin)
	}
	r := &Report{Ops: h.ops, BaseWall: h.baseWall, Dropped: h.dropped}
	r.Holds = holds(h)
	mutex(h, r)
	data(h, r)
	liveness(h, r)
	return r, nil
}

func parse(evs []eventlog.Event) (*history, error) {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b eventlog.Event) int {
		return cmp.Or(cmp.Compare(a.MonoNS, b.MonoNS), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Seq, b.Seq))
	})
	h := &history{dropped: map[string]int64{}, ends: map[string][]int64{}, endWhy: map[string][]string{}}
	type key struct {
		client string
		life   int
		req    uint64
	}
	open := map[key]*Op{}
	life := map[string]int{}
	lastReq := map[string]uint64{}
	str := func(e eventlog.Event, k string) string {
		var s string
		if raw, ok := e.Extra[k]; ok {
			_ = jsonUnquote(raw, &s)
		}
		return s
	}
	// Times are from the first event on: reports read in seconds of the
	// run.
	var base int64
	if len(evs) > 0 {
		base, h.baseWall = evs[0].MonoNS, evs[0].WallNS
	}
	for _, e := range evs {
		t := e.MonoNS - base
		h.last = max(h.last, t)
		switch {
		case e.Kind == ftnlog.Invoke || e.Kind == ftnlog.Complete:
			rec, _, err := ftnlog.Parse(e)
			if err != nil {
				return nil, err
			}
			if e.Kind == ftnlog.Invoke {
				if life[e.Agent] == 0 || rec.Req <= lastReq[e.Agent] {
					life[e.Agent]++
				}
				lastReq[e.Agent] = rec.Req
				k, _ := ftnlog.OpKind(rec.Op)
				o := &Op{Client: e.Agent, Life: life[e.Agent], ID: rec.Client, Req: rec.Req, Kind: k, Name: rec.Name,
					Inv: t, Done: -1, Data: rec.Data}
				if rec.Mode == "s" {
					o.Mode = msg.Shared
				} else if k == msg.Acquire {
					o.Mode = msg.Exclusive
				}
				h.ops = append(h.ops, o)
				open[key{e.Agent, life[e.Agent], rec.Req}] = o
				continue
			}
			o := open[key{e.Agent, life[e.Agent], rec.Req}]
			if o == nil {
				return nil, fmt.Errorf("%s seq %d: completion of req %d never invoked", e.Agent, e.Seq, rec.Req)
			}
			delete(open, key{e.Agent, life[e.Agent], rec.Req})
			o.Done, o.Result, o.Fence = t, rec.Result, rec.Fence()
			if rec.Client != "" {
				o.ID = rec.Client
			}
			if o.Kind != msg.SetData {
				o.Data = rec.Data
			}
		case e.Kind == ftnproto.EventDropClient:
			id := str(e, "client")
			if _, ok := h.dropped[id]; !ok {
				h.dropped[id] = t
			}
			h.granted = append(h.granted, srvEvent{t: t, kind: e.Kind, client: id})
		case e.Kind == ftnproto.EventGranted || e.Kind == ftnproto.EventReleased || e.Kind == ftnproto.EventFreed:
			h.granted = append(h.granted, srvEvent{t: t, kind: e.Kind, name: str(e, "name"), client: str(e, "client")})
		case e.Kind == ftnproto.EventInvalid:
			h.ends[e.Agent] = append(h.ends[e.Agent], t)
			h.endWhy[e.Agent] = append(h.endWhy[e.Agent], "ID invalid")
		case e.Kind == ftnproto.EventDeclareDown:
			h.downs = append(h.downs, t)
		case e.Kind == eventlog.AgentCrash:
			h.ends[e.Peer] = append(h.ends[e.Peer], t)
			h.endWhy[e.Peer] = append(h.endWhy[e.Peer], "crashed")
			h.downs = append(h.downs, t)
			h.faults = append(h.faults, t)
			h.faultWhy = append(h.faultWhy, "crash of "+e.Peer)
		case e.Kind == eventlog.AgentRestart, e.Kind == eventlog.OutageStart, e.Kind == eventlog.OutageEnd:
			// An outage logs one start and one end per direction, and a
			// partition is several outages at once: one fault per 100 ms.
			if n := len(h.faults); n > 0 && t-h.faults[n-1] < 1e8 && e.Kind != eventlog.AgentRestart &&
				strings.HasPrefix(h.faultWhy[n-1], string(e.Kind)) {
				continue
			}
			h.faults = append(h.faults, t)
			h.faultWhy = append(h.faultWhy, string(e.Kind)+" "+e.Peer+e.Link)
		}
	}
	return h, nil
}

// holds derives each acquire's hold.
func holds(h *history) []Hold {
	var hs []Hold
	for i, o := range h.ops {
		if o.Kind != msg.Acquire || o.Result != ftnlog.OK {
			continue
		}
		hd := Hold{Op: o, Start: o.Done, End: math.MaxInt64}
		for _, r := range h.ops[i+1:] {
			if r.Client == o.Client && r.Life == o.Life && r.Name == o.Name && r.Kind == msg.Release && r.Inv >= o.Done {
				hd.End, hd.EndWhy = r.Inv, "release"
				break
			}
		}
		for k, t := range h.ends[o.Client] {
			if t >= o.Done && t < hd.End {
				hd.End, hd.EndWhy = t, h.endWhy[o.Client][k]
			}
		}
		hs = append(hs, hd)
	}
	slices.SortStableFunc(hs, func(a, b Hold) int { return cmp.Compare(a.Start, b.Start) })
	return hs
}

func conflict(a, b msg.Mode) bool { return a == msg.Exclusive || b == msg.Exclusive }

func mutex(h *history, r *Report) {
	r.Overlaps, r.FenceErrors, r.MutualExclusion, r.Fencing = judge(r.Holds, h.dropped)
}

// judge is the rule both views share (the clients' histories here, the
// capture in capture.go): every two conflicting holds of a name by
// different clients (or lives) must not overlap, unless the earlier
// holder was dropped from the client list (dropped: client ID → time)
// between the two starts, 001's admitted window; and the later one must
// carry the larger fence.
func judge(holds []Hold, dropped map[string]int64) (overlaps []Overlap, fenceErrs []string, me, fe analysis.Requirement) {
	byName := map[string][]Hold{}
	for _, hd := range holds {
		byName[hd.Op.Name] = append(byName[hd.Op.Name], hd)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	pairs := 0
	for _, n := range names {
		hs := byName[n]
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if !conflict(a.Op.Mode, b.Op.Mode) || (a.Op.Client == b.Op.Client && a.Op.Life == b.Op.Life) {
					continue
				}
				pairs++
				if a.Op.Fence.Compare(b.Op.Fence) >= 0 {
					fenceErrs = append(fenceErrs, fmt.Sprintf("%s: %s fence %s from %s, then %s fence %s from %s",
						n, a.Op.Client, a.Op.Fence, ms(a.Start), b.Op.Client, b.Op.Fence, ms(b.Start)))
				}
				if b.Start >= a.End {
					continue
				}
				o := Overlap{Name: n, A: a, B: b}
				if t, ok := dropped[a.Op.ID]; ok && t <= b.Start && t >= a.Start {
					o.Admitted = true
					o.Evidence = fmt.Sprintf("%s dropped from the client list at %s", a.Op.ID, ms(t))
					if a.Op.Fence.Compare(b.Op.Fence) < 0 {
						o.Evidence += ", detectable: fence " + a.Op.Fence.String() + " < " + b.Op.Fence.String()
					} else {
						o.Evidence += ", NOT detectable by fences"
					}
				}
				overlaps = append(overlaps, o)
			}
		}
	}
	var bad, ok []string
	for _, o := range overlaps {
		if o.Admitted {
			ok = append(ok, o.String())
		} else {
			bad = append(bad, o.String())
		}
	}
	switch {
	case len(holds) == 0:
		me = notJudged("no acquire completed")
	case len(bad) > 0:
		me = fail(fmt.Sprintf("%d violations", len(bad)), "overlapping conflicting holds: "+strings.Join(bad, "; "))
	default:
		d := fmt.Sprintf("%d holds, %d conflicting pairs, no overlap", len(holds), pairs)
		if len(ok) > 0 {
			d = fmt.Sprintf("%d holds, %d conflicting pairs; %d windows admitted by 001 (a client falsely declared down): %s",
				len(holds), pairs, len(ok), strings.Join(ok, "; "))
		}
		me = pass(fmt.Sprintf("0 violations, %d admitted", len(ok)), d)
	}
	switch {
	case pairs == 0:
		fe = notJudged("no two conflicting holds of one name")
	case len(fenceErrs) > 0:
		fe = fail(fmt.Sprintf("%d of %d pairs out of order", len(fenceErrs), pairs), strings.Join(fenceErrs, "; "))
	default:
		fe = pass(fmt.Sprintf("%d of %d pairs in order", pairs, pairs), "every later conflicting hold has the larger fence")
	}
	return overlaps, fenceErrs, me, fe
}

// data checks reads against writes, per name.
func data(h *history, r *Report) {
	reads := 0
	for _, rd := range h.ops {
		if rd.Result != ftnlog.OK || (rd.Kind != msg.GetData && rd.Kind != msg.Acquire) {
			continue
		}
		reads++
		// A read may see any write that began before it ended and that no
		// other write superseded before it began (one that began after the
		// first had ended and ended before the read began): a register's
		// rule. Exclusive holders' writes never overlap, so it allows the
		// last write completed before the read, and the concurrent ones;
		// shared holders' writes overlap (001 "Token data": updating by
		// shared holders is FCFS, in the server's order of arrival, which
		// the clients do not see), and either of two overlapping writes
		// may be the later one. The initial "" is superseded by any write
		// completed before the read.
		var writes []*Op
		for _, w := range h.ops {
			if w.Kind == msg.SetData && w.Name == rd.Name && (w.Result == ftnlog.OK || w.Done < 0) && w.Inv < rd.Done {
				writes = append(writes, w)
			}
		}
		superseded := func(end int64) bool {
			return slices.ContainsFunc(writes, func(o *Op) bool {
				return o.Result == ftnlog.OK && o.Done >= 0 && o.Inv > end && o.Done < rd.Inv
			})
		}
		var last *Op
		var older []*Op
		allowed := map[string]bool{"": !superseded(-1)}
		for _, w := range writes {
			if w.Done < 0 || w.Result != ftnlog.OK || !superseded(w.Done) {
				allowed[w.Data] = true // concurrent, unknown, or not superseded
			}
			if w.Done >= 0 && w.Result == ftnlog.OK && w.Done < rd.Inv {
				if last == nil || w.Done > last.Done {
					if last != nil {
						older = append(older, last)
					}
					last = w
				} else {
					older = append(older, w)
				}
			}
		}
		lastV := ""
		if last != nil {
			lastV = last.Data
		}
		if allowed[rd.Data] {
			continue
		}
		lost := last != nil && slices.ContainsFunc(h.downs, func(t int64) bool { return t > last.Done && t < rd.Done })
		if lost && (rd.Data == "" || slices.ContainsFunc(older, func(w *Op) bool { return w.Data == rd.Data })) {
			r.DataLoss = append(r.DataLoss, fmt.Sprintf("%s: %s read %q at %s, last written %q at %s, a server down in between",
				rd.Name, rd.Client, rd.Data, ms(rd.Done), lastV, ms(last.Done)))
			continue
		}
		r.DataErrors = append(r.DataErrors, fmt.Sprintf("%s: %s read %q at %s, want %q (written at %s)",
			rd.Name, rd.Client, rd.Data, ms(rd.Done), lastV, func() string {
				if last == nil {
					return "never"
				}
				return ms(last.Done)
			}()))
	}
	switch {
	case reads == 0:
		r.Data = notJudged("no read completed")
	case len(r.DataErrors) > 0:
		r.Data = fail(fmt.Sprintf("%d of %d reads wrong", len(r.DataErrors), reads), strings.Join(r.DataErrors, "; "))
	default:
		d := fmt.Sprintf("%d reads, each the last write or a concurrent one", reads)
		if len(r.DataLoss) > 0 {
			d += fmt.Sprintf("; %d lost to a server crash (001 admits it): %s", len(r.DataLoss), strings.Join(r.DataLoss, "; "))
		}
		r.Data = pass(fmt.Sprintf("%d of %d reads", reads-len(r.DataLoss), reads), d)
	}
}

// liveness: the acquires that stalled (stall.go), and after each fault
// the longest wait of a request that never waits for another client.
func liveness(h *history, r *Report) {
	acquires := stalls(h, r)
	recovery(h, r)
	var bad []string
	var values []string
	if n := len(r.Stalls); n > 0 {
		values = append(values, fmt.Sprintf("%d acquires stalled", n))
		bad = append(bad, firstOf(r.Stalls)...)
	}
	if n := len(r.Unrecovered); n > 0 {
		values = append(values, fmt.Sprintf("%d requests never answered", n))
		bad = append(bad, r.Unrecovered...)
	}
	if len(bad) > 0 {
		r.Liveness = fail(strings.Join(values, ", "), strings.Join(bad, "; "))
		return
	}
	acq := fmt.Sprintf("%d acquires, none waited over %s with the name free or its holder idle or gone (longest such wait %s)",
		acquires, ms(h.answerWithin), ms(r.IdleWaitMax))
	switch {
	case len(h.faults) == 0 && acquires == 0:
		r.Liveness = notJudged("no fault in the history, no acquire")
	case len(h.faults) == 0:
		r.Liveness = pass("no acquire stalled", "no fault in the history; "+acq)
	case len(r.Recovery) == 0 && acquires == 0:
		r.Liveness = notJudged(fmt.Sprintf("%d faults, and no release, set-data or get-data completed after any of them", len(h.faults)))
	case len(r.Recovery) == 0:
		r.Liveness = pass("no acquire stalled", fmt.Sprintf("%d faults, and no release, set-data or get-data completed after any of them; %s", len(h.faults), acq))
	default:
		s := slices.Clone(r.Recovery)
		slices.Sort(s)
		detail := fmt.Sprintf("%d faults; longest wait of a release, set-data or get-data after each: p50 %s, max %s",
			len(s), ms(s[len(s)/2]), ms(s[len(s)-1]))
		if skipped := len(h.faults) - len(s); skipped > 0 {
			detail += fmt.Sprintf("; %d more faults with no request completed after them, not judged", skipped)
		}
		r.Liveness = pass(fmt.Sprintf("max %s", ms(s[len(s)-1])), detail+"; "+acq)
	}
}

// recovery: after each fault, the longest wait of a release, set-data or
// get-data outstanding between it and the next (r.Recovery), and the
// requests of any kind left unanswered for answerWithin while their
// client lived (r.Unrecovered).
func recovery(h *history, r *Report) {
	for fi, t := range h.faults {
		next := int64(math.MaxInt64)
		if fi+1 < len(h.faults) {
			next = h.faults[fi+1]
		}
		worst, seen := int64(0), false
		for _, o := range h.ops {
			if o.Inv >= next || (o.Done >= 0 && o.Done <= t) {
				continue
			}
			if o.Done < 0 || o.Result == ftnlog.Unknown {
				end := o.Done
				if end < 0 {
					end = h.last
				}
				if o.Inv >= t && end-o.Inv > h.answerWithin && !ended(h, o.Client, o.Inv) {
					r.Unrecovered = append(r.Unrecovered, fmt.Sprintf("%s req %d (%s %s) after %s at %s", o.Client, o.Req,
						ftnlog.OpName(o.Kind), o.Name, h.faultWhy[fi], ms(t)))
				}
				continue
			}
			if o.Kind == msg.Acquire || o.Result != ftnlog.OK {
				continue
			}
			worst, seen = max(worst, o.Done-max(t, o.Inv)), true
		}
		// A fault after which no request completed says nothing about
		// recovery: it is left out, not counted as an instant one.
		if seen {
			r.Recovery = append(r.Recovery, worst)
		}
	}
}

func clients(h *history) []string {
	var cs []string
	for _, o := range h.ops {
		if !slices.Contains(cs, o.Client) {
			cs = append(cs, o.Client)
		}
	}
	return cs
}

// ended reports whether client c crashed or was invalidated after t and
// never asked again in a new life.
func ended(h *history, c string, t int64) bool {
	for _, e := range h.ends[c] {
		if e >= t {
			return true
		}
	}
	return false
}

func pass(value, detail string) analysis.Requirement {
	return analysis.Requirement{Verdict: analysis.VerdictPass, Pass: true, Value: value, Detail: detail}
}

func fail(value, detail string) analysis.Requirement {
	return analysis.Requirement{Verdict: analysis.VerdictFail, Value: value, Detail: detail}
}

func notJudged(why string) analysis.Requirement {
	return analysis.Requirement{Verdict: analysis.VerdictNotJudged, Value: "not judged", Detail: "not judged: " + why}
}

// CheckDir judges a run's results directory: every event log in its
// logs/ (the processes' and the harness's).
func CheckDir(dir string) (*Report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, results.LogsDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no event logs", filepath.Join(dir, results.LogsDir))
	}
	var evs []eventlog.Event
	for _, p := range paths {
		e, err := eventlog.ReadFile(p)
		if err != nil {
			return nil, err
		}
		evs = append(evs, e...)
	}
	return Check(evs)
}
