package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSlurm answers squeue and scontrol from literal outputs in
// testdata, keyed by job ID; a job it does not know is refused as
// slurmctld refuses a forgotten one.
func fakeSlurm(t *testing.T, files map[string]string) Commander {
	return func(_ context.Context, name string, args ...string) ([]byte, error) {
		id := args[len(args)-1]
		if name == "squeue" {
			id = args[5]
		}
		f, ok := files[name+" "+id]
		if !ok {
			return nil, errors.New(name + ": error: Invalid job id specified")
		}
		return os.ReadFile(filepath.Join("testdata", f))
	}
}

// Array tasks come one a line in task order; a job squeue has forgotten
// is read from scontrol; one both have forgotten is UNKNOWN, not
// guessed; any task that did not complete makes the submission failed,
// and is named.
func TestStatusReadsSqueueThenScontrol(t *testing.T) {
	run := fakeSlurm(t, map[string]string{"squeue 12": "squeue-array.txt", "scontrol 13": "scontrol-merge.txt"})
	subs := []Submitted{{Name: "smoke-shards", Kind: "array", JobID: "12"}, {Name: "smoke-merge", Kind: "merge", JobID: "13", After: []string{"12"}},
		{Name: "index", Kind: "index", JobID: "14", After: []string{"13"}}}
	ts, err := Status(context.Background(), run, subs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range ts {
		got = append(got, x.JobID+" "+x.State+" "+x.Node)
	}
	want := "12_0 COMPLETED tb1-n1,12_1 COMPLETED tb1-n2,12_2 NODE_FAIL tb1-n2,12_10 FAILED tb1-n2,13 FAILED tb1-n1,14 UNKNOWN "
	if strings.Join(got, ",") != want {
		t.Errorf("tasks %q\nwant %q", strings.Join(got, ","), want)
	}
	v, bad := Verdict(ts)
	if v != "failed" || len(bad) != 4 || bad[0].JobID != "12_2" {
		t.Errorf("verdict %s, not completed %+v", v, bad)
	}
	// An array of 11 tasks: the seven neither squeue nor scontrol gives
	// are UNKNOWN, named, not dropped.
	ts, err = Status(context.Background(), run, []Submitted{{Name: "smoke-shards", Kind: "array", JobID: "12", Tasks: 11}})
	if err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for _, x := range ts {
		if x.State == "UNKNOWN" {
			unknown++
		}
	}
	if len(ts) != 11 || unknown != 7 || ts[3].JobID != "12_3" || ts[10].JobID != "12_10" {
		t.Errorf("an array of 11 tasks: %d reported, %d unknown:\n%s", len(ts), unknown, Table(ts))
	}
	if v, _ := Verdict([]Task{{State: "COMPLETED"}, {State: "PENDING"}, {State: "FAILED"}}); v != "running" {
		t.Errorf("a submission with a pending job: %s, want running", v)
	}
	if v, bad := Verdict([]Task{{State: "COMPLETED"}, {State: "COMPLETED"}}); v != "completed" || bad != nil {
		t.Errorf("all completed: %s %v", v, bad)
	}
}

// Describe adds the exit codes squeue does not print, from scontrol by
// the array's ID; the table shows job ID and array task apart, and "-"
// for what Slurm did not say.
func TestDescribeAddsExitCodes(t *testing.T) {
	run := fakeSlurm(t, map[string]string{"scontrol 12": "scontrol-array.txt"})
	ts := Describe(context.Background(), run, []Submitted{{Name: "smoke-shards", JobID: "12", Tasks: 2}, {Name: "index", JobID: "14"}},
		[]Task{{Name: "smoke-shards", JobID: "12_0", State: "COMPLETED", Elapsed: "1:02"}, {Name: "smoke-shards", JobID: "12_10", State: "FAILED"},
			{Name: "index", JobID: "14", State: "UNKNOWN"}})
	if ts[0].Exit != "0:0" || ts[0].Elapsed != "1:02" || ts[1].Exit != "3:0" || ts[1].Elapsed != "00:00:04" || ts[2].Exit != "" {
		t.Errorf("described %+v", ts)
	}
	table := Table(ts)
	for _, want := range []string{"12       10    smoke-shards                 FAILED       -                    3:0    00:00:04", "14       -     index                        UNKNOWN      -                    -      -"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
