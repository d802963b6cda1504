package tokenpassing

import (
	"fmt"
	"strings"
	"time"

	"tokenbed/analysis"
	"tokenbed/experiments"
)

// The paper's figures (002 §3.3), for the side-by-side table.
const (
	paperSeconds      = 1792498
	paperHitsA        = 61206
	paperReturnMean   = 29.29
	paperReturnExp    = 30.0
	paperReturnP99    = 77.64
	paperFailures     = 60
	paperByAck        = 37
	paperByCommit     = 23
	paperABMean       = 0.009
	paperABP99        = 0.010
	paperACMean       = 0.121
	paperACP99        = 0.615
	paperACOperations = 30563
)

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "**FAIL**"
}

func ms(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }

func within(got, want, tol float64) bool {
	return want > 0 && got/want-1 <= tol && 1-got/want <= tol
}

// sections are token passing's sections of report.md, after the checks
// table: the paper's figures beside this run's, latency per direction,
// return times, losses, how to read them, and the plots.
func sections(s *summary, exp *experiments.Experiment, plots []string, plotNote string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("\n## The paper's figures and this run's\n\n")
	p("| figure | paper (002 §3.3) | this run | tolerance | verdict |\n|---|---|---|---|---|\n")
	p("| activity (paper time) | %d s | %.0f s replayed in %.0f s of wall time (%.0f paper s per wall s) | | |\n",
		paperSeconds, s.PaperSeconds, s.WallSeconds, s.PaperSeconds/max(s.WallSeconds, 1))
	for _, a := range s.Agents {
		if a.Agent == "A" {
			p("| hits of A | %d | %d | | |\n", paperHitsA, a.Hits)
			// A verdict only on a figure the experiment asks to compare.
			rc := returnCheck(exp)
			cell := func(got float64, want time.Duration) string {
				if rc == nil || want <= 0 {
					return "not checked | "
				}
				return fmt.Sprintf("±%.0f%% of %.2f s | %s", rc.Tolerance*100, want.Seconds(), verdict(within(got, want.Seconds(), rc.Tolerance)))
			}
			var wantMean, wantP99 time.Duration
			if rc != nil {
				wantMean, wantP99 = rc.Mean, rc.P99
			}
			p("| return time of A, mean | %.2f s (expected %.0f s) | %.2f s | %s |\n", paperReturnMean, paperReturnExp, a.Return.Mean, cell(a.Return.Mean, wantMean))
			p("| return time of A, 99%% below | %.2f s | %.2f s | %s |\n", paperReturnP99, a.Return.P99, cell(a.Return.P99, wantP99))
		}
	}
	for _, d := range s.Directions {
		if d.Link != "A>B" && d.Link != "A>C" {
			continue
		}
		pm, pp := paperABMean, paperABP99
		if d.Link == "A>C" {
			pm, pp = paperACMean, paperACP99
		}
		// A verdict only where the experiment's check sets that figure
		// (requirement iii compares exactly those); the paper's column
		// is the paper's, the check's own figure is in the tolerance.
		cell := func(name string) string {
			if d.Paper != nil {
				for _, f := range latencyFigures(*d.Paper) {
					if f.name == name {
						return fmt.Sprintf("±%.0f%% of %s | %s", d.Paper.Tolerance*100, ms(f.want.Seconds()), verdict(within(d.rescaled(name), f.want.Seconds(), d.Paper.Tolerance)))
					}
				}
			}
			return "not checked | "
		}
		p("| %s latency, mean | %s | %s (%d passes) | %s |\n", d.Link, ms(pm), ms(d.RescaledMeanS), d.Latency.N, cell("mean"))
		p("| %s latency, median | | %s | %s |\n", d.Link, ms(d.RescaledP50S), cell("p50"))
		p("| %s latency, 99%% below | %s | %s | %s |\n", d.Link, ms(pp), ms(d.RescaledP99S), cell("p99"))
	}
	p("| network failures tolerated | %d | %d (outages injected: %d) | | |\n", paperFailures, s.Failures.Tolerated, s.Outages)
	p("| … detected by the ack timeout | %d | %d | | |\n", paperByAck, s.Failures.AckTimeout)
	p("| … detected by the commit timeout | %d | %d | | |\n", paperByCommit, s.Failures.CommitTimeout)
	p("| token duplications | 0 | %d | 0 | %s |\n", len(s.Duplications), analysis.Shown(s.Requirements["duplication"]))
	first := "none"
	if len(s.Losses) > 0 {
		l := s.Losses[0]
		for _, o := range s.Losses {
			if o.PaperS < l.PaperS {
				l = o
			}
		}
		first = fmt.Sprintf("at %.0f s (paper time): %s (%s)", l.PaperS, l.Cause, l.Agent)
	}
	p("| first token loss | after 1,792,498 s: the holder crashed | %s | | |\n", first)

	p("\n## Pass latency per direction (requirement iii)\n\n")
	p("| direction | passes | mean | p50 | p99 | max | p99/p50 | profile (per direction, as applied) | 4 × one-way delay |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range s.Directions {
		p("| %s | %d | %s | %s | %s | %s | %.2f | `%s` | %s |\n", d.Link, d.Latency.N, ms(d.Latency.Mean), ms(d.Latency.P50), ms(d.Latency.P99), ms(d.Latency.Max),
			d.Dispersion, d.Profile, ms(4*d.OneWayS))
	}
	if s.NetworkTimeScale != 1 {
		p("\nNetwork delays were divided by %g; the comparison with the paper uses the latencies multiplied back by it.\n", s.NetworkTimeScale)
	}

	p("\n## Return time and hits per agent (paper time)\n\n| agent | hits | mean | p50 | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, a := range s.Agents {
		p("| %s | %d | %.2f s | %.2f s | %.2f s | %.2f s |\n", a.Agent, a.Hits, a.Return.Mean, a.Return.P50, a.Return.P99, a.Return.Max)
	}

	p("\n## Token losses (requirement i)\n\n")
	if len(s.Losses) == 0 {
		p("None.\n")
	} else {
		p("| paper time | token | cause | agent | session | explained (a crash, 002 §3.1; a lost 3-way commitment, 004 §4) |\n|---|---|---|---|---|---|\n")
		for _, l := range s.Losses {
			p("| %.0f s | %s | %s | %s | %d | %v |\n", l.PaperS, l.Token, l.Cause, l.Agent, l.Session, l.Explain)
		}
	}
	p("\nDatagrams sent %d, lost by the network %d; token losses per datagram lost: %.2g. Regenerations %d, sandwich discards %d.\n",
		s.DatagramsSent, s.DatagramsLost, s.LossRatio, s.Regenerations, s.Discards)
	if len(s.Rejections) > 0 {
		p("Datagrams rejected (dropped without reply): %v.\n", s.Rejections)
	}

	p("\n## How to read these figures\n\n")
	p(`- **Pass latency** is measured by the sender, from its first Move to the EarlyStop (or its last Commit), as 002 §3.1 defines it; a pass without loss takes two round trips.
- **Paper time.** The hold (10 s per visit in the paper) is divided by the time scale, the network is not: paper time is wall time with every hold stretched back by the time scale. Replicas replay consecutive shards of the paper timeline side by side; figures are summed or pooled over them. Replicas after the first stand for the middle of the paper's run and start with their peers' keys cached (002 §3); the first starts cold, as the paper's agents did, and pays each first contact (a Move dropped for an unknown key, one Move timeout).
- **Return time** is the paper time between two successive hits of an agent; **hits** count acquisitions, pooled over replicas.
- **Network failures tolerated**: passes that failed at the sender (Move retries used up), which kept the token. When the receiver got the Move and timed out waiting for the Commit, the failure was detected by the commit timeout, otherwise by the ack timeout.
- **Token losses**: a token disappears when its holder crashes (002 §3.1 accepts it), when a Commit never reaches its receiver (commit-not-delivered), or when the receiver gets the Commit and rejects it (commit-rejected, with the receiver's reasons); only crashes explain a loss.
- **Liveness**: the longest time without any acquisition, and acquisitions per paper second in each phase between schedule events, against bounds derived from the hold and the passing timeouts (the check's detail gives them).
- **Not judged**: a check with nothing to judge (no latency figures in the experiment, no capture, no acquisition) says so; it neither passes nor fails.
- **Validation**: every acquisition in the logs is matched by a Commit captured at the receiver whose Ed25519 signature verifies, offline, against the CA certificate.
- **Datagrams lost by the network**: seen leaving the sender's interface and never arriving at the receiver's, in the capture.
`)
	if len(plots) > 0 {
		p("\n## Plots\n\n")
		if plotNote != "" {
			p("%s\n\n", plotNote)
		}
		for _, pl := range plots {
			p("![%s](%s)\n\n", pl, pl)
		}
	}
	return b.String()
}

func returnCheck(e *experiments.Experiment) *experiments.ReturnCheck {
	if e == nil {
		return nil
	}
	return e.Checks.Return
}
