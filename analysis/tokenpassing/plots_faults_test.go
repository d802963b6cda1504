package tokenpassing

import (
	"tokenbed/analysis"

	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tokenbed/internal/results"
)

// synthTimeline is a run of replicas × 3 agents passing one token per
// replica round robin, holds wall s long with a pass of pass s between
// them, paper time 10 s per visit per replica shard; outages (2.5 s, on
// replicas in turn, at evenly spaced visits) each cause one failure
// 1.5 s in, and the last replica's holder crashes, losing its token, at
// its last visit.
func synthTimeline(replicas, visits, outages int) FaultTimeline {
	const hold, pass, paperVisit = 0.01, 0.06, 10.0
	shard := float64(visits) * paperVisit
	var t FaultTimeline
	agents := []string{"A", "B", "C"}
	inst := func(a string, r int) string {
		if r == 0 {
			return a
		}
		return fmt.Sprintf("%s.r%d", a, r)
	}
	for r := range replicas {
		for v := range visits {
			from := float64(v) * (hold + pass)
			t.Holds = append(t.Holds, TimelineHold{Agent: inst(agents[v%3], r), Replica: r, Token: fmt.Sprintf("t%d", r), From: from, To: from + hold})
			t.Acquired = append(t.Acquired, float64(r)*shard+float64(v)*paperVisit)
		}
	}
	for i := range outages {
		r := i % replicas
		v := (i/replicas + 1) * visits / (outages/replicas + 2)
		at := float64(v) * (hold + pass)
		paper := float64(r)*shard + float64(v)*paperVisit
		a, b := inst(agents[v%3], r), inst(agents[(v+1)%3], r)
		t.Faults = append(t.Faults, TimelineFault{Kind: FaultOutage, Label: "outage " + a + ">" + b, Replica: r, From: at, To: at + 2.5, Paper: paper})
		t.Events = append(t.Events, TimelineEvent{Kind: EventFailure, Label: "pass " + a + ">" + b + " failed", Replica: r, At: at + 1.5, Paper: paper + 1.5})
	}
	r := replicas - 1
	last := t.Holds[len(t.Holds)-1]
	t.Faults = append(t.Faults, TimelineFault{Kind: FaultCrash, Label: "crash " + last.Agent, Replica: r, From: last.To, To: last.To, Paper: float64(r+1) * shard})
	t.Events = append(t.Events, TimelineEvent{Kind: EventLoss, Label: "token lost", Replica: r, At: last.To, Paper: float64(r+1) * shard})
	return t
}

// checkImages decodes every file written: PNG with image/png, SVG as XML
// whose root is <svg>.
func checkImages(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(f) {
		case ".png":
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if r := img.Bounds(); r.Dx() < 100 || r.Dy() < 100 {
				t.Errorf("%s: %v: too small to read", f, r)
			}
		case ".svg":
			var root struct{ XMLName xml.Name }
			if err := xml.Unmarshal(b, &root); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if root.XMLName.Local != "svg" {
				t.Errorf("%s: root element %q, want svg", f, root.XMLName.Local)
			}
		default:
			t.Errorf("%s: neither PNG nor SVG", f)
		}
	}
}

func TestWriteFaultPlots(t *testing.T) {
	for _, c := range []struct {
		name              string
		outages, maxZooms int
		wantZooms         int
		wantFirst         string // the first zoom's file
	}{
		{"all zoomed", 4, 0, 5, "zoom_01_failure.png"},
		{"capped", 4, 2, 2, "zoom_01_failure.png"},
		{"loss first", 4, 1, 1, "zoom_01_loss.png"},
		{"no failure", 0, 3, 1, "zoom_01_loss.png"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := synthTimeline(2, 600, c.outages)
			tl.MaxZooms = c.maxZooms
			dir := t.TempDir()
			fp, err := WriteFaultPlots(dir, tl)
			if err != nil {
				t.Fatal(err)
			}
			events := c.outages + 1
			if fp.Zoomed != c.wantZooms || fp.NotZoomed != events-c.wantZooms {
				t.Errorf("zoomed %d, not zoomed %d; want %d and %d", fp.Zoomed, fp.NotZoomed, c.wantZooms, events-c.wantZooms)
			}
			want := []string{"overview.png", "overview.svg"}
			if len(fp.Files) != len(want)+c.wantZooms || fp.Files[0] != want[0] || fp.Files[1] != want[1] || fp.Files[2] != c.wantFirst {
				t.Errorf("files %v: want %v then %d zooms, the first %s", fp.Files, want, c.wantZooms, c.wantFirst)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != len(fp.Files) {
				t.Errorf("%d files in the directory, %d reported", len(ents), len(fp.Files))
			}
			checkImages(t, dir, fp.Files)
			if note := fp.Note(); (fp.NotZoomed > 0) != strings.Contains(note, fmt.Sprintf("%d not plotted", fp.NotZoomed)) {
				t.Errorf("note %q for %d not zoomed", note, fp.NotZoomed)
			}
		})
	}
}

// Every window holds its event, and the whole of a fault of its replica
// that it touches, with room before and after it.
func TestZoomWindows(t *testing.T) {
	tl := synthTimeline(3, 900, 6)
	zs, not := tl.zooms()
	if len(zs) != 7 || not != 0 {
		t.Fatalf("%d windows, %d not zoomed; want 7 and 0", len(zs), not)
	}
	for i, z := range zs {
		if z.from >= z.ev.At || z.to <= z.ev.At {
			t.Errorf("window %d [%.3f, %.3f] does not hold its event at %.3f", i+1, z.from, z.to, z.ev.At)
		}
		if i > 0 && z.ev.Paper < zs[i-1].ev.Paper {
			t.Errorf("window %d: event at paper %.3f before window %d's at %.3f", i+1, z.ev.Paper, i, zs[i-1].ev.Paper)
		}
		for _, f := range tl.Faults {
			if f.Replica == z.ev.Replica && f.From <= z.ev.At && f.To >= z.ev.At && (f.From <= z.from || f.To >= z.to) {
				t.Errorf("window %d [%.3f, %.3f] cuts its fault [%.3f, %.3f]", i+1, z.from, z.to, f.From, f.To)
			}
		}
		// A visit is 0.07 s: the one-second minimum half width, widened
		// to the 2.5 s outage and a margin, and never beyond four halves.
		if w := z.to - z.from; w < 2 || w > 8 {
			t.Errorf("window %d is %.3f s wide, want 2 to 8", i+1, w)
		}
	}
	// The cap keeps the loss, whatever its time, then the earliest failures.
	tl.MaxZooms = 3
	zs, not = tl.zooms()
	if len(zs) != 3 || not != 4 || zs[2].ev.Kind != EventLoss || zs[0].ev.At > zs[1].ev.At {
		t.Errorf("capped at 3: %d windows (%d not zoomed), kinds %s %s %s", len(zs), not, zs[0].ev.Kind, zs[1].ev.Kind, zs[2].ev.Kind)
	}
	for _, z := range zs[:2] {
		for _, o := range tl.Events {
			if o.Kind == EventFailure && o.At < z.ev.At && o != zs[0].ev {
				t.Errorf("failure at %.3f zoomed while an earlier one at %.3f was not", z.ev.At, o.At)
			}
		}
	}
}

// The glue reads faults and events from a literal history: an outage
// the harness logged, the failure it caused, a crash, a loss.
func TestFaultTimelineFromHistory(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "testdata", "histories", "circulating.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// A is killed at 40 s holding the token: its log ends there, and
	// circulation with it.
	var kept []byte
	for _, line := range bytes.SplitAfter(base, []byte("\n")) {
		var e struct {
			Agent string
			Kind  string
			Mono  int64 `json:"mono_ns"`
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		if e.Mono <= 40e9 || e.Agent == "harness" || (e.Agent == "B" && e.Kind == "agent_stopping") {
			kept = append(kept, line...)
		}
	}
	extra := `{"agent":"harness","seq":10,"mono_ns":20000000000,"wall_ns":1700000020000000000,"kind":"outage_start","link":"A>B","reason":"loss"}
{"agent":"A","seq":1000,"mono_ns":21500000000,"wall_ns":1700000021500000000,"kind":"pass_failed","token":"1@A","session":99,"peer":"B","reason":"ack_timeout"}
{"agent":"harness","seq":11,"mono_ns":22500000000,"wall_ns":1700000022500000000,"kind":"outage_end","link":"A>B"}
{"agent":"harness","seq":12,"mono_ns":40000000000,"wall_ns":1700000040000000000,"kind":"agent_crash","peer":"A","reason":"SIGKILL"}
`
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(path, append(kept, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := readHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	hs := h.holds()
	paper := h.paperTimes(results.RunInfo{TimeScale: 1})
	tl := faultTimeline(&summary{&analysis.Summary{PaperSeconds: 45}, &Figures{}}, h, hs, paper)
	if tl.PaperEnd != 45 {
		t.Errorf("paper end %g, want the run's 45 s", tl.PaperEnd)
	}
	t0 := float64(h.evs[0].mono) / 1e9
	if len(tl.Acquired) != 39 || len(tl.Holds) != len(hs) {
		t.Errorf("%d acquisitions, %d holds; want 39 and %d", len(tl.Acquired), len(tl.Holds), len(hs))
	}
	var outages, crashes int
	for _, f := range tl.Faults {
		switch {
		case f.Kind == FaultOutage && f.Label == "outage A>B" && f.From == 20-t0 && f.To == 22.5-t0:
			outages++
		case f.Kind == FaultCrash && f.Label == "crash A" && f.From == 40-t0:
			crashes++
		default:
			t.Errorf("unexpected fault %+v", f)
		}
	}
	var failures, losses int
	for _, e := range tl.Events {
		switch {
		case e.Kind == EventFailure && e.At == 21.5-t0 && strings.Contains(e.Label, "A>B failed, detected by ack timeout"):
			failures++
		case e.Kind == EventLoss && strings.Contains(e.Label, "holder-crashed"):
			losses++
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	if outages != 1 || crashes != 1 || failures != 1 || losses != 1 {
		t.Errorf("%d outages, %d crashes, %d failures, %d losses; want one each", outages, crashes, failures, losses)
	}

	dir := t.TempDir()
	files, note, err := writePlots(dir, &summary{&analysis.Summary{}, &Figures{}}, h, hs, paper, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"overview.png", "zoom_01_failure.png", "zoom_02_loss.png"}
	for _, w := range want {
		if !slices.Contains(files, filepath.Join(results.PlotsDir, w)) {
			t.Errorf("plots %v lack %s", files, w)
		}
	}
	if note != "" {
		t.Errorf("note %q with every event zoomed", note)
	}
	checkImages(t, dir, files)
	if r := renderReport(&summary{&analysis.Summary{}, &Figures{}}, nil, files, "Zoomed windows: 1 of 3"); !strings.Contains(r, "## Plots\n\nZoomed windows: 1 of 3\n\n![plots/") {
		t.Errorf("the report does not put the note above the plots:\n%s", r[strings.Index(r, "## Plots"):])
	}
}

// The overview's rate is flat for a steady run whatever its length
// against the bin, and shows a stall.
func TestRateSteps(t *testing.T) {
	for _, end := range []float64{89625, 89430, 90000, 100} {
		var acq []float64
		for a := 0.0; a < end; a += 10 {
			if a < 3000 || a >= 4200 { // a 20-minute stall
				acq = append(acq, a)
			}
		}
		pts := rateSteps(acq, end, 300)
		if pts[len(pts)-1].X != end {
			t.Errorf("end %g: the line ends at %g", end, pts[len(pts)-1].X)
		}
		for i, p := range pts {
			stalled := p.X >= 3000 && p.X < 4200
			if stalled && p.Y != 0 || !stalled && (p.Y < 5.5 || p.Y > 6.5) {
				t.Errorf("end %g: bin %d at %g s: %.2f per minute, want %s", end, i, p.X, p.Y, map[bool]string{true: "0", false: "6"}[stalled])
			}
		}
	}
}

// BenchmarkWriteFaultPlots20Days draws a history the size of the 20-day
// run: 16 replicas of 11,250 visits (180,000 acquisitions), 60 outages
// each with its failure, one loss.
func BenchmarkWriteFaultPlots20Days(b *testing.B) {
	tl := synthTimeline(16, 11250, 60)
	dir := b.TempDir()
	b.ResetTimer()
	for b.Loop() {
		fp, err := WriteFaultPlots(dir, tl)
		if err != nil {
			b.Fatal(err)
		}
		if fp.Zoomed != DefaultMaxZooms || fp.NotZoomed != 61-DefaultMaxZooms {
			b.Fatalf("zoomed %d, not %d", fp.Zoomed, fp.NotZoomed)
		}
	}
}
