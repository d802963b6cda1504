package tokenpassing

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/results"
)

// writePlots draws the latency CDF per direction, the return-time
// histogram and the fault plots (plots_faults.go). It returns the plots'
// paths relative to the results directory and a note on the events not
// zoomed.
func writePlots(dir string, s *summary, h *history, hs []hold, paper map[int]time.Duration, lat map[string][]float64) ([]string, string, error) {
	out := filepath.Join(dir, results.PlotsDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, "", err
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

	// The holders timeline: an overview and zoomed windows.
	fp, err := WriteFaultPlots(out, faultTimeline(s, h, hs, paper))
	for _, f := range fp.Files {
		if filepath.Ext(f) == ".png" { // the SVG is the overview again, to zoom in a browser
			files = append(files, filepath.Join(results.PlotsDir, f))
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	return files, fp.Note(), errors.Join(errs...)
}

// faultTimeline is the plain data of the fault plots: wall times from the
// first event, paper times from the replicas' paper clocks.
func faultTimeline(s *summary, h *history, hs []hold, paper map[int]time.Duration) FaultTimeline {
	t := FaultTimeline{PaperEnd: s.PaperSeconds}
	if len(h.evs) == 0 {
		return t
	}
	t0 := h.evs[0].mono
	sec := func(m int64) float64 { return float64(m-t0) / 1e9 }
	rep := func(inst string) int {
		if a := h.agents[inst]; a != nil {
			return a.replica
		}
		return 0
	}
	for i, e := range h.evs {
		if e.kind == eventlog.TokenAcquired {
			t.Acquired = append(t.Acquired, paper[i].Seconds())
		}
	}
	t.Holds = make([]TimelineHold, len(hs))
	for i, hd := range hs {
		t.Holds[i] = TimelineHold{Agent: hd.agent, Replica: rep(hd.agent), Token: hd.token, From: sec(hd.from), To: sec(hd.to)}
	}
	open := map[string]int64{}
	for _, e := range h.harness {
		switch e.Kind {
		case eventlog.OutageStart:
			open[e.Link] = e.MonoNS
		case eventlog.OutageEnd:
			s0, ok := open[e.Link]
			if !ok {
				continue
			}
			delete(open, e.Link)
			from, _, _ := strings.Cut(e.Link, ">")
			t.Faults = append(t.Faults, TimelineFault{Kind: FaultOutage, Label: "outage " + e.Link, Replica: rep(from),
				From: sec(s0), To: sec(e.MonoNS), Paper: h.paperAt(paper, s0, from).Seconds()})
		case eventlog.AgentCrash, eventlog.AgentLeave:
			verb := "crash "
			if e.Kind == eventlog.AgentLeave {
				verb = "leave "
			}
			t.Faults = append(t.Faults, TimelineFault{Kind: FaultCrash, Label: verb + e.Peer, Replica: rep(e.Peer),
				From: sec(e.MonoNS), To: sec(e.MonoNS), Paper: h.paperAt(paper, e.MonoNS, e.Peer).Seconds()})
		}
	}
	for link, s0 := range open { // not ended: the run stopped during it
		from, _, _ := strings.Cut(link, ">")
		t.Faults = append(t.Faults, TimelineFault{Kind: FaultOutage, Label: "outage " + link, Replica: rep(from),
			From: sec(s0), To: sec(h.runEndMono()), Paper: h.paperAt(paper, s0, from).Seconds()})
	}
	for _, f := range h.failures() {
		t.Events = append(t.Events, TimelineEvent{Kind: EventFailure, Replica: rep(f.From), At: sec(f.Mono), Paper: h.paperAt(paper, f.Mono, f.From).Seconds(),
			Label: fmt.Sprintf("pass %s>%s failed, detected by %s", f.From, f.To, strings.ReplaceAll(f.DetectedBy, "_", " "))})
	}
	// The losses' instants do not depend on the capture, only some of
	// their causes do: those come from the summary (one loss per token).
	cause := map[string]string{}
	for _, l := range s.Losses {
		cause[l.Token] = l.Cause
	}
	for _, l := range h.losses(hs, &captureFacts{}) {
		c := cause[l.Token]
		if c == "" {
			c = l.Cause
		}
		t.Events = append(t.Events, TimelineEvent{Kind: EventLoss, Replica: rep(l.Agent), At: sec(l.Mono), Paper: h.paperAt(paper, l.Mono, l.Agent).Seconds(),
			Label: fmt.Sprintf("token %s lost at %s (%s)", short(l.Token), l.Agent, c)})
	}
	return t
}
