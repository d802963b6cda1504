package tokenpassing

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The fault plots follow Jepsen's perf plots (STYLE.md): an overview of
// the whole run with fault periods shaded, then one zoomed window around
// each failure or loss, where a strip of thousands of holds across the
// whole run shows nothing. They draw plain data, so any protocol's
// history can feed them.

// Fault kinds and event kinds of a FaultTimeline.
const (
	FaultOutage  = "outage"
	FaultCrash   = "crash" // an instant: a crash or a leave
	EventLoss    = "loss"
	EventFailure = "failure"
)

// DefaultMaxZooms caps the zoomed windows: a 20-day run has some sixty
// failures, and a report of sixty images is read by nobody.
const DefaultMaxZooms = 12

// FaultTimeline is what the fault plots draw. Wall times are seconds on
// the run's shared clock (from its first event); paper times are seconds
// on the paper timeline, where replica r replays shard r.
type FaultTimeline struct {
	Acquired []float64       // paper time of every acquisition, all replicas
	PaperEnd float64         // the paper timeline's end (0: the last acquisition)
	Holds    []TimelineHold  // every holding interval
	Faults   []TimelineFault // outages and crashes
	Events   []TimelineEvent // failures and losses, each gets a zoom (up to MaxZooms)
	MaxZooms int             // 0: DefaultMaxZooms
}

// TimelineHold is one agent holding one token.
type TimelineHold struct {
	Agent    string
	Replica  int
	Token    string
	From, To float64 // wall s
}

// TimelineFault is an injected fault; a crash has From == To.
type TimelineFault struct {
	Kind     string // FaultOutage or FaultCrash
	Label    string // "outage A>C", "crash B"
	Replica  int
	From, To float64 // wall s
	Paper    float64 // paper s at From
}

// TimelineEvent is a failure or a loss.
type TimelineEvent struct {
	Kind    string // EventLoss or EventFailure
	Label   string // what happened, for the zoom's title
	Replica int
	At      float64 // wall s
	Paper   float64 // paper s
}

// FaultPlots is what WriteFaultPlots wrote: file names relative to its
// directory, the overview first.
type FaultPlots struct {
	Files     []string
	Zoomed    int // events with a zoomed window
	NotZoomed int // events beyond the cap
}

// Note says how many events were not zoomed, or "" when all were.
func (fp FaultPlots) Note() string {
	if fp.NotZoomed == 0 {
		return ""
	}
	return fmt.Sprintf("Zoomed windows: %d of %d failures and losses (losses first, then the earliest failures); %d not plotted.",
		fp.Zoomed, fp.Zoomed+fp.NotZoomed, fp.NotZoomed)
}

// WriteFaultPlots draws the overview (overview.png and .svg) and the
// zoomed windows (zoom_NN_KIND.png) into dir, which must exist.
func WriteFaultPlots(dir string, t FaultTimeline) (FaultPlots, error) {
	zs, notZoomed := t.zooms()
	fp := FaultPlots{Zoomed: len(zs), NotZoomed: notZoomed}
	var errs []error
	save := func(p *plot.Plot, name string, w, h vg.Length) {
		if err := p.Save(w, h, filepath.Join(dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		fp.Files = append(fp.Files, name)
	}
	if len(t.Acquired) > 0 {
		ov := t.overview(zs)
		save(ov, "overview.png", 12*vg.Inch, 4*vg.Inch)
		save(ov, "overview.svg", 12*vg.Inch, 4*vg.Inch)
	}
	lanes := t.lanes()
	for i, z := range zs {
		if len(lanes[z.ev.Replica]) == 0 {
			continue // nobody of this replica ever held a token: nothing to draw
		}
		save(t.zoomPlot(z, i+1, len(zs), lanes[z.ev.Replica]), fmt.Sprintf("zoom_%02d_%s.png", i+1, z.ev.Kind), 10*vg.Inch, 3.5*vg.Inch)
	}
	return fp, errors.Join(errs...)
}

// zoom is one zoomed window around an event, in wall s.
type zoom struct {
	ev       TimelineEvent
	from, to float64
}

// zooms picks the events to zoom on, losses first (rarer, and each one
// needs explaining), then failures, each kind earliest on the wall clock
// first (replicas run side by side: this spreads the windows over the
// paper timeline), up to the cap; the windows come back in paper time
// order, as the overview numbers them. Each window spans a few
// visits either side of its event, widened to show whole the faults of
// its replica that it touches, with a margin (up to four times as wide).
func (t *FaultTimeline) zooms() ([]zoom, int) {
	limit := t.MaxZooms
	if limit <= 0 {
		limit = DefaultMaxZooms
	}
	evs := slices.Clone(t.Events)
	slices.SortStableFunc(evs, func(a, b TimelineEvent) int {
		if (a.Kind == EventLoss) != (b.Kind == EventLoss) {
			if a.Kind == EventLoss {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.At, b.At)
	})
	notZoomed := max(0, len(evs)-limit)
	evs = evs[:min(len(evs), limit)]
	slices.SortStableFunc(evs, func(a, b TimelineEvent) int { return cmp.Or(cmp.Compare(a.Paper, b.Paper), cmp.Compare(a.At, b.At)) })
	half := t.halfWidths()
	out := make([]zoom, 0, len(evs))
	for _, e := range evs {
		w, ok := half[e.Replica]
		if !ok {
			w = minHalfWidth
		}
		z := zoom{ev: e, from: e.At - w, to: e.At + w}
		for _, f := range t.Faults {
			if f.Replica == e.Replica && f.From <= z.to && f.To >= z.from {
				// A margin around the fault shows circulation before and after it.
				z.from = min(z.from, max(f.From-w/2, e.At-4*w))
				z.to = max(z.to, min(f.To+w/2, e.At+4*w))
			}
		}
		out = append(out, z)
	}
	return out, notZoomed
}

// Half a zoomed window is four visits (acquisition to acquisition, the
// median of the replica), at least a second: in compressed time a visit
// is a few hundredths of a second of wall time, an outage seconds.
const (
	minHalfWidth = 1.0
	maxHalfWidth = 120.0
)

func (t *FaultTimeline) halfWidths() map[int]float64 {
	starts := map[int][]float64{}
	for _, h := range t.Holds {
		starts[h.Replica] = append(starts[h.Replica], h.From)
	}
	out := map[int]float64{}
	for r, s := range starts {
		slices.Sort(s)
		gaps := make([]float64, 0, len(s))
		for i := 1; i < len(s); i++ {
			gaps = append(gaps, s[i]-s[i-1])
		}
		w := minHalfWidth
		if len(gaps) > 0 {
			slices.Sort(gaps)
			w = 4 * gaps[len(gaps)/2]
		}
		out[r] = min(max(w, minHalfWidth), maxHalfWidth)
	}
	return out
}

// lanes lists, per replica, the agents that held a token, sorted.
func (t *FaultTimeline) lanes() map[int][]string {
	seen := map[int]map[string]bool{}
	for _, h := range t.Holds {
		if seen[h.Replica] == nil {
			seen[h.Replica] = map[string]bool{}
		}
		seen[h.Replica][h.Agent] = true
	}
	out := map[int][]string{}
	for r, m := range seen {
		for a := range m {
			out[r] = append(out[r], a)
		}
		sort.Strings(out[r])
	}
	return out
}

// tokenColor is the first token's plotutil colour (blue): red is for
// crashes and losses.
const tokenColor = 2

var (
	outageShade = color.NRGBA{R: 255, G: 140, B: 0, A: 70}
	crashShade  = color.NRGBA{R: 200, G: 0, B: 0, A: 110}
	lossColor   = color.NRGBA{R: 200, G: 0, B: 0, A: 255}
	eventColor  = color.NRGBA{A: 255}
	otherColor  = color.NRGBA{R: 120, G: 120, B: 120, A: 255}
)

// shade is a filled rectangle without outline.
func shade(p *plot.Plot, x0, x1, y0, y1 float64, c color.Color) *plotter.Polygon {
	poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
	if err != nil {
		return nil // only for NaN or infinite bounds: nothing to draw
	}
	poly.Color = c
	poly.LineStyle.Width = 0
	p.Add(poly)
	return poly
}

// vline is a vertical line from y0 to y1.
func vline(p *plot.Plot, x, y0, y1 float64, c color.Color, w vg.Length, dashed bool) *plotter.Line {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
	if err != nil {
		return nil
	}
	l.Color, l.Width = c, w
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	return l
}

// paperUnit picks the overview's time unit for a paper span in seconds.
func paperUnit(span float64) (string, float64) {
	switch {
	case span >= 3*86400:
		return "days", 86400
	case span >= 3*3600:
		return "hours", 3600
	}
	return "minutes", 60
}

// binMinutes picks a bin width (paper minutes) giving at most maxBins bins:
// one per minute when the run is short, else a round multiple, so that a
// 20-day run is a few hundred readable steps, not 28,800.
func binMinutes(span float64) float64 {
	const maxBins = 600
	for _, m := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440} {
		if span/(60*m) <= maxBins {
			return m
		}
	}
	return math.Ceil(span / 60 / maxBins)
}

// rateSteps is the acquisitions per minute in bins of bw seconds over
// [0, end], as the corners of a post-step line (x in seconds). The last
// bin ends at end: its rate is over its own width, so a run that stops
// mid-bin shows no false dip, and one shorter than half a bin joins its
// neighbour, so that the last acquisition makes no spike either.
func rateSteps(acq []float64, end, bw float64) plotter.XYs {
	n := max(1, int(math.Ceil(end/bw)))
	if n > 1 && end-float64(n-1)*bw < bw/2 {
		n--
	}
	counts := make([]float64, n)
	for _, a := range acq {
		if a >= 0 && a <= end {
			counts[min(n-1, int(a/bw))]++
		}
	}
	pts := make(plotter.XYs, n+1)
	for i, c := range counts {
		from, to := float64(i)*bw, float64(i+1)*bw
		if i == n-1 {
			to = end
		}
		pts[i] = plotter.XY{X: from, Y: c / ((to - from) / 60)}
	}
	pts[n] = plotter.XY{X: end, Y: pts[n-1].Y}
	return pts
}

// overview is acquisitions per paper minute, all replicas together (each
// fills its own shard of the paper timeline, so the sum is the paper's
// one-run rate), with faults shaded and events marked; the zoomed events
// carry their window's number.
func (t *FaultTimeline) overview(zs []zoom) *plot.Plot {
	end := max(slices.Max(t.Acquired), t.PaperEnd, 60)
	span := end
	for _, f := range t.Faults {
		span = max(span, f.Paper)
	}
	unitName, unit := paperUnit(span)
	bm := binMinutes(end)
	pts := rateSteps(t.Acquired, end, bm*60)
	top := 1.0
	for i := range pts {
		top = max(top, pts[i].Y)
		pts[i].X /= unit
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Acquisitions per paper minute (%g-minute bins, all replicas), faults shaded", bm)
	p.X.Label.Text = "paper time (" + unitName + ")"
	p.Y.Label.Text = "acquisitions / min"
	p.Y.Min, p.Y.Max = 0, top*1.3
	p.X.Min, p.X.Max = 0, span/unit
	// A fault lasts seconds on an axis of days: widen it to stay visible.
	minW := span / 400 / unit
	var outageP, crashP *plotter.Polygon
	for _, f := range t.Faults {
		x := f.Paper / unit
		w := max((f.To-f.From)/unit, minW)
		if f.Kind == FaultCrash {
			if s := shade(p, x-w/2, x+w/2, 0, top*1.3, crashShade); s != nil {
				crashP = s
			}
		} else if s := shade(p, x, x+w, 0, top*1.3, outageShade); s != nil {
			outageP = s
		}
	}
	l, err := plotter.NewLine(pts)
	if err == nil {
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(tokenColor)
		p.Add(l)
		p.Legend.Add("acquisitions", l)
	}
	if outageP != nil {
		p.Legend.Add("outage", outageP)
	}
	if crashP != nil {
		p.Legend.Add("crash", crashP)
	}
	var losses, fails plotter.XYs
	for _, e := range t.Events {
		if e.Kind == EventLoss {
			losses = append(losses, plotter.XY{X: e.Paper / unit, Y: top * 1.12})
		} else {
			fails = append(fails, plotter.XY{X: e.Paper / unit, Y: top * 1.05})
		}
	}
	mark := func(xys plotter.XYs, g draw.GlyphDrawer, c color.Color, name string) {
		if len(xys) == 0 {
			return
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return
		}
		s.GlyphStyle = draw.GlyphStyle{Shape: g, Color: c, Radius: vg.Points(3)}
		p.Add(s)
		p.Legend.Add(name, s)
	}
	mark(fails, draw.CircleGlyph{}, eventColor, fmt.Sprintf("network failure tolerated (%d)", len(fails)))
	mark(losses, draw.PyramidGlyph{}, lossColor, fmt.Sprintf("token loss (%d)", len(losses)))
	if len(zs) > 0 {
		lbl := plotter.XYLabels{}
		for i, z := range zs {
			lbl.XYs = append(lbl.XYs, plotter.XY{X: z.ev.Paper / unit, Y: top * 1.18})
			lbl.Labels = append(lbl.Labels, fmt.Sprint(i+1))
		}
		if ls, err := plotter.NewLabels(lbl); err == nil {
			for i := range ls.TextStyle {
				ls.TextStyle[i].Font.Size = vg.Points(8)
				ls.TextStyle[i].XAlign = draw.XCenter
			}
			p.Add(ls)
		}
	}
	p.Legend.Top = false
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p
}

// zoomPlot draws the holders of the event's replica in its window, time
// relative to the event, the faults shaded and the other events dashed.
func (t *FaultTimeline) zoomPlot(z zoom, n, of int, lanes []string) *plot.Plot {
	e := z.ev
	row := map[string]float64{}
	for i, a := range lanes {
		row[a] = float64(i)
	}
	rel := func(x float64) float64 { return x - e.At }
	lo, hi := -0.5, float64(len(lanes))-0.5
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d/%d %s: %s\nreplica %d, wall %.3f s, paper %.0f s (day %.2f)",
		n, of, e.Kind, e.Label, e.Replica, e.At, e.Paper, e.Paper/86400)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = "wall time from the event (s)"
	p.X.Min, p.X.Max = rel(z.from), rel(z.to)
	// Room above the lanes for the faults' labels, below for the legend.
	p.Y.Min, p.Y.Max = lo-0.8, hi+0.6

	// Faults first, holds on top. Both directions of one outage are one
	// shade with both labels.
	type key struct{ from, to int64 }
	outages := map[key][]string{}
	var order []key
	var outageP, crashP plot.Thumbnailer
	for _, f := range t.Faults {
		if f.Replica != e.Replica || f.To < z.from || f.From > z.to {
			continue
		}
		if f.Kind == FaultCrash {
			crashP = vline(p, rel(f.From), lo, hi, crashShade, vg.Points(4), false)
			addLabel(p, rel(f.From), hi+0.3, f.Label, lossColor)
			continue
		}
		k := key{int64(f.From * 1e3), int64(f.To * 1e3)}
		if outages[k] == nil {
			order = append(order, k)
		}
		outages[k] = append(outages[k], strings.TrimPrefix(f.Label, "outage "))
	}
	for _, k := range order {
		from, to := max(float64(k.from)/1e3, z.from), min(float64(k.to)/1e3, z.to)
		if s := shade(p, rel(from), rel(to), lo, hi, outageShade); s != nil {
			outageP = s
		}
		addLabel(p, (rel(from)+rel(to))/2, hi+0.3, "outage "+strings.Join(outages[k], ", "), color.Black)
	}
	tokColor := map[string]int{}
	var toks []string
	tokLine := map[string]*plotter.Line{}
	for _, h := range t.Holds {
		y, ok := row[h.Agent]
		if !ok || h.Replica != e.Replica || h.To < z.from || h.From > z.to {
			continue
		}
		ci, ok := tokColor[h.Token]
		if !ok {
			ci = len(tokColor)
			tokColor[h.Token] = ci
			toks = append(toks, h.Token)
		}
		l, err := plotter.NewLine(plotter.XYs{{X: rel(max(h.From, z.from)), Y: y}, {X: rel(min(h.To, z.to)), Y: y}})
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(tokenColor + ci)
		l.Width = vg.Points(8)
		p.Add(l)
		tokLine[h.Token] = l
	}
	for _, o := range t.Events {
		if o.Replica == e.Replica && o != e && o.At >= z.from && o.At <= z.to {
			vline(p, rel(o.At), lo, hi, otherColor, vg.Points(1), true)
		}
	}
	c := color.Color(eventColor)
	if e.Kind == EventLoss {
		c = lossColor
	}
	evLine := vline(p, 0, lo, hi, c, vg.Points(1.5), false)
	for _, tok := range toks {
		p.Legend.Add("holds token "+short(tok), tokLine[tok])
	}
	if outageP != nil {
		p.Legend.Add("outage", outageP)
	}
	if crashP != nil {
		p.Legend.Add("crash", crashP)
	}
	if evLine != nil {
		p.Legend.Add(e.Kind, evLine)
	}
	p.Legend.Top = false
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.NominalY(lanes...)
	return p
}

func addLabel(p *plot.Plot, x, y float64, s string, c color.Color) {
	ls, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{s}})
	if err != nil {
		return
	}
	ls.TextStyle[0].Font.Size = vg.Points(8)
	ls.TextStyle[0].XAlign = draw.XCenter
	ls.TextStyle[0].Color = c
	p.Add(ls)
}

// short is a token id ("1795618260346651987@A.r7") cut for a legend,
// keeping who generated it.
func short(tok string) string {
	if i := strings.LastIndex(tok, "@"); i > 8 {
		return tok[:6] + "…" + tok[i:]
	}
	return tok
}
