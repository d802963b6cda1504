package campaign

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tokenbed/analysis/index"
	"tokenbed/experiments/campaign"
	"tokenbed/harness/backend"
	"tokenbed/internal/results"
	"tokenbed/internal/resultsdb"

	_ "tokenbed/harness/backend/nsbackend"
	_ "tokenbed/harness/sim"
	_ "tokenbed/protocols/ftn"
	_ "tokenbed/protocols/tokenpassing"
)

// harnessBin is the harness, built once for the package's tests: the
// campaign runs its jobs as child harness processes.
var harnessBin string

// moduleRoot is where campaign files' experiment paths resolve.
const moduleRoot = "../.."

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tokenbed-campaign-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	harnessBin = filepath.Join(dir, "harness")
	cmd := exec.Command("go", "build", "-o", harnessBin, "tokenbed/harness")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the harness: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func load(t *testing.T, name string) *campaign.Campaign {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := campaign.Parse(name, b, campaign.Options{Dir: moduleRoot, Studies: IsStudy, Known: Studies(), Backends: backend.Names()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// inModuleRoot runs the rest of the test in the module root, where the
// campaign's paths resolve, as make runs the night.
func inModuleRoot(t *testing.T) {
	wd, _ := os.Getwd()
	if err := os.Chdir(moduleRoot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(wd) })
}

// Three simulated jobs end to end: every run lands in the database tagged
// with its campaign and job, with its overrides in run.json and in the
// experiment it ran; a job that fails a check fails the campaign without
// stopping the job after it.
func TestCampaignEndToEnd(t *testing.T) {
	c := load(t, "two-sim.yaml")
	root := t.TempDir()
	inModuleRoot(t)
	var out strings.Builder
	res, err := Run(context.Background(), Options{Campaign: c, File: "two-sim.yaml", Root: root, Harness: harnessBin,
		ID: "c-test", Progress: NewProgress(&out, false)})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if res.Info.Status != resultsdb.CampaignFailed {
		t.Errorf("campaign %s, want failed (planted-failure fails)", res.Info.Status)
	}
	want := map[string]string{"three-seeds": JobPassed, "planted-failure": JobFailed, "ftn-short": JobPassed}
	if len(res.Info.Jobs) != 3 {
		t.Fatalf("jobs %+v", res.Info.Jobs)
	}
	for _, j := range res.Info.Jobs {
		if j.Status != want[j.Name] {
			t.Errorf("job %s: %s (%s), want %s; log:\n%s", j.Name, j.Status, j.Detail, want[j.Name], readFile(filepath.Join(res.Dir, j.Log)))
		}
	}
	db, err := resultsdb.Open(filepath.Join(root, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cr, err := db.CampaignByID("c-test")
	if err != nil || cr.Status != resultsdb.CampaignFailed || cr.Revision == "" {
		t.Errorf("campaign row %+v, %v", cr, err)
	}
	jobs, _ := db.Jobs("c-test")
	if len(jobs) != 3 {
		t.Errorf("job rows %+v", jobs)
	}
	runs, err := db.Runs(resultsdb.RunFilter{Campaign: "c-test", Job: "three-seeds"})
	if err != nil || len(runs) != 2 {
		t.Fatalf("three-seeds runs %+v, %v", runs, err)
	}
	seeds := map[uint64]bool{}
	for _, r := range runs {
		seeds[r.Seed] = true
		if r.Status != resultsdb.RunPass || r.Damaged != "" || r.Backend != "sim" {
			t.Errorf("run %+v", r)
		}
		if !strings.Contains(r.Overrides, `"links[0].profile":"delay 6ms"`) || !strings.Contains(r.Overrides, `"seed":"`) {
			t.Errorf("run %s overrides %q", r.ID, r.Overrides)
		}
		if exp := readFile(filepath.Join(root, r.Dir, results.ExperimentFile)); !strings.Contains(exp, "delay 6ms") {
			t.Errorf("run %s ran an experiment without the override:\n%s", r.ID, exp)
		}
		figs, _ := db.Figures(r.ID)
		if len(figs) == 0 {
			t.Errorf("run %s: no figures", r.ID)
		}
		if v, err := db.Samples(r.ID, "latency_s.A>B"); err != nil || len(v) == 0 {
			t.Errorf("run %s: A>B latency samples %d, %v", r.ID, len(v), err)
		}
	}
	if !seeds[1] || !seeds[2] {
		t.Errorf("seeds %v, want 1 and 2", seeds)
	}
	failed, _ := db.Runs(resultsdb.RunFilter{Campaign: "c-test", Job: "planted-failure"})
	if len(failed) != 1 || failed[0].Status != resultsdb.RunFail {
		t.Errorf("planted-failure runs %+v, want one failed run", failed)
	}
	if ftn, _ := db.Runs(resultsdb.RunFilter{Campaign: "c-test", Job: "ftn-short"}); len(ftn) != 1 || ftn[0].Protocol != "ftn" {
		t.Errorf("ftn-short runs %+v", ftn)
	}
	// One ID, one execution.
	if _, err := Run(context.Background(), Options{Campaign: c, Root: root, Harness: harnessBin, ID: "c-test"}); err == nil || !strings.Contains(err.Error(), "already ran") {
		t.Errorf("a second campaign c-test: %v, want refused", err)
	}
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// A real SIGTERM to a real `harness campaign run` during its second job:
// the first job stays readable and indexed, the second is recorded as
// interrupted with its child stopped, the third never starts, the
// campaign is recorded as interrupted and the harness exits 130.
func TestInterruptedBySignal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a campaign with the 20-day simulated endurance run, stopped by a signal")
	}
	root := t.TempDir()
	inModuleRoot(t)
	cmd := exec.Command(harnessBin, "campaign", "run", "--results", root, "--id", "c-int", "harness/campaign/testdata/interrupt.yaml")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	record := filepath.Join(root, results.CampaignsDir, "c-int")
	var info results.CampaignInfo
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if results.ReadJSON(record, results.CampaignFile, &info) == nil && len(info.Jobs) == 2 && info.Jobs[1].Status == JobRunning {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("campaign ended before its second job ran: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the second job never started:\n%s", out.String())
		}
	}
	time.Sleep(time.Second) // into the run, past its set-up
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the campaign did not stop within 3 min of SIGTERM:\n%s", out.String())
	}
	t.Log(out.String())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want status 130", err)
	}
	if err := results.ReadJSON(record, results.CampaignFile, &info); err != nil {
		t.Fatal(err)
	}
	if info.Status != resultsdb.CampaignInterrupted || len(info.Jobs) != 2 ||
		info.Jobs[0].Status != JobPassed || info.Jobs[1].Status != JobInterrupted {
		t.Fatalf("record %+v, want interrupted: short passed, long interrupted, never absent", info)
	}
	db, err := resultsdb.Open(filepath.Join(root, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if c, _ := db.CampaignByID("c-int"); c.Status != resultsdb.CampaignInterrupted {
		t.Errorf("campaign row %+v", c)
	}
	short, _ := db.Runs(resultsdb.RunFilter{Campaign: "c-int", Job: "short"})
	if len(short) != 1 || short[0].Status != resultsdb.RunPass {
		t.Errorf("the finished job's runs %+v, want one passed run indexed", short)
	}
	if _, err := os.Stat(filepath.Join(root, short[0].Dir, results.ReportFile)); err != nil {
		t.Errorf("the finished job's report: %v", err)
	}
	long, _ := db.Runs(resultsdb.RunFilter{Campaign: "c-int", Job: "long"})
	if len(long) != 1 || long[0].Status != resultsdb.RunInterrupted {
		t.Errorf("the interrupted job's runs %+v, want one interrupted run indexed", long)
	}
	// The interrupted child is gone: no harness run of this results root
	// is left.
	if ps, _ := exec.Command("pgrep", "-f", root).Output(); len(strings.TrimSpace(string(ps))) > 0 {
		t.Errorf("processes left running with %s in their command line: %s", root, ps)
	}
}

// --job runs the one job of the file (as a Slurm task does) under the
// given campaign ID: its runs are tagged with it, it writes only its own
// record (jobs/JOB.json, no campaign.json, no database), and the index
// makes the campaign and its job from that record.
func TestRunOneJob(t *testing.T) {
	c := load(t, "two-sim.yaml")
	root := t.TempDir()
	inModuleRoot(t)
	res, err := Run(context.Background(), Options{Campaign: c, File: "two-sim.yaml", Root: root, Harness: harnessBin,
		ID: "c-slurm", Only: "ftn-short"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Info.Status != resultsdb.CampaignPassed || len(res.Info.Jobs) != 1 || res.Info.Jobs[0].Name != "ftn-short" {
		t.Fatalf("result %+v", res.Info)
	}
	for _, f := range []string{filepath.Join(res.Dir, results.CampaignFile), filepath.Join(root, index.DBFile)} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s written: a task writes only its job's record", f)
		}
	}
	db, err := resultsdb.Open(filepath.Join(root, index.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := index.Rebuild(root, db); err != nil {
		t.Fatal(err)
	}
	if cr, err := db.CampaignByID("c-slurm"); err != nil || cr.Status != resultsdb.CampaignPassed {
		t.Errorf("campaign row %+v, %v", cr, err)
	}
	if jobs, _ := db.Jobs("c-slurm"); len(jobs) != 1 || jobs[0].Name != "ftn-short" || jobs[0].Status != JobPassed {
		t.Errorf("job rows %+v, want ftn-short passed only", jobs)
	}
	if runs, _ := db.Runs(resultsdb.RunFilter{Campaign: "c-slurm"}); len(runs) != 1 || runs[0].Job != "ftn-short" {
		t.Errorf("runs %+v, want the one run of ftn-short", runs)
	}
	if _, err := Run(context.Background(), Options{Campaign: c, Root: root, Harness: harnessBin, ID: "c-slurm", Only: "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("--job nope: %v, want an error naming it", err)
	}
}
