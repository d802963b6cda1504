package analysis

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"tokenbed/internal/results"
)

// TestCheckers judges the literal histories of testdata/histories with
// the composed checkers of a protocol registered outside the core
// (protocol_test.go) and compares every verdict with the golden one in
// testdata/checks/protocols.txt (datadriven, as etcd raft's testdata: a
// command, ----, the verdicts; go test -run TestCheckers -rewrite
// regenerates them). Token passing's are judged in its package
// (analysis/tokenpassing: testdata/checks/verdicts.txt).
//
//	judge history=FILE protocol=P [checkers=a,b]
//
// prints each checker's verdict and value, the notes, and the composed
// verdict.
func TestCheckers(t *testing.T) {
	datadriven.RunTest(t, filepath.Join("testdata", "checks", "protocols.txt"), func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "judge" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		var hist, names, proto string
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "history":
				d.ScanArgs(t, "history", &hist)
			case "checkers":
				names = strings.Join(a.Vals, ",")
			case "protocol":
				d.ScanArgs(t, "protocol", &proto)
			default:
				d.Fatalf(t, "unknown argument %q", a.Key)
			}
		}
		c, err := LiteralHistory(filepath.Join("testdata", "histories", hist), results.RunInfo{Status: "ok", Protocol: proto}, nil)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var list []string
		if names != "" {
			list = strings.Split(names, ",")
		}
		all, err := Compose(c, list...)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		for _, n := range all.Names {
			r := all.Results[n]
			fmt.Fprintf(&b, "%s: %s (%s)\n", n, r.Verdict, r.Value)
		}
		for _, n := range c.Summary().Notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
		fmt.Fprintf(&b, "composed: %s\n", all.Verdict())
		return b.String()
	})
}

func TestCompositeVerdictKeepsNotJudgedApart(t *testing.T) {
	for _, c := range []struct {
		vs   []Verdict
		want Verdict
	}{
		{[]Verdict{VerdictPass, VerdictPass}, VerdictPass},
		{[]Verdict{VerdictPass, VerdictNotJudged}, VerdictNotJudged},
		{[]Verdict{VerdictNotJudged, VerdictFail, VerdictPass}, VerdictFail},
		{nil, VerdictPass},
	} {
		comp := Composite{Results: map[string]Requirement{}}
		for i, v := range c.vs {
			n := fmt.Sprint(i)
			comp.Names = append(comp.Names, n)
			comp.Results[n] = Requirement{Verdict: v}
		}
		if got := comp.Verdict(); got != c.want {
			t.Errorf("%v: %s, want %s", c.vs, got, c.want)
		}
	}
}
