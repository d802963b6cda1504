package analysis

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tokenbed/experiments"
	"tokenbed/harness/results"
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

func writeOutputs(dir string, s *Summary, exp *experiments.Experiment, h *history, hs []hold, paper map[int]time.Duration, lat map[string][]float64) error {
	if err := writeJSON(filepath.Join(dir, results.SummaryFile), s); err != nil {
		return err
	}
	if err := writeJUnit(filepath.Join(dir, results.JUnitFile), s); err != nil {
		return err
	}
	plots, perr := writePlots(dir, s, h, hs, paper, lat)
	report := renderReport(s, exp, plots)
	if perr != nil {
		report += "\nPlots could not all be drawn: " + perr.Error() + "\n"
	}
	return os.WriteFile(filepath.Join(dir, results.ReportFile), []byte(report), 0o644)
}

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

func renderReport(s *Summary, exp *experiments.Experiment, plots []string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Endurance report: run %s\n\n", s.RunID)
	p("Experiment `%s`, seed %d, git %s, kernel %s.  \n", s.Experiment, s.Seed, s.GitRevision, s.Kernel)
	p("Backend %s, impairment %s; time scale %g (application), network time scale %g, %d replica(s); status %s.\n\n",
		s.Backend, s.Impairment, s.TimeScale, s.NetworkTimeScale, s.Replicas, s.Status)
	failed := s.Failed()
	if len(failed) == 0 {
		p("**All four requirements of 002 §2 pass.**\n\n")
	} else {
		p("**FAILED: %s.**\n\n", strings.Join(failed, ", "))
	}

	p("## Requirements (002 §2)\n\n| requirement | verdict | value | detail |\n|---|---|---|---|\n")
	names := map[string]string{"loss": "(i) loss", "duplication": "(ii) duplication", "latency": "(iii) latency", "validation": "(iv) validation"}
	for _, k := range []string{"loss", "duplication", "latency", "validation"} {
		r := s.Requirements[k]
		detail := r.Detail
		if r.Bundle != "" {
			detail += fmt.Sprintf(" — failure bundle: `%s` (open with `harness pcap %s/slice.pcapng`; see its README.txt)", r.Bundle, r.Bundle)
		}
		p("| %s | %s | %s | %s |\n", names[k], verdict(r.Pass), r.Value, detail)
	}

	p("\n## The paper's figures and this run's\n\n")
	p("| figure | paper (002 §3.3) | this run | tolerance | verdict |\n|---|---|---|---|---|\n")
	p("| activity (paper time) | %d s | %.0f s replayed in %.0f s of wall time (%.0f paper s per wall s) | | |\n",
		paperSeconds, s.PaperSeconds, s.WallSeconds, s.PaperSeconds/max(s.WallSeconds, 1))
	for _, a := range s.Agents {
		if a.Agent == "A" {
			p("| hits of A | %d | %d | | |\n", paperHitsA, a.Hits)
			ok := ""
			if r := returnCheck(exp); r != nil {
				ok = fmt.Sprintf("±%.0f%% | %s", r.Tolerance*100, verdict(within(a.Return.Mean, r.Mean.Seconds(), r.Tolerance) && within(a.Return.P99, r.P99.Seconds(), r.Tolerance)))
			} else {
				ok = " | "
			}
			p("| return time of A, mean | %.2f s (expected %.0f s) | %.2f s | %s |\n", paperReturnMean, paperReturnExp, a.Return.Mean, ok)
			p("| return time of A, 99%% below | %.2f s | %.2f s | | |\n", paperReturnP99, a.Return.P99)
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
		tol, v1, v2 := "", "", ""
		if d.Paper != nil {
			tol = fmt.Sprintf("±%.0f%%", d.Paper.Tolerance*100)
			v1 = verdict(within(d.RescaledMeanS, d.Paper.Mean.Seconds(), d.Paper.Tolerance))
			v2 = verdict(within(d.RescaledP99S, d.Paper.P99.Seconds(), d.Paper.Tolerance))
		}
		p("| %s latency, mean | %s | %s (%d passes) | %s | %s |\n", d.Link, ms(pm), ms(d.RescaledMeanS), d.Latency.N, tol, v1)
		p("| %s latency, 99%% below | %s | %s | %s | %s |\n", d.Link, ms(pp), ms(d.RescaledP99S), tol, v2)
	}
	p("| network failures tolerated | %d | %d (outages injected: %d) | | |\n", paperFailures, s.Failures.Tolerated, s.Outages)
	p("| … detected by the ack timeout | %d | %d | | |\n", paperByAck, s.Failures.AckTimeout)
	p("| … detected by the commit timeout | %d | %d | | |\n", paperByCommit, s.Failures.CommitTimeout)
	p("| token duplications | 0 | %d | 0 | %s |\n", len(s.Duplications), verdict(len(s.Duplications) == 0))
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
		p("| paper time | token | cause | agent | session | explained by a crash |\n|---|---|---|---|---|---|\n")
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
- **Token losses**: a token disappears when its holder crashes (002 §3.1 accepts it) or when a Commit never reaches its receiver; only the latter, or anything else, fails requirement (i).
- **Validation**: every acquisition in the logs is matched by a Commit captured at the receiver whose Ed25519 signature verifies, offline, against the CA certificate.
- **Datagrams lost by the network**: seen leaving the sender's interface and never arriving at the receiver's, in the capture.
`)
	if len(plots) > 0 {
		p("\n## Plots\n\n")
		for _, pl := range plots {
			p("![%s](%s)\n\n", pl, pl)
		}
	}
	if len(s.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range s.Notes {
			p("- %s\n", n)
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

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(path string, s *Summary) error {
	suite := junitSuite{Name: "tokenbed endurance " + s.RunID}
	for _, k := range []string{"loss", "duplication", "latency", "validation"} {
		r := s.Requirements[k]
		c := junitCase{Name: "requirement " + k, Classname: "tokenbed." + s.Experiment, SystemOut: r.Value + ": " + r.Detail}
		if !r.Pass {
			c.Failure = &junitFailure{Message: r.Detail, Text: "bundle: " + r.Bundle}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(suite.Cases)
	b, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}
