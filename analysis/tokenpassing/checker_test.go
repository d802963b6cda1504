package tokenpassing

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/internal/results"
)

// TestCheckers judges the literal histories of testdata/histories with
// the composed checkers and compares every verdict with the golden one in
// testdata/checks/verdicts.txt (datadriven, as etcd raft's testdata: a command, ----,
// the verdicts; go test -run TestCheckers -rewrite regenerates them).
//
//	judge history=FILE [exp=FILE] [checkers=a,b] [capture=none] [drop-commit=N] [protocol=P]
//
// prints each checker's verdict and value, every token loss with its
// cause, and the composed verdict. capture=none judges without a capture;
// drop-commit=N removes the Commit of the N-th acquisition by Commit
// (1-based) from a capture that otherwise holds all of them.
func TestCheckers(t *testing.T) {
	datadriven.Walk(t, filepath.Join("..", "testdata", "checks", "verdicts.txt"), func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "judge" {
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			var hist, exp, names, capture, proto string
			drop := 0
			for _, a := range d.CmdArgs {
				switch a.Key {
				case "history":
					d.ScanArgs(t, "history", &hist)
				case "exp":
					d.ScanArgs(t, "exp", &exp)
				case "checkers":
					names = strings.Join(a.Vals, ",")
				case "capture":
					d.ScanArgs(t, "capture", &capture)
				case "drop-commit":
					d.ScanArgs(t, "drop-commit", &drop)
				case "protocol":
					d.ScanArgs(t, "protocol", &proto)
				default:
					d.Fatalf(t, "unknown argument %q", a.Key)
				}
			}
			hpath := filepath.Join("..", "testdata", "histories", hist)
			h, err := readHistory(hpath)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			var e *experiments.Experiment
			if exp != "" {
				if e, err = experiments.Load(filepath.Join("..", "testdata", "histories", exp)); err != nil {
					d.Fatalf(t, "%v", err)
				}
			}
			c, err := analysis.LiteralHistory(hpath, results.RunInfo{Status: "ok", Protocol: proto}, e)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			cf := capturedCommits(h)
			if capture == "none" {
				cf = &captureFacts{verified: map[commitKey]bool{}, badSig: map[commitKey]bool{}, lostByLink: map[string]int{}}
			}
			if drop > 0 {
				n := 0
				for _, e := range h.evs {
					if e.kind == eventlog.TokenAcquired && e.reason == "commit" {
						if n++; n == drop {
							delete(cf.verified, commitKey{e.token, e.session, e.peer, e.agent})
						}
					}
				}
			}
			p := newPart(c, h, cf, nil)
			c.SetPart(p)
			var list []string
			if names != "" {
				list = strings.Split(names, ",")
			}
			all, err := analysis.Compose(c, list...)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			var b strings.Builder
			for _, n := range all.Names {
				r := all.Results[n]
				fmt.Fprintf(&b, "%s: %s (%s)\n", n, r.Verdict, r.Value)
			}
			for _, l := range p.f.Losses {
				fmt.Fprintf(&b, "lost %s at %s: %s, explained %v\n", l.Token, l.Agent, l.Cause, l.Explain)
			}
			for _, n := range c.Summary().Notes {
				fmt.Fprintf(&b, "note: %s\n", n)
			}
			fmt.Fprintf(&b, "composed: %s\n", all.Verdict())
			return b.String()
		})
	})
}
