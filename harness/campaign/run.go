package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"tokenbed/analysis/index"
	"tokenbed/experiments/campaign"
	"tokenbed/internal/results"
	"tokenbed/internal/resultsdb"
	"tokenbed/internal/revision"
)

// Options say what to run and where.
type Options struct {
	Campaign *campaign.Campaign
	File     string // as given, or "(embedded)"
	Root     string // the results root
	DB       string // the database (default RESULTS/results.db)
	Harness  string // the harness binary the jobs run (default: this one)
	Agent    string // the agent binary for real backends
	// ID is the campaign ID (default: "c" and the start time).
	ID string
	// Grace is how long a job has after SIGINT before SIGKILL (default
	// 2 min: a real run removes its namespaces and analyses what it
	// recorded).
	Grace    time.Duration
	Progress *Progress
	// Only, when given, runs that one job of the campaign and nothing
	// else, as one task of a Slurm submission (RunOne).
	Only string
}

// Result is how the campaign ended.
type Result struct {
	Info results.CampaignInfo
	Dir  string // RESULTS/campaigns/ID
}

// Status of jobs (the database's).
const (
	JobRunning     = "running"
	JobPassed      = "passed"
	JobFailed      = "failed"
	JobError       = "error"
	JobInterrupted = "interrupted"
)

// Run runs every job of o.Campaign in order. A job's failure does not
// stop the others; ctx's cancellation stops the job running and skips
// the rest. The error is only for what stops the campaign from being
// recorded at all.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Harness == "" {
		exe, err := os.Executable()
		if err != nil {
			return Result{}, err
		}
		o.Harness = exe
	}
	if o.Grace == 0 {
		o.Grace = 2 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = NewProgress(io.Discard, false)
	}
	start := time.Now().UTC()
	if o.Only != "" {
		return runOne(ctx, o)
	}
	if o.ID == "" {
		o.ID = "c" + start.Format("20060102-150405")
	}
	if o.DB == "" {
		o.DB = filepath.Join(o.Root, index.DBFile)
	}
	host, _ := os.Hostname()
	res := Result{Dir: filepath.Join(o.Root, results.CampaignsDir, o.ID)}
	if err := os.MkdirAll(filepath.Dir(res.Dir), 0o755); err != nil {
		return res, err
	}
	// A campaign ID names one execution: reusing one would mix two
	// nights' jobs in one record.
	if err := os.Mkdir(res.Dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return res, fmt.Errorf("campaign %s already ran here (%s): give another --id", o.ID, res.Dir)
		}
		return res, err
	}
	if err := os.WriteFile(filepath.Join(res.Dir, results.CampaignFileCopy), o.Campaign.Raw, 0o644); err != nil {
		return res, err
	}
	res.Info = results.CampaignInfo{ID: o.ID, File: o.File, Started: start, Status: resultsdb.CampaignRunning,
		Revision: revision.Current().String(), Host: host, PID: os.Getpid()}
	db, err := resultsdb.Open(o.DB)
	if err != nil {
		return res, err
	}
	defer db.Close()
	rec := &recorder{root: o.Root, dir: res.Dir, db: db, info: &res.Info}
	if err := rec.save(); err != nil {
		return res, err
	}
	failed := false
	for i := range o.Campaign.Jobs {
		j := &o.Campaign.Jobs[i]
		if ctx.Err() != nil {
			break
		}
		st := runJob(ctx, o, rec, i, j)
		failed = failed || st != JobPassed
	}
	res.Info.Ended = time.Now().UTC()
	switch {
	case ctx.Err() != nil:
		res.Info.Status = resultsdb.CampaignInterrupted
	case failed:
		res.Info.Status = resultsdb.CampaignFailed
	default:
		res.Info.Status = resultsdb.CampaignPassed
	}
	o.Progress.Done(res.Info)
	return res, rec.save()
}

// runOne runs job o.Only of the campaign under campaign ID o.ID, as one
// task of a Slurm submission runs it. Several such tasks record into the
// same campaign at once, on several nodes, so each writes only its own
// files: the job's record jobs/JOB.json, its log and its directory under
// RESULTS/campaigns/ID. It neither writes campaign.json nor opens the
// database: the submission's index job builds both from the records and
// the runs (analysis/index). A requeued task writes them again.
func runOne(ctx context.Context, o Options) (Result, error) {
	res := Result{Dir: filepath.Join(o.Root, results.CampaignsDir, o.ID)}
	if o.ID == "" {
		return res, fmt.Errorf("--job %s: want the campaign's --id", o.Only)
	}
	i := slices.IndexFunc(o.Campaign.Jobs, func(j campaign.Job) bool { return j.Name == o.Only })
	if i < 0 {
		return res, fmt.Errorf("--job %s: no such job in %s", o.Only, o.File)
	}
	if err := os.MkdirAll(filepath.Join(res.Dir, results.JobsDir), 0o755); err != nil {
		return res, err
	}
	host, _ := os.Hostname()
	res.Info = results.CampaignInfo{ID: o.ID, File: o.File, Started: time.Now().UTC(), Status: resultsdb.CampaignRunning,
		Revision: revision.Current().String(), Host: host, PID: os.Getpid()}
	rec := &recorder{root: o.Root, dir: res.Dir, info: &res.Info, only: true}
	st := runJob(ctx, o, rec, i, &o.Campaign.Jobs[i])
	res.Info.Ended = time.Now().UTC()
	switch {
	case ctx.Err() != nil:
		res.Info.Status = resultsdb.CampaignInterrupted
	case st != JobPassed:
		res.Info.Status = resultsdb.CampaignFailed
	default:
		res.Info.Status = resultsdb.CampaignPassed
	}
	o.Progress.Done(res.Info)
	return res, rec.err
}

// runJob runs one job's steps and records it; it returns its status.
func runJob(ctx context.Context, o Options, rec *recorder, i int, j *campaign.Job) string {
	ji := results.JobInfo{Name: j.Name, Kind: j.Kind(), Status: JobRunning, Started: time.Now().UTC(), Log: j.Name + ".log"}
	rec.info.Jobs = append(rec.info.Jobs, ji)
	job := &rec.info.Jobs[len(rec.info.Jobs)-1]
	rec.saveJob(job)
	o.Progress.Start(i, len(o.Campaign.Jobs), j)
	before, _ := index.FindRuns(o.Root)

	env := Env{Harness: o.Harness, Agent: o.Agent, Root: o.Root, Campaign: rec.info.ID, Job: j.Name,
		JobDir: filepath.Join(rec.dir, j.Name)}
	status, detail := JobPassed, ""
	steps, err := jobSteps(env, j)
	switch {
	case err != nil:
		status, detail = JobError, err.Error()
	case j.Root && os.Geteuid() != 0:
		status, detail = JobError, "needs root (network namespaces or containers): not run"
	default:
		status, detail = runSteps(ctx, o, env, j, steps, filepath.Join(rec.dir, job.Log))
	}
	for _, s := range steps {
		job.Command = append(job.Command, shellQuote(s.Argv))
	}
	job.Ended = time.Now().UTC()
	job.Seconds = job.Ended.Sub(job.Started).Seconds()
	job.Status, job.Detail = status, detail
	rec.indexNew(before)
	rec.saveJob(job)
	o.Progress.End(i, len(o.Campaign.Jobs), *job)
	return status
}

// runSteps runs the steps in order, each to its end (a failing seed does
// not skip the next); it stops at an interruption or the job's timeout.
func runSteps(ctx context.Context, o Options, env Env, j *campaign.Job, steps []Step, logPath string) (string, string) {
	logf, err := os.Create(logPath)
	if err != nil {
		return JobError, err.Error()
	}
	defer logf.Close()
	jctx := ctx
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		jctx, cancel = context.WithTimeout(ctx, j.Timeout)
		defer cancel()
	}
	status, detail := JobPassed, ""
	worse := func(st, d string) {
		rank := map[string]int{JobPassed: 0, JobFailed: 1, JobError: 2, JobInterrupted: 3}
		if rank[st] > rank[status] {
			status, detail = st, d
		}
	}
	for n, s := range steps {
		fmt.Fprintf(logf, "$ %s\n", shellQuote(s.Argv))
		code, err := runStep(jctx, o.Grace, env, s, logf)
		what := fmt.Sprintf("step %d of %d (%s)", n+1, len(steps), shellQuote(s.Argv[1:min(3, len(s.Argv))]))
		switch {
		case ctx.Err() != nil:
			worse(JobInterrupted, what+": interrupted")
			return status, detail
		case jctx.Err() != nil:
			worse(JobError, fmt.Sprintf("%s: stopped at the job's timeout %v", what, j.Timeout))
			return status, detail
		case err != nil:
			worse(JobError, fmt.Sprintf("%s: %v", what, err))
		case code == 1 && s.Judged:
			worse(JobFailed, what+": exit status 1 (a check failed: see its report)")
		case code != 0 && code != 1:
			worse(JobError, fmt.Sprintf("%s: exit status %d", what, code))
		}
	}
	return status, detail
}

// runStep runs one command, its output to log, in its own process group:
// on cancellation the group gets SIGINT, and SIGKILL after grace. The
// child also gets SIGTERM if this process dies (Pdeathsig), so that a
// killed campaign does not leave a run going.
func runStep(ctx context.Context, grace time.Duration, env Env, s Step, log io.Writer) (int, error) {
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env = environ(env, s)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case err = <-done:
		case <-time.After(grace):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}
