package tokenpassing

import (
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/internal/results"
)

// input is what the tests judge: a history, the capture's facts, the
// experiment (nil: none) and the run's record.
type input struct {
	info results.RunInfo
	exp  *experiments.Experiment
	h    *history
	cf   *captureFacts
}

type judged struct{ s *summary }

// judge runs token passing's checkers on in, as analysis.Analyze runs
// them on a run, without a results directory (no bundles, no plots).
func judge(in input) judged {
	c := analysis.NewContext(in.info, results.Topology{}, in.exp, in.h.harness, nil)
	p := newPart(c, in.h, in.cf, nil)
	c.SetPart(p)
	return judged{s: &summary{c.Judge(), p.f}}
}

// analyzed is analysis.Analyze, with token passing's figures at hand.
func analyzed(dir string) (*summary, error) {
	s, err := analysis.Analyze(dir)
	if s == nil {
		return nil, err
	}
	return &summary{s, FiguresOf(s)}, err
}

// renderReport is the report.md of s: the frame around token passing's
// sections.
func renderReport(s *summary, exp *experiments.Experiment, plots []string, plotNote string) string {
	return analysis.RenderReport(s.Summary, (&part{}).Frame(), sections(s, exp, plots, plotNote))
}
