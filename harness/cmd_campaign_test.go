package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --set on both verbs: a bad job or path is a usage error that names the
// flag as given; a good one passes --check.
func TestCampaignSetFlag(t *testing.T) {
	exp, err := filepath.Abs(filepath.Join("shard", "testdata", "four-replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf("name: c\njobs:\n  - {name: one, experiment: %s, backend: sim}\n", exp)), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"campaign", "run", "--check", "--set", "one:seed=3", file}, exitOK, " one "},
		{[]string{"campaign", "run", "--check", "--set", "two:seed=3", file}, exitUsage, `--set "two:seed=3": no job "two" in campaign c (jobs: one)`},
		{[]string{"campaign", "submit", "--slurm", "--set", "one:no.such=3", file}, exitUsage, `--set "one:no.such=3": override "no.such": no: no such field`},
		{[]string{"campaign", "submit", "--slurm", "--set", "one", file}, exitUsage, `--set "one": want JOB:PATH=VALUE`},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("%s: exit %d, want %d with %q:\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
}
