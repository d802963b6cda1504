package ftn

// Acquires that stall. An acquire waits for the name's holders (001
// "Tokens": a token is granted when it is free, or shared with shared
// holders), so its wait alone says nothing: a client that holds a name
// for a minute keeps the next one waiting a minute, and that is the
// service working. What must not happen is a wait while nobody needs
// the name: no other client holds it in its own view (the histories'
// holds), because it is free, or its holder stopped acting on it (it
// released, crashed, or never learned of a grant the servers made). Such
// a wait is the service's fault, and one longer than the history's bound
// (answerWithin) fails liveness.
//
// The servers' view of who holds the name (their ftn_granted,
// ftn_released, ftn_freed and ftn_drop_client events) is the evidence:
// following it from the stalled client, to the client the servers
// believe holds the name, to the name that client itself waits for,
// names the wait-for cycle when there is one.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/msg"
	ftnproto "tokenbed/protocols/ftn"
)

// srvEvent is a server's change to a name's holders, or a client's drop.
type srvEvent struct {
	t      int64
	kind   eventlog.Kind
	name   string
	client string // its ID (msg.IDString)
}

// stalls judges every acquire's wait, sets r.Stalls and r.IdleWaitMax,
// and returns how many acquires it judged.
func stalls(h *history, r *Report) int {
	type span struct{ a, b int64 }
	held := map[string][]Hold{}
	for _, hd := range r.Holds {
		held[hd.Op.Name] = append(held[hd.Op.Name], hd)
	}
	n := 0
	for _, o := range h.ops {
		if o.Kind != msg.Acquire {
			continue
		}
		end := waitEnd(h, o)
		if end <= o.Inv {
			continue
		}
		n++
		if w := end - o.Inv; w <= r.IdleWaitMax && w <= h.answerWithin {
			continue // its idle part, at most w, changes neither
		}
		// The parts of the wait some other client held the name in its
		// own view, merged.
		var busy []span
		for _, hd := range held[o.Name] {
			if hd.Op.Client == o.Client && hd.Op.Life == o.Life {
				continue
			}
			if a, b := max(hd.Start, o.Inv), min(hd.End, end); a < b {
				busy = append(busy, span{a, b})
			}
		}
		slices.SortFunc(busy, func(x, y span) int { return cmp.Compare(x.a, y.a) })
		idle, at := int64(0), o.Inv
		for _, s := range busy {
			if s.a > at {
				idle += s.a - at
			}
			at = max(at, s.b)
		}
		idle += max(0, end-at)
		r.IdleWaitMax = max(r.IdleWaitMax, idle)
		if idle <= h.answerWithin {
			continue
		}
		d := fmt.Sprintf("%s acquire %s (req %d) waited %s from %s, %s of it with no other client holding %s in its own view",
			o.Client, o.Name, o.Req, ms(end-o.Inv), ms(o.Inv), ms(idle), o.Name)
		// The chain replays the servers' events: only for the stalls the
		// report lists.
		if len(r.Stalls) >= maxListed {
			r.Stalls = append(r.Stalls, d)
			continue
		}
		if w := waitsFor(h, o.Client, o.Inv+h.answerWithin); w != "" {
			d += "; " + w
		}
		r.Stalls = append(r.Stalls, d)
	}
	return n
}

// waitEnd is when o stopped waiting: its completion, its client's crash
// or invalidation, or the end of the history.
func waitEnd(h *history, o *Op) int64 {
	end := o.Done
	if end < 0 {
		end = h.last
	}
	for _, t := range h.ends[o.Client] {
		if t >= o.Inv && t < end {
			end = t
		}
	}
	return end
}

// waitsFor follows, at time t, the client c's outstanding acquire to the
// client the servers believe holds its name, then that client's own
// outstanding acquire, and so on: "wait-for cycle: c9 waits for t4 held
// by c6, c6 for t1 held by c2, c2 for t7 held by c9", or the chain up
// to a holder that waits for nothing.
func waitsFor(h *history, c string, t int64) string {
	holders := serverHolders(h, t)
	owner := map[string]string{} // client ID → process
	for _, o := range h.ops {
		if o.ID != "" && o.Inv <= t {
			owner[o.ID] = o.Client
		}
	}
	waiting := func(c string) *Op {
		for _, o := range h.ops {
			if o.Client == c && o.Kind == msg.Acquire && o.Inv <= t && waitEnd(h, o) > t {
				return o
			}
		}
		return nil
	}
	var steps []string
	start := c
	visited := map[string]bool{}
	for !visited[c] {
		visited[c] = true
		o := waiting(c)
		if o == nil {
			if len(steps) == 0 {
				return ""
			}
			why := " waits for nothing"
			for k, e := range h.ends[c] {
				if e <= t {
					why = fmt.Sprintf(" had stopped: %s at %s", h.endWhy[c][k], ms(e)) // the latest before t
				}
			}
			return "wait-for chain: " + strings.Join(steps, ", ") + ", and " + c + why
		}
		next := ""
		for _, id := range holders[o.Name] {
			if p := owner[id]; p != "" && p != c {
				next = p
				break
			}
		}
		verb := "waits for"
		if len(steps) > 0 {
			verb = "for"
		}
		if next == "" {
			return "wait-for chain: " + strings.Join(append(steps, fmt.Sprintf("%s %s %s, which the servers list no other client as holding", c, verb, o.Name)), ", ")
		}
		steps = append(steps, fmt.Sprintf("%s %s %s held by %s", c, verb, o.Name, next))
		c = next
	}
	if c != start {
		// The chain runs into a cycle that does not pass through start.
		return "wait-for chain: " + strings.Join(steps, ", ") + ", a cycle through " + c
	}
	return "wait-for cycle: " + strings.Join(steps, ", ")
}

// serverHolders is, at time t, the client IDs the servers' events list
// as holding each name, sorted.
func serverHolders(h *history, t int64) map[string][]string {
	hs := map[string]map[string]bool{}
	for _, e := range h.granted {
		if e.t > t {
			break
		}
		switch e.kind {
		case ftnproto.EventGranted:
			if hs[e.name] == nil {
				hs[e.name] = map[string]bool{}
			}
			hs[e.name][e.client] = true
		case ftnproto.EventReleased, ftnproto.EventFreed:
			delete(hs[e.name], e.client)
		case ftnproto.EventDropClient:
			for _, ids := range hs {
				delete(ids, e.client)
			}
		}
	}
	out := map[string][]string{}
	for n, ids := range hs {
		for id := range ids {
			out[n] = append(out[n], id)
		}
		slices.Sort(out[n])
	}
	return out
}
