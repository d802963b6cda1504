package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/analysis/index"
	"tokenbed/internal/resultsdb"
)

func TestTrendUsage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{"trend", "extra"}, {"trend", "--since", "-1"}, {"trend", "--alpha", "2"},
		{"trend", "--db", filepath.Join(t.TempDir(), "none.db")}} {
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// A planted slowdown: ten nights built from one real simulated run's
// samples (each night a seeded bootstrap draw of them, its counts as
// the run had them), the A>B pass latency 1 ms slower on the last two.
// harness trend flags the A>B latency with the ninth night's revision and
// exits 1; no other figure moves. 1 ms on the 20 ms median is +4.96%,
// just below the default --min-effect of 5%: at the default the change
// is "within effect" (exit 0); the test of the flagging sets 2%.
func TestTrendPlantedSlowdown(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"run", "--backend", "sim", "--results", dir, "--run-id", "tb7e0d01", "--duration", "600s",
		"../experiments/three-agents.yaml"}, &out, &errb); code != exitOK && code != exitFailed {
		t.Fatalf("harness run: exit %d: %s", code, errb.String())
	}
	real := index.ReadRun(dir, "tb7e0d01")
	if real.Run.Damaged != "" || len(real.Samples) == 0 {
		t.Fatalf("the simulated run indexed damaged (%q) or without samples (%d)", real.Run.Damaged, len(real.Samples))
	}
	dbPath := filepath.Join(dir, "results.db")
	db, err := resultsdb.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	const seed, nights, slow = 24, 10, 9 // nights slow.. are slower
	const planted = "latency_s.A>B"
	r := rand.New(rand.NewPCG(seed, 0))
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	var names []string
	for n := 1; n <= nights; n++ {
		camp := fmt.Sprintf("night%02d", n)
		at := t0.Add(time.Duration(n) * 24 * time.Hour)
		if err := db.UpsertCampaign(resultsdb.Campaign{ID: camp, Started: at, Ended: at.Add(time.Hour), Status: resultsdb.CampaignPassed}); err != nil {
			t.Fatal(err)
		}
		x := real
		x.Run.ID, x.Run.Campaign, x.Run.Job = fmt.Sprintf("tb7e0d%02d", 10+n), camp, "three-agents-sim"
		x.Run.Revision, x.Run.Dirty, x.Run.Started = fmt.Sprintf("rev%02d", n), false, at
		x.Checks = nil
		x.Figures = slices.Clone(real.Figures)
		x.Samples = nil
		for _, s := range real.Samples {
			vals := make([]float64, len(s.Vals))
			for i := range vals {
				vals[i] = s.Vals[r.IntN(len(s.Vals))]
				if s.Name == planted && n >= slow {
					vals[i] += 0.001
				}
			}
			x.Samples = append(x.Samples, resultsdb.Sample{Name: s.Name, Vals: vals})
			if n == 1 {
				names = append(names, fmt.Sprintf("%s (%d)", s.Name, len(vals)))
			}
		}
		if err := db.PutRun(x); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	t.Logf("samples of run tb7e0d01 (seed %d for the nights): %s", seed, strings.Join(names, ", "))

	out.Reset()
	errb.Reset()
	if code := run([]string{"trend", "--db", dbPath, "--figure", planted, "--all"}, &out, &errb); code != exitOK ||
		strings.Count(out.String(), "within effect three-agents-sim / "+planted) != 3 {
		t.Errorf("at the default effect: exit %d, want 0 and the 3 series of %s within effect:\n%s", code, planted, out.String())
	}
	out.Reset()
	code := run([]string{"trend", "--db", dbPath, "--all", "--min-effect", "0.02"}, &out, &errb)
	t.Logf("harness trend:\n%s%s", out.String(), errb.String())
	if code != exitFailed {
		t.Fatalf("exit %d, want %d (a regression)", code, exitFailed)
	}
	var flagged []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "REGRESSION") || strings.HasPrefix(line, "improved") {
			flagged = append(flagged, line)
			if !strings.Contains(line, " / "+planted) {
				t.Errorf("an unchanged figure flagged: %s", line)
			}
			if !strings.Contains(line, "since night09 (revision rev09)") || !strings.Contains(line, "last without it night08 (revision rev08)") {
				t.Errorf("the change is not named at night09/rev09: %s", line)
			}
		}
	}
	// The distribution and its p50 and p99.
	if len(flagged) != 3 {
		t.Errorf("%d figures flagged, want the 3 of %s", len(flagged), planted)
	}

	// The latest three nights alone: one night before the change is a
	// baseline enough for the distribution and the p50 (the p99 of one
	// night's 62 passes has no 99% upper bound: that needs 528 samples);
	// the latest two alone (both slow) show no change.
	for _, c := range []struct {
		since string
		code  int
	}{{"3", exitFailed}, {"2", exitOK}} {
		out.Reset()
		if code := run([]string{"trend", "--db", dbPath, "--since", c.since, "--figure", planted, "--min-effect", "0.02"}, &out, &errb); code != c.code {
			t.Errorf("--since %s: exit %d, want %d:\n%s", c.since, code, c.code, out.String())
		}
		if c.code == exitFailed && strings.Count(out.String(), "since night09 (revision rev09)") != 2 {
			t.Errorf("--since %s: the change is not named at night09 on the distribution and the p50:\n%s", c.since, out.String())
		}
	}

	// Without the last two nights: nothing moves, exit 0.
	out.Reset()
	db, err = resultsdb.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"tb7e0d19", "tb7e0d20"} {
		if err := db.DeleteRun(id); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if code := run([]string{"trend", "--db", dbPath}, &out, &errb); code != exitOK {
		t.Errorf("unchanged nights: exit %d, want 0:\n%s", code, out.String())
	}
}
