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

// The analysis of protocol ftn beside its checkers: the frame of its
// report and its performance (perf.go), in summary.json and report.md.
func init() { analysis.RegisterProtocol(ftnproto.Name, loader{}) }

type loader struct{}

func (loader) Load(c *analysis.Context) (analysis.Part, error) {
	evs := c.HarnessEvents()
	if err := c.Events(func(e eventlog.Event) error {
		evs = append(evs, e)
		return nil
	}); err != nil {
		return nil, err
	}
	p, err := Performance(evs)
	if err != nil {
		// The checkers report an unreadable history; the figures are
		// left out.
		c.Note("performance: %v", err)
	}
	return &part{perf: p}, nil
}

type part struct{ perf Perf }

var _ analysis.Part = (*part)(nil)

func (*part) Frame() analysis.Frame {
	return analysis.Frame{Title: "FTN lock service report", Checks: "seed 001", AllPass: "mutual exclusion, fencing, data and liveness",
		Order: Names, Suite: "tokenbed ftn"}
}

func (p *part) Figures() any {
	return struct {
		Performance Perf `json:"performance"`
	}{p.perf}
}

func (*part) Begin(*analysis.Context)  {}
func (*part) Finish(*analysis.Context) {}

func (p *part) Sections(*analysis.Context) (string, error) { return p.perf.Markdown(), nil }
