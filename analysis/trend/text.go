package trend

import (
	"fmt"
	"strings"
)

// Text renders findings, one line each: the verdict, the figure, its
// baseline and latest values, the test and p-values, and the change.
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
		}
		fmt.Fprintf(&b, "%-10s %s / %s", verdict, f.Job, f.Figure)
		if !f.Judged {
			fmt.Fprintf(&b, ": %s\n", f.Note)
			continue
		}
		fmt.Fprintf(&b, ": %s %.4g → %.4g%s (%s, p %.2g, Holm %.2g, %d candidate nights)",
			f.Night, f.Baseline, f.Latest, unit(f.Unit), f.Test, f.P, f.PAdjusted, f.Candidates)
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
		b.WriteByte('\n')
	}
	return b.String()
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}
