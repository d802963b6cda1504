package serve

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"tokenbed/analysis/trend"
	"tokenbed/internal/resultsdb"
)

// figurePoint is one night (or run) of a figure's page.
type figurePoint struct {
	Night, Run, Revision string
	Value                float64
	Has                  bool
	Shown                string // the value, formatted
	N                    int    // samples or events behind it
	Mark                 string // the change's first night: "moved" (a regression) or "improved"; "after": the nights since a regression
	X, Y                 float64
}

// figurePage is one figure across nights.
type figurePage struct {
	Name, Job, Unit string
	Filter          resultsdb.RunFilter
	// Scalars are harness trend's --scalar: figures judged as one value
	// a run (?scalar=NAME, repeatable).
	Scalars []string
	// ScalarURL judges this unjudged figure as one value a run.
	ScalarURL string
	Points    []figurePoint
	// Judged: the series is analysis/trend's (samples or a count), with
	// its finding; otherwise a figure with one value a night, unmarked.
	Judged  bool
	Finding trend.Finding
	Command string // the harness trend command that judges the same family
	Chart   chart
}

// chart is the series drawn as an inline SVG: no script.
type chart struct {
	W, H   float64
	Line   string // polyline points
	Lo, Hi string // the axis' ends, formatted
}

const chartW, chartH, chartPad = 720.0, 200.0, 12.0

// figure serves one figure across nights. A series harness trend judges
// (a job's samples, as distribution and quantiles, and its counts) is
// read and judged as `harness trend --job J` does, over the same family
// of figures, and the night from which it moved is marked with its
// revision. Any other figure (one value a night) is shown unmarked, from
// the figures table.
func (s *Server) figure(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := figurePage{Name: r.PathValue("name"), Job: q.Get("job"), Scalars: q["scalar"],
		Filter: resultsdb.RunFilter{Job: q.Get("job"), Experiment: q.Get("experiment"), Backend: q.Get("backend")}}
	var err error
	if p.Job != "" {
		err = s.judged(&p)
	}
	if err == nil && !p.Judged {
		err = s.unjudged(&p)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Chart = plot(p.Points)
	s.render(w, r, "figure", p.Name, p)
}

// judged fills p from the trend series of p.Job named p.Name, if any.
func (s *Server) judged(p *figurePage) error {
	series, err := trend.Read(s.db, trend.Selection{Job: p.Job, Scalars: p.Scalars})
	if err != nil {
		return err
	}
	i := -1
	for k := range series {
		// A job on several backends has a series per backend: the
		// page's backend filter picks one.
		if series[k].Figure == p.Name && (series[k].Backend == "" || p.Filter.Backend == "" || series[k].Backend == p.Filter.Backend) {
			i = k
		}
	}
	if i < 0 {
		return nil
	}
	p.Judged, p.Command = true, trendCommand(p.Job, p.Scalars)
	p.Finding = trend.Analyze(series, trend.Options{})[i]
	sr := series[i]
	p.Unit = sr.Unit
	vals, err := sr.Values()
	if err != nil {
		return err
	}
	// The change's first night is marked moved (a regression) or
	// improved; the nights since a regression, after.
	first, since := "improved", ""
	if p.Finding.Regression {
		first, since = "moved", "after"
	}
	mark := ""
	for k, n := range sr.Nights {
		pt := figurePoint{Night: n.Night, Run: n.Run, Revision: n.Revision, Value: vals[k], Has: !math.IsNaN(vals[k]), Shown: "(none)",
			N: len(n.Samples)}
		if sr.Kind == trend.Count {
			pt.N = n.Events
		}
		if p.Finding.Moved && n.Night == p.Finding.Since {
			mark = first
		} else if mark != "" {
			mark = since
		}
		pt.Mark = mark
		if pt.Has {
			pt.Shown = fmt.Sprintf("%.6g", pt.Value)
		}
		p.Points = append(p.Points, pt)
	}
	return nil
}

// unjudged fills p from the figures table: one value per run, unmarked.
func (s *Server) unjudged(p *figurePage) error {
	series, err := s.db.Series(p.Filter, p.Name)
	if err != nil {
		return err
	}
	if len(series) == 0 {
		return notFound("no run has a figure %q%s", p.Name, describeFilter(p.Filter))
	}
	if p.Job != "" {
		q := url.Values{"job": {p.Job}, "scalar": append(slices.Clone(p.Scalars), p.Name)}
		p.ScalarURL = "/figures/" + url.PathEscape(p.Name) + "?" + q.Encode()
	}
	for _, pt := range series {
		if p.Unit == "" {
			p.Unit = pt.Unit
		}
		fp := figurePoint{Night: pt.Campaign, Run: pt.Run, Revision: pt.Revision, Value: pt.Value.V, Has: pt.Value.Valid,
			Shown: "(none)", N: pt.N}
		if pt.Dirty {
			fp.Revision += "-dirty"
		}
		if fp.Has {
			fp.Shown = fmt.Sprintf("%.6g", fp.Value)
		}
		p.Points = append(p.Points, fp)
	}
	return nil
}

// plot places the points on the chart: x by night, y by value.
func plot(ps []figurePoint) chart {
	c := chart{W: chartW, H: chartH}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		if p.Has {
			lo, hi = min(lo, p.Value), max(hi, p.Value)
		}
	}
	if math.IsInf(lo, 0) {
		return c
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	c.Lo, c.Hi = fmt.Sprintf("%.4g", lo), fmt.Sprintf("%.4g", hi)
	var line []string
	for i := range ps {
		x := chartPad
		if len(ps) > 1 {
			x += float64(i) * (chartW - 2*chartPad) / float64(len(ps)-1)
		}
		ps[i].X = x
		if !ps[i].Has {
			continue
		}
		ps[i].Y = chartH - chartPad - (ps[i].Value-lo)/(hi-lo)*(chartH-2*chartPad)
		line = append(line, fmt.Sprintf("%.1f,%.1f", x, ps[i].Y))
	}
	c.Line = strings.Join(line, " ")
	return c
}

// describeFilter says which runs a filter selects, for messages.
func describeFilter(f resultsdb.RunFilter) string {
	var parts []string
	for _, kv := range [][2]string{{"job", f.Job}, {"experiment", f.Experiment}, {"backend", f.Backend}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " among the runs of " + strings.Join(parts, ", ")
}

// figureURL is the page of figure name among the runs like run: the same
// job in a campaign, or the same experiment and backend.
func figureURL(name string, run resultsdb.Run) string {
	q := url.Values{}
	if run.Job != "" {
		q.Set("job", run.Job)
	} else {
		q.Set("experiment", run.Experiment)
		q.Set("backend", run.Backend)
	}
	return "/figures/" + url.PathEscape(name) + "?" + q.Encode()
}

// sampleFigures are the trend series a stored sample gives (as
// analysis/trend.Read names them): its distribution and its quantiles.
func sampleFigures(sample string) []string {
	out := []string{sample}
	for _, q := range trend.SampleQuantiles {
		out = append(out, sample+" p"+strconv.FormatFloat(q*100, 'f', -1, 64))
	}
	return out
}

// jobPage is every figure of a job at its latest night: what harness
// trend --job J --all prints, regressions first.
type jobPage struct {
	Job      string
	Command  string
	Findings []trend.Finding
	Moved    int
}

// job serves the findings of every series of one job.
func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	job, scalars := r.URL.Query().Get("job"), r.URL.Query()["scalar"]
	if job == "" {
		s.fail(w, r, badRequest("trend: want a job, ?job=NAME"))
		return
	}
	series, err := trend.Read(s.db, trend.Selection{Job: job, Scalars: scalars})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(series) == 0 {
		s.fail(w, r, notFound("job %q has no series harness trend judges (no samples or counts in its runs of a campaign)", job))
		return
	}
	p := jobPage{Job: job, Command: trendCommand(job, scalars), Findings: trend.Analyze(series, trend.Options{})}
	rank := func(f trend.Finding) int {
		switch {
		case f.Regression:
			return 0
		case f.Moved:
			return 1
		case !f.Judged:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(p.Findings, func(a, b trend.Finding) int { return rank(a) - rank(b) })
	for _, f := range p.Findings {
		if f.Moved {
			p.Moved++
		}
	}
	s.render(w, r, "job", "job "+job+" across nights", p)
}

// trendCommand is the harness trend command that judges what a page
// shows: the same job, the same scalars, every figure printed.
func trendCommand(job string, scalars []string) string {
	cmd := "harness trend --job " + job
	for _, sc := range scalars {
		cmd += " --scalar " + sc
	}
	return cmd + " --all"
}
