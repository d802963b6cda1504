// Package resource measures how many agents used the shared resource at
// once (seed 003 Figs. 2 and 3: the share of time with 0, 1, 2 and more
// than 2 concurrent operations), from two independent sources: the
// agents' own logs (op_started/op_finished, or their long holds) and the
// resource server's log (each client's connect and disconnect,
// agent/resource). Both sources are read on the same clock
// (CLOCK_MONOTONIC, shared by every process of one kernel), so their
// figures are comparable interval by interval.
//
// Compressed time: an operation lasts Δop/scale of wall time while the
// passes between them run at real speed. Figures are weighted in paper
// time: wall time during which some token is held counts scale times,
// the rest (tokens in flight) at real speed, as internal/results.PaperClock
// reconstructs paper time; Weights says which.
package resource

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"tokenbed/agent/eventlog"
	agentres "tokenbed/agent/resource"
)

// Interval is one operation: who ran it, with which token, from Start to
// End (CLOCK_MONOTONIC ns). Open marks an interval whose end was not
// logged (a crash, a server stopped): End is then the log's last event.
type Interval struct {
	Client, Token string
	Start, End    int64
	Open          bool
}

// FromServer returns the operations the resource server saw, one per
// client connection, in order of connection. name is the log's name for
// errors.
func FromServer(name string, evs []eventlog.Event) ([]Interval, error) {
	var out []Interval
	open := map[string]int{} // client+token → index in out
	var last int64
	for _, e := range evs {
		last = max(last, e.MonoNS)
		if e.Kind != agentres.ClientConnect && e.Kind != agentres.ClientGone {
			continue
		}
		client, token, err := clientToken(e)
		if err != nil {
			return nil, fmt.Errorf("%s: seq %d: %w", name, e.Seq, err)
		}
		k := client + "\x00" + token
		if e.Kind == agentres.ClientConnect {
			if _, dup := open[k]; dup {
				return nil, fmt.Errorf("%s: seq %d: %s connected twice with token %s", name, e.Seq, client, token)
			}
			open[k] = len(out)
			out = append(out, Interval{Client: client, Token: token, Start: e.MonoNS})
			continue
		}
		i, ok := open[k]
		if !ok {
			return nil, fmt.Errorf("%s: seq %d: %s disconnected without connecting (token %s)", name, e.Seq, client, token)
		}
		out[i].End = e.MonoNS
		delete(open, k)
	}
	for _, i := range open {
		out[i].End, out[i].Open = last, true
	}
	return out, nil
}

func clientToken(e eventlog.Event) (client, token string, err error) {
	for _, f := range []struct {
		key string
		dst *string
	}{{"client", &client}, {"token", &token}} {
		raw, ok := e.Extra[f.key]
		if !ok {
			return "", "", fmt.Errorf("%s: no field %s", e.Kind, f.key)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return "", "", fmt.Errorf("%s: field %s: %v", e.Kind, f.key, err)
		}
	}
	return client, token, nil
}

// FromAgent returns the operations one agent logged (op_started and
// op_finished by token). An operation still running at the end of the
// log, or when the agent starts again in the same log (a crash, then a
// restart), ends at the last event before: a crashed process's
// connection closes with it.
func FromAgent(evs []eventlog.Event) []Interval {
	var out []Interval
	open := map[string]int{}
	var last int64
	for _, e := range evs {
		if e.Kind == eventlog.AgentStarted {
			for tok, i := range open {
				out[i].End, out[i].Open = max(last, out[i].Start), true
				delete(open, tok)
			}
		}
		last = max(last, e.MonoNS)
		tok := token(e)
		switch e.Kind {
		case eventlog.OpStarted:
			if i, ok := open[tok]; ok { // a start without its finish
				out[i].End = e.MonoNS
			}
			open[tok] = len(out)
			out = append(out, Interval{Client: e.Agent, Token: tok, Start: e.MonoNS})
		case eventlog.OpFinished:
			if i, ok := open[tok]; ok {
				out[i].End = e.MonoNS
				delete(open, tok)
			}
		}
	}
	for _, i := range open {
		out[i].End, out[i].Open = last, true
	}
	return out
}

// token is an event's token, typed or, for a kind the schema does not
// type yet (op_started before branch wandering's merge), in Extra.
func token(e eventlog.Event) string {
	if e.Token != "" {
		return e.Token
	}
	var t string
	if raw, ok := e.Extra["token"]; ok {
		json.Unmarshal(raw, &t)
	}
	return t
}

// Holds returns one agent's token holds (token_acquired to the
// pass_started, release or discard that ends it) of at least minNS: the
// weights of paper time (minNS 0), or, for logs without op_started (an
// agent built before the policy logged its operations), the protected
// operations themselves, since an operation holds the token for Δop and
// an early token only for Δskip ≪ Δop (003 Fig. 1 lines 21-24).
func Holds(evs []eventlog.Event, minNS int64) []Interval {
	var out []Interval
	held := map[string]int64{}
	var last int64
	end := func(tok string, at int64) {
		if s, ok := held[tok]; ok {
			if at = max(at, s); at-s >= minNS {
				out = append(out, Interval{Client: evs[0].Agent, Token: tok, Start: s, End: at})
			}
			delete(held, tok)
		}
	}
	endAll := func(at int64) {
		toks := make([]string, 0, len(held))
		for t := range held {
			toks = append(toks, t)
		}
		slices.Sort(toks)
		for _, t := range toks {
			end(t, at)
		}
	}
	for _, e := range evs {
		if e.Kind == eventlog.AgentStarted {
			endAll(last) // a restart: the crashed process held them until its last event
		}
		last = max(last, e.MonoNS)
		switch e.Kind {
		case eventlog.TokenAcquired:
			held[e.Token] = e.MonoNS
		case eventlog.PassStarted, eventlog.TokenReleased, eventlog.TokenDiscarded:
			end(e.Token, e.MonoNS)
		}
	}
	endAll(last)
	return out
}

// Histogram is the share of time spent at each concurrency level:
// Share[k] is the fraction of the observed time with exactly k operations
// running (k = 0 .. len-1, the last level collecting everything above).
type Histogram struct {
	Share []float64
	// TotalNS is the observed time (weighted), Max the highest level
	// reached.
	TotalNS float64
	Max     int
}

// Levels is the number of levels of 003 Fig. 2: 0, 1, 2 and more than 2.
const Levels = 4

// Concurrency is the histogram of ops over [from, to) (monotonic ns),
// with levels 0 .. levels-1. Time during a weight interval (a token
// held: application time) counts scale times, the rest once; scale 1 or
// no weights is plain wall time.
func Concurrency(ops []Interval, from, to int64, weights []Interval, scale float64, levels int) Histogram {
	type edge struct {
		at    int64
		dOp   int
		dHeld int
	}
	var es []edge
	clip := func(iv Interval) (int64, int64, bool) {
		s, e := max(iv.Start, from), min(iv.End, to)
		return s, e, e > s
	}
	for _, iv := range ops {
		if s, e, ok := clip(iv); ok {
			es = append(es, edge{s, 1, 0}, edge{e, -1, 0})
		}
	}
	for _, iv := range weights {
		if s, e, ok := clip(iv); ok {
			es = append(es, edge{s, 0, 1}, edge{e, 0, -1})
		}
	}
	slices.SortFunc(es, func(a, b edge) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	h := Histogram{Share: make([]float64, levels)}
	at, nOp, nHeld := from, 0, 0
	add := func(until int64) {
		if until <= at {
			return
		}
		w := float64(until - at)
		if nHeld > 0 && scale > 0 {
			w *= scale
		}
		h.Share[min(nOp, levels-1)] += w
		h.TotalNS += w
		h.Max = max(h.Max, nOp)
	}
	for _, e := range es {
		add(e.at)
		at = max(at, e.at)
		nOp += e.dOp
		nHeld += e.dHeld
	}
	add(to)
	if h.TotalNS > 0 {
		for i := range h.Share {
			h.Share[i] /= h.TotalNS
		}
	}
	return h
}

// Compare returns the largest difference between two histograms' shares
// and the level where it is.
func Compare(a, b Histogram) (diff float64, level int) {
	for i := range a.Share {
		if i < len(b.Share) {
			if d := abs(a.Share[i] - b.Share[i]); d > diff {
				diff, level = d, i
			}
		}
	}
	return diff, level
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// String prints the shares as 003 Fig. 2 labels them.
func (h Histogram) String() string {
	var parts []string
	for i, s := range h.Share {
		label := fmt.Sprint(i)
		if i == len(h.Share)-1 {
			label = fmt.Sprintf(">%d", i-1)
		}
		parts = append(parts, fmt.Sprintf("%s: %.2f%%", label, 100*s))
	}
	return strings.Join(parts, ", ")
}
