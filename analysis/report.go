package analysis

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"tokenbed/internal/results"
)

// writeOutputs writes summary.json, junit.xml and report.md: the frame
// (identity, headline, checks table, notes) around the protocol's
// sections.
func writeOutputs(c *Context) error {
	s, dir := c.s, c.dir
	if err := writeJSON(filepath.Join(dir, results.SummaryFile), s); err != nil {
		return err
	}
	fr := c.frame()
	if err := writeJUnit(filepath.Join(dir, results.JUnitFile), s, fr); err != nil {
		return err
	}
	var sections string
	var serr error
	if c.part != nil {
		sections, serr = c.part.Sections(c)
	}
	report := RenderReport(s, fr, sections)
	if serr != nil {
		report += "\nPlots could not all be drawn: " + serr.Error() + "\n"
	}
	if err := writeSamples(c); err != nil {
		report += "\n" + results.SamplesFile + " could not be written: " + err.Error() + "\n"
	}
	return os.WriteFile(filepath.Join(dir, results.ReportFile), []byte(report), 0o644)
}

// Shown is a check's verdict as the report prints it.
func Shown(r Requirement) string {
	switch r.Verdict {
	case VerdictPass:
		return "PASS"
	case VerdictFail:
		return "**FAIL**"
	}
	return "not judged"
}

// RenderReport is report.md: the frame around a protocol's sections (a
// protocol's tests render it without a results directory).
func RenderReport(s *Summary, fr Frame, sections string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# %s: run %s\n\n", fr.Title, s.RunID)
	p("Experiment `%s`, seed %d, git %s, kernel %s.  \n", s.Experiment, s.Seed, s.GitRevision, s.Kernel)
	p("Backend %s, impairment %s; time scale %g (application), network time scale %g, %d replica(s); status %s.",
		s.Backend, s.Impairment, s.TimeScale, s.NetworkTimeScale, s.Replicas, s.Status)
	if h := s.HostCPU; h != nil {
		// Beside the verdicts, not in them: a host that lost its CPUs to
		// another guest delays every datagram, and the reader of a failed
		// latency check needs to know (docs/studies/endurance.md).
		p("  \nHost CPUs while the agents ran: %.0f s busy over %.0f s; %.2f s stolen by the hypervisor (%.1f%% of the CPU time wanted), at most %.2f s in one second.",
			h.BusyS, h.WallS, h.StealS, 100*h.StealFraction, h.WorstStealS)
		if h.Error != "" {
			p(" Reading stopped early: %s.", h.Error)
		}
		if h.LatencyBoundUS != nil {
			p(" Idle CPUs held to a wake-up latency of %d µs (PM QoS).", *h.LatencyBoundUS)
		}
		if h.LatencyError != "" {
			p(" The CPUs' idle states were left alone: %s.", h.LatencyError)
		}
	}
	if e := s.Engine; e != nil && e.Delivered > 0 {
		p("  \nUserspace engine: %d of %d datagrams released over 1 ms after their time (%.2f%%); relay real-time %v.",
			e.LateOver1ms, e.Delivered, 100*float64(e.LateOver1ms)/float64(e.Delivered), e.Realtime)
	}
	p("\n\n")
	failed, unjudged := s.Failed(), s.NotJudged()
	switch {
	case len(failed) > 0:
		p("**FAILED: %s.**", strings.Join(failed, ", "))
	case len(unjudged) == 0 && fr.AllPass != "":
		p("**Every check passes: %s.**", fr.AllPass)
	case len(unjudged) == 0:
		p("**Every check passes.**")
	default:
		p("**No check fails.**")
	}
	if len(unjudged) > 0 {
		p(" **Not judged (nothing to judge): %s.**", strings.Join(unjudged, ", "))
	}
	p("\n\n")

	heading := "## Checks"
	if fr.Checks != "" {
		heading += " (" + fr.Checks + ")"
	}
	p("%s\n\n| check | verdict | value | detail |\n|---|---|---|---|\n", heading)
	for _, k := range s.Order() {
		r := s.Requirements[k]
		detail := r.Detail
		if r.Bundle != "" {
			detail += fmt.Sprintf(" — failure bundle: `%s` (open with `harness pcap %s/slice.pcapng`; see its README.txt)", r.Bundle, r.Bundle)
		}
		label := fr.Labels[k]
		if label == "" {
			label = k
		}
		p("| %s | %s | %s | %s |\n", label, Shown(r), r.Value, detail)
	}
	b.WriteString(sections)
	if len(s.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range s.Notes {
			p("- %s\n", n)
		}
	}
	return b.String()
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
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(path string, s *Summary, fr Frame) error {
	suite := junitSuite{Name: fr.Suite + " " + s.RunID}
	for _, k := range s.Order() {
		r := s.Requirements[k]
		c := junitCase{Name: "requirement " + k, Classname: "tokenbed." + s.Experiment, SystemOut: r.Value + ": " + r.Detail}
		switch r.Verdict {
		case VerdictFail:
			c.Failure = &junitFailure{Message: r.Detail, Text: "bundle: " + r.Bundle}
			suite.Failures++
		case VerdictNotJudged:
			c.Skipped = &junitSkipped{Message: r.Detail}
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
