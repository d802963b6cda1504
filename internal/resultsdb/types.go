package resultsdb

import (
	"database/sql"
	"time"
)

// Campaign is one row of campaigns: one execution of a campaign file.
type Campaign struct {
	ID       string
	File     string // the campaign file, or "(embedded)"
	Started  time.Time
	Ended    time.Time
	Status   string // running | passed | failed | interrupted
	Revision string // the harness's revision, with "-dirty" when its tree had changes
	Host     string
}

// Campaign statuses.
const (
	CampaignRunning     = "running"
	CampaignPassed      = "passed"
	CampaignFailed      = "failed"
	CampaignInterrupted = "interrupted"
)

// Job is one row of jobs: one job of a campaign.
type Job struct {
	Campaign string
	Name     string
	Kind     string // experiment | study
	Status   string // running | passed | failed | error | interrupted
	Started  time.Time
	Ended    time.Time
	Seconds  float64
	Detail   string // why it failed, or what it ran
}

// Run is one row of runs: one results directory.
type Run struct {
	ID         string
	Campaign   string // "" for a run outside any campaign
	Job        string
	Experiment string
	Protocol   string
	Backend    string
	Revision   string
	Dirty      bool
	Seed       uint64
	Host       string
	Cores      int
	Kernel     string
	Started    time.Time
	Ended      time.Time
	Status     string // pass | fail | error | interrupted | running
	Overrides  string // JSON object: experiment field path → value, as the campaign set them
	Dir        string // relative to the results root
	Damaged    string // "" or why the directory could not be fully read
}

// Run statuses.
const (
	RunPass        = "pass"
	RunFail        = "fail"
	RunError       = "error"
	RunInterrupted = "interrupted"
	RunRunning     = "running"
)

// Check is one row of checks: one check's verdict in one run.
type Check struct {
	Run     string
	Name    string
	Verdict string // pass | fail | not_judged
	Value   string
	Detail  string
}

// Figure is one row of figures: one number a run measured. Lo and Hi are
// its interval and Paper the paper's figure, each NULL (Valid false)
// where none exists.
type Figure struct {
	Run   string
	Name  string
	Value sql.Null[float64]
	Unit  string
	N     int // samples behind Value; 0 when it is not a statistic of samples
	Lo    sql.Null[float64]
	Hi    sql.Null[float64]
	Paper sql.Null[float64]
}

// Sample is one row of samples: the values behind a figure, for
// distribution tests across nights.
type Sample struct {
	Run  string
	Name string
	Vals []float64
}

// Indexed is everything the database holds about one run: written
// together by PutRun, replacing what was there.
type Indexed struct {
	Run     Run
	Checks  []Check
	Figures []Figure
	Samples []Sample
}

// Val is a present nullable float.
func Val(v float64) sql.Null[float64] { return sql.Null[float64]{V: v, Valid: true} }
