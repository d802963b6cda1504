package serve

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/internal/resultsdb"
)

// BenchmarkRunPage renders the page of a real simulated run (its
// checks, figures, plots and failure bundle) with 1 and with 1,000 runs
// indexed: the second against the first is what the database's size
// costs a page (the issue asks under 200 ms at 1,000). The 999 others
// are index rows like the real run's, with its checks and twenty
// figures each, in campaigns of ten.
func BenchmarkRunPage(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			root := b.TempDir()
			db, err := resultsdb.Open(filepath.Join(root, "results.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			at := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
			real := night{runID: "tb0fa11d", campaign: "night-0", job: "latency-check", revision: "rev0",
				seed: 7, abProfile: "delay 5ms 1ms", failLatency: true, started: at}
			simRun(b, root, real)
			indexRun(b, db, root, real)
			x, err := db.Checks(real.runID)
			if err != nil {
				b.Fatal(err)
			}
			var batch []resultsdb.Indexed
			for i := 1; i < n; i++ {
				id := fmt.Sprintf("tb%06x", i)
				ix := resultsdb.Indexed{Run: resultsdb.Run{ID: id, Campaign: fmt.Sprintf("night-%d", i/10), Job: fmt.Sprintf("job-%d", i%10),
					Experiment: "three-agents", Backend: "sim", Revision: fmt.Sprintf("rev%d", i/10), Seed: uint64(i),
					Started: at.Add(time.Duration(i) * time.Minute), Status: resultsdb.RunPass, Dir: id}}
				for _, c := range x {
					c.Run = id
					ix.Checks = append(ix.Checks, c)
				}
				for k := range 20 {
					ix.Figures = append(ix.Figures, resultsdb.Figure{Run: id, Name: fmt.Sprintf("figure %d", k), Unit: "ms",
						Value: resultsdb.Val(float64(i + k)), N: 100, Paper: resultsdb.Val(float64(k))})
				}
				batch = append(batch, ix)
			}
			if err := db.PutRuns(batch); err != nil {
				b.Fatal(err)
			}
			s, err := New(Config{Results: root, DB: db})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for b.Loop() {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest("GET", "/runs/"+real.runID, nil))
				if w.Code != 200 {
					b.Fatalf("%d: %s", w.Code, w.Body.String())
				}
			}
		})
	}
}
