package trend

import (
	"fmt"
	"math"
	"strings"
)

// Text renders findings, one line each: the verdict, the figure, its
// baseline value and nights → its latest value and night, the relative
// change, the test and p-values, the change, and the campaign overrides
// that differ between the last baseline night and the latest.
func Text(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		verdict := "ok"
		switch {
		case !f.Judged:
			verdict = "not judged"
		case f.Regression:
			verdict = "REGRESSION"
		case f.Moved:
			verdict = "improved"
		case f.WithinEffect:
			verdict = "within effect"
		}
		job := f.Job
		if f.Backend != "" {
			job += " [" + f.Backend + "]"
		}
		fmt.Fprintf(&b, "%-13s %s / %s", verdict, job, f.Figure)
		if !f.Judged {
			fmt.Fprintf(&b, ": %s\n", f.Note)
			continue
		}
		fmt.Fprintf(&b, ": %.4g%s (%s) → %.4g%s (%s, rev %s), %s (%s, p %.2g, Holm %.2g, %d candidate nights)",
			f.Baseline, unit(f.Unit), baselineNights(f), f.Latest, unit(f.Unit), f.Night, f.Revision,
			percent(f.Effect), f.Test, f.P, f.PAdjusted, f.Candidates)
		if f.Moved {
			arrow := "up"
			if f.Direction < 0 {
				arrow = "down"
			}
			fmt.Fprintf(&b, "; %s since %s (revision %s), %d nights", arrow, f.Since, f.SinceRevision, f.NightsMoved)
			if f.Before != "" {
				fmt.Fprintf(&b, "; last without it %s (revision %s)", f.Before, f.BeforeRevision)
			}
		}
		if len(f.OverridesDiffer) > 0 {
			fmt.Fprintf(&b, "; overrides differ: %s", strings.Join(f.OverridesDiffer, ", "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// baselineNights names the nights pooled in a finding's baseline: one
// night with its revision, or the first and last pooled.
func baselineNights(f Finding) string {
	if f.BaselineFirst == f.BaselineLast {
		return fmt.Sprintf("%s, rev %s", f.BaselineLast, f.BaselineRevision)
	}
	return fmt.Sprintf("%s–%s pooled, last rev %s", f.BaselineFirst, f.BaselineLast, f.BaselineRevision)
}

func percent(effect float64) string {
	if math.IsInf(effect, 0) {
		return "from 0"
	}
	// No exponents: 2.4e-06% reads worse than +0.00%.
	switch pct := 100 * effect; {
	case math.Abs(pct) >= 10:
		return fmt.Sprintf("%+.0f%%", pct)
	case math.Abs(pct) >= 1:
		return fmt.Sprintf("%+.1f%%", pct)
	default:
		return fmt.Sprintf("%+.2f%%", pct)
	}
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}
