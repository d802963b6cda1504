package serve

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"

	"tokenbed/internal/resultsdb"
)

// Trend judges one figure's series, oldest night first, and returns the
// moves it finds. The statistics are analysis/trend's (`harness trend`):
// the harness wires its test in; the browser only shows what it says.
type Trend func(series []resultsdb.Point) ([]Move, error)

// Move is a night at which a figure moved.
type Move struct {
	Run      string // the first run after the move
	Revision string // the revision that run ran: the first after which the figure moved
	Detail   string // the test, its statistic and its level
}

// figurePoint is one night of a figure's page.
type figurePoint struct {
	resultsdb.Point
	Move  *Move
	X, Y  float64 // in the chart's SVG coordinates
	Shown string  // the value, formatted
}

// figurePage is one figure across nights.
type figurePage struct {
	Name, Unit string
	Filter     resultsdb.RunFilter
	Points     []figurePoint
	Moves      []Move
	Wired      bool
	TrendErr   string
	Chart      chart
}

// chart is the series drawn as an inline SVG: no script.
type chart struct {
	W, H       float64
	Line       string // polyline points
	Lo, Hi     string // the axis' ends, formatted
	First, Max int
}

const chartW, chartH, chartPad = 720.0, 200.0, 12.0

// figure serves one figure's trend across nights: the runs the query's
// job, experiment and backend select.
func (s *Server) figure(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := figurePage{Name: r.PathValue("name"), Wired: s.trend != nil,
		Filter: resultsdb.RunFilter{Job: q.Get("job"), Experiment: q.Get("experiment"), Backend: q.Get("backend")}}
	series, err := s.db.Series(p.Filter, p.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(series) == 0 {
		s.fail(w, r, notFound("no run has a figure %q%s", p.Name, describeFilter(p.Filter)))
		return
	}
	byRun := map[string]*Move{}
	if s.trend != nil {
		if p.Moves, err = s.trend(series); err != nil {
			p.TrendErr = err.Error()
		}
		for i := range p.Moves {
			byRun[p.Moves[i].Run] = &p.Moves[i]
		}
	}
	for _, pt := range series {
		if p.Unit == "" {
			p.Unit = pt.Unit
		}
		fp := figurePoint{Point: pt, Move: byRun[pt.Run], Shown: "(none)"}
		if pt.Value.Valid {
			fp.Shown = fmt.Sprintf("%.6g", pt.Value.V)
		}
		p.Points = append(p.Points, fp)
	}
	p.Chart = plot(p.Points)
	s.render(w, r, "figure", p.Name, p)
}

// plot places the points on the chart: x by night, y by value.
func plot(ps []figurePoint) chart {
	c := chart{W: chartW, H: chartH}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		if p.Value.Valid {
			lo, hi = min(lo, p.Value.V), max(hi, p.Value.V)
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
		if !ps[i].Value.Valid {
			continue
		}
		ps[i].Y = chartH - chartPad - (ps[i].Value.V-lo)/(hi-lo)*(chartH-2*chartPad)
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

// figureURL is the trend page of figure name among the runs like run:
// the same job in a campaign, or the same experiment and backend.
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
