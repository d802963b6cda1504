package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"tokenbed/analysis/index"
	"tokenbed/analysis/trend"
	"tokenbed/internal/cli"
	"tokenbed/internal/resultsdb"
)

// cmdTrend is harness trend: every figure of the latest night against the
// previous nights of its job (analysis/trend). Exit 1 when a figure
// regressed, so that a nightly script or CI fails on it.
func cmdTrend(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness trend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("results", "results", "results root, for the default database")
	dbPath := fs.String("db", "", "results database (default: RESULTS/"+index.DBFile+")")
	job := fs.String("job", "", "only this job's figures")
	figure := fs.String("figure", "", "only figures whose name contains this")
	since := fs.Int("since", 0, "only the latest N nights (0: all)")
	alpha := fs.Float64("alpha", 0.01, "family-wise level over the night's figures (Holm)")
	window := fs.Int("window", 7, "most baseline nights before a change")
	minEffect := fs.Float64("min-effect", 0.05, "smallest relative change baseline → latest flagged (0: any significant change)")
	all := fs.Bool("all", false, "print every series, not only those that moved or have no value on the latest night")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	var scalars []string
	fs.Func("scalar", "judge figures whose name contains this as one value a run (repeatable; e.g. paper_s_per_wall_s)", func(v string) error {
		if v == "" {
			return fmt.Errorf("empty name")
		}
		scalars = append(scalars, v)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: harness trend [--db FILE] [--job J] [--figure F] [--since N]\n\n"+
			"Compares each figure of the latest night with the previous nights of its job\n"+
			"(quantile intervals, Kolmogorov–Smirnov, binomial counts; Holm over the figures)\n"+
			"and names the revision from which it moved. Exit 1 on a regression.\n\n")
		fs.PrintDefaults()
	}
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "harness trend: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *since < 0 || !(*alpha > 0 && *alpha < 1) || *window < 1 || !(*minEffect >= 0) {
		fmt.Fprintln(stderr, "harness trend: --since must be ≥ 0, --alpha in (0, 1), --window ≥ 1, --min-effect ≥ 0")
		return exitUsage
	}
	if *dbPath == "" {
		*dbPath = filepath.Join(*root, index.DBFile)
	}
	// Open creates a missing file: a mistyped path would read as "no
	// nights".
	if _, err := os.Stat(*dbPath); err != nil {
		fmt.Fprintln(stderr, "harness trend:", err)
		return exitUsage
	}
	db, err := resultsdb.Open(*dbPath)
	if err != nil {
		fmt.Fprintln(stderr, "harness trend:", err)
		return exitRunError
	}
	defer db.Close()
	series, err := trend.Read(db, trend.Selection{Job: *job, Figure: *figure, Since: *since, Scalars: scalars})
	if err != nil {
		fmt.Fprintln(stderr, "harness trend:", err)
		return exitRunError
	}
	o := trend.Options{Alpha: *alpha, Window: *window, MinEffect: *minEffect}
	if *minEffect == 0 {
		o.MinEffect = -1 // Options' zero is the default; negative is none
	}
	findings := trend.Analyze(series, o)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(jsonFindings(findings)); err != nil {
			fmt.Fprintln(stderr, "harness trend:", err)
			return exitRunError
		}
	} else {
		shown := findings
		if !*all {
			shown = nil
			for _, f := range findings {
				if f.Moved || f.Note == trend.NoteMissingLatest {
					shown = append(shown, f)
				}
			}
		}
		fmt.Fprint(stdout, trend.Text(shown))
		moved, unjudged, small := 0, 0, 0
		for _, f := range findings {
			if f.Moved {
				moved++
			}
			if f.WithinEffect {
				small++
			}
			if !f.Judged {
				unjudged++
			}
		}
		fmt.Fprintf(stdout, "%d series, %d judged, %d moved, %d regressions, %d within effect (Holm at %g over the judged series; moved: a change of at least %g)\n",
			len(findings), len(findings)-unjudged, moved, len(trend.Regressions(findings)), small, *alpha, *minEffect)
	}
	if len(trend.Regressions(findings)) > 0 {
		return exitFailed
	}
	return exitOK
}

// jsonFindings replaces the NaN p-values of unjudged findings, which JSON
// cannot hold, with -1.
func jsonFindings(fs []trend.Finding) []trend.Finding {
	out := make([]trend.Finding, len(fs))
	for i, f := range fs {
		if f.P != f.P {
			f.P = -1
		}
		if f.PAdjusted != f.PAdjusted {
			f.PAdjusted = -1
		}
		// Nor ±Inf: a change from a zero baseline.
		if math.IsInf(f.Effect, 0) {
			f.Effect = math.Copysign(math.MaxFloat64, f.Effect)
		}
		out[i] = f
	}
	return out
}
