// Package hold is what the two Wandering Token variants (seed 003 Fig. 1,
// package wandering; seed 004 Fig. 2, package wandering004) really share:
// holding a token for Δop while the protected operation A runs, or for
// Δskip when the token came early, then passing it to a member chosen
// uniformly at random (the random walk), and choosing another member when
// a pass fails (002 §3). Which tokens are removed, when A runs and when a
// token is regenerated differ between the variants and stay in their
// packages.
//
// Fig. 1 (and Fig. 2) handle one token at a time in a select loop; a node
// may hold two tokens at once (a second arrives during a hold), so a Set
// holds each with its own deadline. The second token of an agent finds A
// run less than Δmin ago and is kept only Δskip, as in the loop.
package hold

import (
	"slices"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

type token struct {
	until   time.Time
	passing bool
	op      bool // A runs until until (op_finished is due then)
	failed  map[string]bool
}

// Set is the tokens an agent holds. The zero value is not usable: use
// NewSet.
type Set struct {
	held map[wire.TokenID]*token
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{held: map[wire.TokenID]*token{}} }

// Len is how many tokens are held.
func (s *Set) Len() int { return len(s.held) }

// Hold holds t for d from now. With op, the protected operation A runs
// for that time: Hold returns its OpStart (Reason reason) and Route its
// OpEnd when d is over.
func (s *Set) Hold(now time.Time, t wire.TokenID, d time.Duration, op bool, reason string) []circulation.Action {
	s.held[t] = &token{until: now.Add(d), op: op, failed: map[string]bool{}}
	if op {
		return []circulation.Action{{Kind: circulation.OpStart, Token: t, Reason: reason}}
	}
	return nil
}

// Passed forgets t: it left the agent.
func (s *Set) Passed(t wire.TokenID) { delete(s.held, t) }

// Failed records that passing t to peer failed: Route picks another
// member (002 §3: "another receiver is selected").
func (s *Set) Failed(t wire.TokenID, peer string) {
	if h := s.held[t]; h != nil {
		h.passing = false
		h.failed[peer] = true
	}
}

// Route ends the operations that are due (OpEnd) and passes every token
// whose hold is over to a member chosen uniformly at random among those
// that did not fail it (Fig. 1 line 27, send(token)). When every member
// failed, the token is kept retry longer and all are tried again.
func (s *Set) Route(now time.Time, h circulation.Host, retry time.Duration) []circulation.Action {
	var acts []circulation.Action
	ids := make([]wire.TokenID, 0, len(s.held))
	for t := range s.held {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, wire.TokenID.Compare) // map order must not reach the random choices
	for _, t := range ids {
		k := s.held[t]
		if k.passing || now.Before(k.until) {
			continue
		}
		if k.op {
			k.op = false
			acts = append(acts, circulation.Action{Kind: circulation.OpEnd, Token: t, Reason: "done"})
		}
		var cands []string
		for _, m := range h.Peers() {
			if !k.failed[m] {
				cands = append(cands, m)
			}
		}
		if len(cands) == 0 {
			k.until = now.Add(max(retry, time.Millisecond))
			clear(k.failed)
			continue
		}
		k.passing = true
		acts = append(acts, circulation.Action{Kind: circulation.Pass, Token: t, Peer: cands[h.Rand().IntN(len(cands))]})
	}
	return acts
}

// Deadline is the earliest end of a hold not yet being passed.
func (s *Set) Deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	for _, k := range s.held {
		if !k.passing && (!ok || k.until.Before(d)) {
			d, ok = k.until, true
		}
	}
	return d, ok
}
