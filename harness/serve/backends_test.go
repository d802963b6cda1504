package serve

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/internal/resultsdb"
)

// A job on two backends (sim-vs-real) has a series per backend: the job
// page names each row's backend and links its figure page to it, and
// the figure page judges that backend's series alone and names the
// campaign override that differs between the nights.
func TestJobOnTwoBackends(t *testing.T) {
	dir := t.TempDir()
	db, err := resultsdb.Open(filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)
	for i, c := range []string{"nA", "nB"} {
		if err := db.UpsertCampaign(resultsdb.Campaign{ID: c, Started: t0.Add(time.Duration(i) * time.Hour), Status: resultsdb.CampaignPassed}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			backend string
			base    float64
		}{{"netns", 0.0097}, {"sim", 0.0082}} {
			var lat []float64
			for k := range 600 {
				// The real run's latency doubles on night B; the
				// simulated run's does not move.
				x := r.base + 0.0002*float64(k)/600
				if r.backend == "netns" && c == "nB" {
					x *= 2
				}
				lat = append(lat, x)
			}
			over := ""
			if c == "nB" {
				over = `{"defaults.profile":"delay 3ms 150us distribution normal"}`
			}
			x := resultsdb.Indexed{
				Run:     resultsdb.Run{ID: c + "-" + r.backend, Campaign: c, Job: "sim-vs-real", Backend: r.backend, Revision: "r1", Status: resultsdb.RunPass, Started: t0, Overrides: over},
				Samples: []resultsdb.Sample{{Name: "latency_s.A>B", Vals: lat}},
			}
			if err := db.PutRun(x); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := newServer(t, &fixture{root: dir, db: db})
	job := page(t, s, "/trend?job=sim-vs-real")
	for _, want := range []string{
		`href="/figures/latency_s.A%3EB%20p50?job=sim-vs-real&amp;backend=netns">latency_s.A&gt;B p50</a> [netns]`,
		`href="/figures/latency_s.A%3EB%20p50?job=sim-vs-real&amp;backend=sim">latency_s.A&gt;B p50</a> [sim]`,
	} {
		if !strings.Contains(job, want) {
			t.Errorf("job page lacks %s", want)
		}
	}
	// The real run's series moved (a regression), the simulated one's
	// did not.
	if n := strings.Count(job, `<span class="regression-mark">regression</span>`); n != 3 {
		t.Errorf("job page marks %d regressions, want the netns distribution, p50 and p99", n)
	}
	real := page(t, s, "/figures/latency_s.A%3EB%20p50?job=sim-vs-real&backend=netns")
	sim := page(t, s, "/figures/latency_s.A%3EB%20p50?job=sim-vs-real&backend=sim")
	// Both nights ran one revision: the page names the override that
	// differs, the change's only cause in the campaign's records.
	if !strings.Contains(real, `<span id="overrides">The campaign's overrides differ between the two nights: <code>defaults.profile: - → delay 3ms 150us distribution normal</code>.</span>`) {
		t.Errorf("netns figure page does not name the override")
	}
	const marked = `<p id="finding" class="regression-mark">Regression`
	if !strings.Contains(real, marked) || strings.Contains(sim, marked) {
		t.Errorf("figure pages: netns marked %v, sim marked %v; want only netns", strings.Contains(real, marked), strings.Contains(sim, marked))
	}
}
