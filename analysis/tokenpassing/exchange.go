package tokenpassing

import (
	"tokenbed/agent/config"
	"tokenbed/agent/passing"
	"tokenbed/experiments"
)

// threeWayAgents returns the experiment names of the agents that run 004
// §4's 3-way passing exchange (passing.exchange: 3way). Its sender sends
// one Commit and the receiver discards a late one, so "only in case the
// commitment message is lost the token is lost too" (004 §4): such a loss
// is the protocol working as designed, explained as a crash is in 002
// §3.1, while any other loss still fails requirement (i).
func threeWayAgents(exp *experiments.Experiment) map[string]bool {
	m := map[string]bool{}
	if exp == nil {
		return m
	}
	for _, a := range exp.Agents {
		c, err := config.Decode(a.Config)
		if err == nil && c.Passing.Exchange == passing.Exchange3Way {
			m[a.Name] = true
		}
	}
	return m
}

// lateCommitOnly reports whether every rejection of a Commit was of one
// that came after the receiver had given the token up: refused by its
// clock ("late"), after its wait ended ("no-session"), or by a wait that
// a late Move of another pass of the session opened after the wait for
// this Commit's pass ended ("other-pass": the receiver matches Commits by
// the pass's random id, 004 §4).
func lateCommitOnly(reasons map[string]int) bool {
	for r := range reasons {
		if r != "late" && r != "no-session" && r != "other-pass" {
			return false
		}
	}
	return len(reasons) > 0
}

// commitLossCause says whether l is a loss by a lost commitment of the
// 3-way exchange.
func commitLossCause(cause string) bool {
	return cause == "commit-not-delivered" || cause == "commit-late"
}
