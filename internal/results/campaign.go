package results

import "time"

// CampaignsDir is where, under the results root, each campaign keeps its
// record: CampaignsDir/ID/campaign.json (CampaignInfo) and the campaign
// file it ran (CampaignFileCopy). The runs of its jobs are ordinary
// results directories under the root, tagged in their run.json.
const (
	CampaignsDir     = "campaigns"
	CampaignFile     = "campaign.json"
	CampaignFileCopy = "campaign.yaml"
	// JobsDir holds, in a campaign's directory, the records of the jobs
	// run one by one as Slurm tasks (harness campaign run --job):
	// JobsDir/JOB.json, a JobInfo each. The index adds them to the
	// campaign's jobs; without a campaign.json they make the campaign.
	JobsDir = "jobs"
)

// CampaignInfo is one campaign's record, rewritten as each job starts and
// ends: a campaign killed at any point leaves what had finished.
type CampaignInfo struct {
	ID       string    `json:"id"`
	File     string    `json:"file"` // as given, or "(embedded)"
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
	Status   string    `json:"status"` // running | passed | failed | interrupted
	Revision string    `json:"revision"`
	Host     string    `json:"host"`
	// PID is the harness process running the campaign: a record still
	// "running" whose process is gone was killed.
	PID  int       `json:"pid"`
	Jobs []JobInfo `json:"jobs"`
}

// JobInfo is one job of a campaign.
type JobInfo struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`   // experiment | study
	Status  string    `json:"status"` // running | passed | failed | error | interrupted
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	Seconds float64   `json:"seconds"`
	// Detail is why the job failed, or what it ran.
	Detail string `json:"detail,omitempty"`
	// Command is the command line the job ran, to repeat it by hand.
	Command []string `json:"command,omitempty"`
	// Log is the job's output, relative to the campaign's directory.
	Log string `json:"log,omitempty"`
}
