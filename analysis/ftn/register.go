package ftn

import (
	"slices"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	ftnproto "tokenbed/protocols/ftn"
)

// The checks of protocol ftn, registered with package analysis so that
// harness run and harness analyze judge FTN runs with them (Jepsen's
// compose: a protocol brings its own checkers). The history's checks
// judge the run's events (Context.Events, Context.HarnessEvents): the
// clients' histories, the servers' events and the harness's. The
// capture's judge capture.pcapng alone (capture.go); a context without
// a loaded part (a literal history) has none to judge.
func init() {
	analysis.Register(analysis.Plugin{Protocol: ftnproto.Name, Analysis: loader{}, Checkers: checkers()})
}

// checkers are the history's checks, then the capture's.
func checkers() []analysis.NamedChecker {
	var cs []analysis.NamedChecker
	for _, n := range Names {
		cs = append(cs, analysis.NamedChecker{Name: n, Checker: analysis.CheckerFunc(func(c *analysis.Context) analysis.Requirement {
			r, err := historyOf(c)
			if err != nil {
				return analysis.Requirement{Verdict: analysis.VerdictFail, Value: "unreadable history", Detail: err.Error()}
			}
			return r.Requirement(n)
		})})
	}
	for _, n := range CaptureNames {
		cs = append(cs, analysis.NamedChecker{Name: n, Checker: analysis.CheckerFunc(func(c *analysis.Context) analysis.Requirement {
			p, _ := c.Part().(*part)
			switch {
			case p == nil:
				return notJudged("no capture read (a literal history)")
			case p.capErr != nil:
				return analysis.Requirement{Verdict: analysis.VerdictFail, Value: "unreadable capture", Detail: p.capErr.Error()}
			case p.views == nil || p.views.Capture == nil:
				return notJudged("no capture in the results")
			}
			return p.views.Capture.Requirement(n)
		})})
	}
	return cs
}

// historyOf is the part's history report, or one judged now.
func historyOf(c *analysis.Context) (*Report, error) {
	if p, _ := c.Part().(*part); p != nil && p.views != nil {
		return p.views.History, nil
	}
	evs, err := events(c)
	if err != nil {
		return nil, err
	}
	return Check(evs)
}

func events(c *analysis.Context) ([]eventlog.Event, error) {
	evs := slices.Clone(c.HarnessEvents())
	err := c.Events(func(e eventlog.Event) error {
		evs = append(evs, e)
		return nil
	})
	return evs, err
}

// loader is the analysis of protocol ftn beside its checkers: the frame of
// its report, its performance (perf.go) and the two views (compare.go), in
// summary.json and report.md.
type loader struct{}

func (loader) Load(c *analysis.Context) (analysis.Part, error) {
	evs, err := events(c)
	if err != nil {
		return nil, err
	}
	p := &part{}
	if p.perf, err = Performance(evs); err != nil {
		// The checkers report an unreadable history; the figures are
		// left out.
		c.Note("performance: %v", err)
	}
	h, err := Check(evs)
	if err != nil {
		return p, nil // the history's checkers say so
	}
	if c.Dir() == "" {
		p.views = Compare(h, nil)
		return p, nil
	}
	cr, err := CheckCaptureDir(c.Dir(), h.BaseWall)
	if err != nil {
		p.capErr = err
		return p, nil
	}
	p.views = Compare(h, cr)
	return p, nil
}

type part struct {
	perf   Perf
	views  *Views // nil: the history is unreadable
	capErr error
}

var _ analysis.Part = (*part)(nil)

func (*part) Frame() analysis.Frame {
	return analysis.Frame{Title: "FTN lock service report", Checks: "seed 001",
		AllPass: "mutual exclusion, fencing, data and liveness; on the wire, mutual exclusion and fencing",
		Order:   append(slices.Clone(Names), CaptureNames...), Suite: "tokenbed ftn"}
}

// ViewFigures is the two views' agreement, in summary.json.
type ViewFigures struct {
	HistoryHolds  int  `json:"history_holds"`
	CaptureHolds  int  `json:"capture_holds"`
	Capture       bool `json:"capture"` // a capture was judged
	Disagreements int  `json:"disagreements"`
}

func (p *part) Figures() any {
	var v ViewFigures
	if p.views != nil {
		v.HistoryHolds = len(p.views.History.Holds)
		if c := p.views.Capture; c != nil {
			v.Capture, v.CaptureHolds, v.Disagreements = true, len(c.Holds), len(p.views.Disagreements)
		}
	}
	return struct {
		Performance Perf        `json:"performance"`
		Views       ViewFigures `json:"views"`
	}{p.perf, v}
}

func (*part) Begin(*analysis.Context)  {}
func (*part) Finish(*analysis.Context) {}

func (p *part) Sections(*analysis.Context) (string, error) {
	// A blank line ends the checks table above.
	s := "\n" + p.perf.Markdown()
	if p.views != nil {
		s += "\n" + p.views.Markdown()
	}
	return s, nil
}
