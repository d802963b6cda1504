package etcdbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Row is one profile's figures for both systems.
type Row struct {
	Profile   string
	FTN, Etcd Result
}

// Compare runs, for each profile, FTN and then etcd with base's settings
// (System, Profile and Dir set per run: Dir/PROFILE-SYSTEM), and returns
// a row per profile. progress gets a line per run.
func Compare(ctx context.Context, base Config, profiles []string, progress io.Writer) ([]Row, error) {
	var rows []Row
	root := base.Dir
	for _, p := range profiles {
		row := Row{Profile: p}
		for _, sys := range []System{FTN, Etcd} {
			c := base
			c.System, c.Profile = sys, p
			c.Dir = fmt.Sprintf("%s/%s-%s", root, profileSlug(p), sys)
			fmt.Fprintf(progress, "etcdbench: %s, profile %q, %d servers, %d clients, %v (logs in %s)\n", sys, p, c.Servers, c.Clients, c.Duration, c.Dir)
			r, err := Run(ctx, c)
			if err != nil {
				return rows, fmt.Errorf("%s, profile %q (run %s): %w", sys, p, r.RunID, err)
			}
			fmt.Fprintf(progress, "etcdbench: %d holds measured, p50 %v, p99 %v (netem: %s)\n", len(r.Samples), r.P50, r.P99, r.Impairment)
			if sys == FTN {
				row.FTN = r
			} else {
				row.Etcd = r
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func profileSlug(p string) string {
	if p == "" {
		return "unimpaired"
	}
	return strings.NewReplacer(" ", "", "/", "_").Replace(p)
}

// Table is the rows as a Markdown table: acquire+release latency p50 and
// p99 of each system, and etcd's over FTN's.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| profile (every direction) | FTN p50 | FTN p99 | etcd p50 | etcd p99 | etcd/FTN p50 | etcd/FTN p99 | holds measured (FTN, etcd) | not ok (FTN, etcd) | netem |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		p := r.Profile
		if p == "" {
			p = "none (unimpaired)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d, %d | %d, %d | %s |\n", p,
			ms(r.FTN.P50), ms(r.FTN.P99), ms(r.Etcd.P50), ms(r.Etcd.P99),
			ratio(r.Etcd.P50, r.FTN.P50), ratio(r.Etcd.P99, r.FTN.P99),
			len(r.FTN.Samples), len(r.Etcd.Samples), r.FTN.Counts.NotOK, r.Etcd.Counts.NotOK, r.Etcd.Impairment)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b time.Duration) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}
