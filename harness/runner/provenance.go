package runner

import (
	"encoding/json"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"tokenbed/internal/results"
	"tokenbed/internal/revision"
)

// Provenance is provenance for records other than a run's (a swarm's).
func Provenance(info *results.RunInfo) error { return provenance(info) }

// GitRevision is the harness's revision as run.json records it
// (internal/revision), which a shard's shard.json carries too.
func GitRevision() string { return revision.Current().String() }

// provenance fills what run.json records about where and from what the
// run ran: the revision (internal/revision: the build's stamp, or git at
// run time), the host, and the campaign's tags from the environment
// (results.CampaignEnv), so that a night's run names its commit and its
// job whichever verb started it.
func provenance(info *results.RunInfo) error {
	rev := revision.Current()
	info.GitRevision, info.RevisionSource = rev.String(), rev.Source
	info.Kernel = kernelRelease()
	info.Host, _ = os.Hostname()
	info.Cores = runtime.NumCPU()
	info.Campaign, info.Job = os.Getenv(results.CampaignEnv), os.Getenv(results.JobEnv)
	if o := os.Getenv(results.OverridesEnv); o != "" {
		if err := json.Unmarshal([]byte(o), &info.Overrides); err != nil {
			return &envError{results.OverridesEnv, err}
		}
	}
	return nil
}

// envError is a campaign tag in the environment that cannot be read: the
// run would not be reproducible from its run.json, so it does not start.
type envError struct {
	name string
	err  error
}

func (e *envError) Error() string { return e.name + ": " + e.err.Error() }
func (e *envError) Unwrap() error { return e.err }

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
}
