package ftn

import (
	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	ftnproto "tokenbed/harness/protocol/ftn"
)

// The checks of protocol ftn, registered with package analysis so that
// harness run and harness analyze judge FTN runs with them (Jepsen's
// compose: a protocol brings its own checkers). Each judges the run's
// events (Context.Events, Context.HarnessEvents): the clients' histories,
// the servers' events and the harness's.
func init() {
	for _, n := range Names {
		analysis.RegisterChecker(ftnproto.Name, n, analysis.CheckerFunc(func(c *analysis.Context) analysis.Requirement {
			evs := c.HarnessEvents()
			err := c.Events(func(e eventlog.Event) error {
				evs = append(evs, e)
				return nil
			})
			var r *Report
			if err == nil {
				r, err = Check(evs)
			}
			if err != nil {
				return analysis.Requirement{Verdict: analysis.VerdictFail, Value: "unreadable history", Detail: err.Error()}
			}
			return r.Requirement(n)
		}))
	}
}
