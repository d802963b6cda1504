package analysis

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/results"
)

// writePlots draws the latency CDF per direction, the return-time
// histogram and the timeline of holders with fault periods shaded. It
// returns the plots' paths relative to the results directory.
func writePlots(dir string, s *Summary, h *history, hs []hold, paper map[int]time.Duration, lat map[string][]float64) ([]string, error) {
	out := filepath.Join(dir, results.PlotsDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var files []string
	var errs []error
	save := func(p *plot.Plot, name string, w, hgt vg.Length) {
		if err := p.Save(w, hgt, filepath.Join(out, name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		files = append(files, filepath.Join(results.PlotsDir, name))
	}

	// Latency CDF per direction, log-scaled latency.
	p := plot.New()
	p.Title.Text = "Pass latency, cumulative distribution per direction"
	p.X.Label.Text = "latency (ms)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Label.Text = "fraction of passes"
	links := make([]string, 0, len(lat))
	for k := range lat {
		links = append(links, k)
	}
	sort.Strings(links)
	for i, k := range links {
		xs := slices.Clone(lat[k])
		slices.Sort(xs)
		pts := make(plotter.XYs, 0, min(len(xs), 2000))
		step := max(1, len(xs)/2000)
		for j := 0; j < len(xs); j += step {
			pts = append(pts, plotter.XY{X: max(xs[j]*1000, 0.01), Y: float64(j+1) / float64(len(xs))})
		}
		pts = append(pts, plotter.XY{X: max(xs[len(xs)-1]*1000, 0.01), Y: 1})
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		p.Add(l)
		p.Legend.Add(k, l)
	}
	p.Legend.Top, p.Legend.Left = false, false
	if len(links) > 0 {
		save(p, "latency_cdf.png", 8*vg.Inch, 5*vg.Inch)
	}

	// Return time histogram, per agent pooled over replicas.
	p = plot.New()
	p.Title.Text = "Return time (paper time), all agents"
	p.X.Label.Text = "return time (s)"
	p.Y.Label.Text = "hits"
	var rets plotter.Values
	byInst := map[string][]float64{}
	for i, e := range h.evs {
		if e.kind == eventlog.TokenAcquired {
			byInst[e.agent] = append(byInst[e.agent], paper[i].Seconds())
		}
	}
	for _, ts := range byInst {
		for i := 1; i < len(ts); i++ {
			rets = append(rets, ts[i]-ts[i-1])
		}
	}
	if len(rets) > 1 {
		hist, err := plotter.NewHist(rets, 60)
		if err == nil {
			p.Add(hist)
			save(p, "return_time_hist.png", 8*vg.Inch, 5*vg.Inch)
		}
	}

	// Holders over time for replica 0 (wall seconds from the first event),
	// with outages and crashes shaded.
	p = plot.New()
	p.Title.Text = "Token holders over time (replica 0), faults shaded"
	p.X.Label.Text = "wall time (s)"
	p.Y.Label.Text = "agent"
	var agents []string
	for _, a := range h.agents {
		if a.replica == 0 {
			agents = append(agents, a.instance)
		}
	}
	sort.Strings(agents)
	row := map[string]float64{}
	for i, a := range agents {
		row[a] = float64(i)
	}
	var t0 int64 = -1
	for _, e := range h.evs {
		if t0 < 0 || e.mono < t0 {
			t0 = e.mono
		}
		break
	}
	sec := func(m int64) float64 { return float64(m-t0) / 1e9 }
	// Faults first, so holders draw on top.
	type span struct{ from, to float64 }
	var faults []span
	open := map[string]int64{}
	for _, e := range h.harness {
		switch e.Kind {
		case eventlog.OutageStart:
			open[e.Link] = e.MonoNS
		case eventlog.OutageEnd:
			if s0, ok := open[e.Link]; ok {
				faults = append(faults, span{sec(s0), sec(e.MonoNS)})
				delete(open, e.Link)
			}
		case eventlog.AgentCrash, eventlog.AgentLeave:
			faults = append(faults, span{sec(e.MonoNS), sec(e.MonoNS) + 0.05})
		}
	}
	top := float64(len(agents))
	for _, f := range faults {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: f.from, Y: -0.5}, {X: f.to, Y: -0.5}, {X: f.to, Y: top - 0.5}, {X: f.from, Y: top - 0.5}})
		if err == nil {
			poly.Color = color.RGBA{R: 255, G: 170, B: 170, A: 160}
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
	}
	tokColor := map[string]int{}
	drawn := 0
	for _, hd := range hs {
		y, ok := row[hd.agent]
		if !ok || drawn > 20000 {
			continue
		}
		ci, ok := tokColor[hd.token]
		if !ok {
			ci = len(tokColor)
			tokColor[hd.token] = ci
		}
		l, err := plotter.NewLine(plotter.XYs{{X: sec(hd.from), Y: y}, {X: sec(hd.to), Y: y}})
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(ci)
		l.Width = vg.Points(6)
		p.Add(l)
		drawn++
	}
	p.NominalY(agents...)
	if len(agents) > 0 {
		save(p, "holders_timeline.png", 12*vg.Inch, 3*vg.Inch)
	}
	return files, errors.Join(errs...)
}
