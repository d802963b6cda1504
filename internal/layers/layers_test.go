package layers

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "tokenbed"

// rule forbids packages under From to import packages under any of To.
type rule struct {
	From string
	To   []string
	Why  string
}

// rules are the layers. The process code (agent/, netem/) and the shared
// libraries (internal/) know neither the run nor the analysis; the
// analysis half reads what the run left (the results directory, the
// capture) through packages below both, never the run half itself; the
// protocols' declarations (protocols/) sit below both halves; the
// experiment format knows no protocol and no run. The plug-in links
// (plugins/), which pair a protocol's two halves, sit above both: only
// binaries import them, so no library of the harness lists the
// protocols ("harness/*" is every package inside harness/, not the
// binary itself).
var rules = []rule{
	{"analysis", []string{"harness", "plugins"}, "the analysis reads what a run left, not the run half"},
	{"agent", []string{"harness", "analysis", "experiments", "protocols", "plugins"}, "processes know nothing of the testbed"},
	{"netem", []string{"harness", "analysis", "experiments", "protocols", "plugins"}, "the network engine knows nothing of the testbed"},
	{"internal", []string{"harness", "analysis", "experiments", "protocols", "plugins"}, "shared libraries sit below every half"},
	{"protocols", []string{"harness", "analysis", "plugins"}, "a protocol's declaration sits below both halves"},
	{"experiments", []string{"harness", "analysis", "protocols", "plugins"}, "the experiment format comes first in the data flow"},
	{"harness/*", []string{"plugins"}, "only a binary's aggregator links the plug-ins in"},
}

// under reports whether package path p is tree or inside it; a tree
// ending in "/*" holds only the packages inside it.
func under(p, tree string) bool {
	if in, ok := strings.CutSuffix(tree, "/*"); ok {
		return strings.HasPrefix(p, module+"/"+in+"/")
	}
	t := module + "/" + tree
	return p == t || strings.HasPrefix(p, t+"/")
}

// violations lists each import of imports (package → its imports) that
// breaks a rule, sorted.
func violations(imports map[string][]string) []string {
	var out []string
	for p, is := range imports {
		for _, r := range rules {
			if !under(p, r.From) {
				continue
			}
			for _, i := range is {
				for _, to := range r.To {
					if under(i, to) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", p, i, r.Why))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestViolations: the rules catch an import against the flow and let one
// with it pass, so that TestImports cannot pass by checking nothing.
func TestViolations(t *testing.T) {
	got := violations(map[string][]string{
		"tokenbed/analysis/ftn":         {"tokenbed/harness/protocol/ftn", "tokenbed/protocols/ftn"},
		"tokenbed/agent/node":           {"tokenbed/experiments", "tokenbed/agent/eventlog"},
		"tokenbed/harness/runner":       {"tokenbed/analysis", "tokenbed/protocols", "tokenbed/plugins/tokenpassing"},
		"tokenbed/protocols/ftn":        {"tokenbed/internal/results"},
		"tokenbed/analysisx":            {"tokenbed/harness"}, // not under analysis/
		"tokenbed/internal/registry":    {"tokenbed/harnessx"},
		"tokenbed/experiments":          {"tokenbed/protocols/tokenpassing"},
		"tokenbed/netem/engine":         {"tokenbed/analysis/pcaptimeline"},
		"tokenbed/protocols":            {"tokenbed/harness/results"},
		"tokenbed/internal/capturefile": {"tokenbed/agent/eventlog"},
		"tokenbed/harness":              {"tokenbed/plugins/ftn"},
		"tokenbed/plugins/ftn":          {"tokenbed/analysis/ftn", "tokenbed/harness/protocol/ftn"},
	})
	want := []string{
		"tokenbed/agent/node imports tokenbed/experiments: processes know nothing of the testbed",
		"tokenbed/analysis/ftn imports tokenbed/harness/protocol/ftn: the analysis reads what a run left, not the run half",
		"tokenbed/experiments imports tokenbed/protocols/tokenpassing: the experiment format comes first in the data flow",
		"tokenbed/harness/runner imports tokenbed/plugins/tokenpassing: only a binary's aggregator links the plug-ins in",
		"tokenbed/netem/engine imports tokenbed/analysis/pcaptimeline: the network engine knows nothing of the testbed",
		"tokenbed/protocols imports tokenbed/harness/results: a protocol's declaration sits below both halves",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestImports lists every package of the module with `go list` and fails
// on each import against the data flow. Test files are left out: an
// integration test of the analysis may start a run.
func TestImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go") // the toolchain running this test
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The list must hold the trees the rules speak of, or the test would
	// pass on an empty list.
	for _, tree := range []string{"analysis", "agent", "netem", "internal", "protocols", "experiments", "harness", "plugins"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(imports)), func(p string) bool { return under(p, tree) }) {
			t.Errorf("go list shows no package under %s/", tree)
		}
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
}
