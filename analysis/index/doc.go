// Package index reads results directories into the results database
// (internal/resultsdb): each run's run.json, summary.json and
// samples.json, and each campaign's record (results.CampaignInfo). The
// directories stay the source of truth; Rebuild recreates the database
// from them at any time.
//
// A directory from an older version, or a damaged one, is indexed as far
// as it can be read: what could not be read is named in the run's
// damaged column, and nothing about it is fatal. A directory under the
// root is a run when it holds run.json, summary.json or experiment.yaml
// (a run killed before its run.json was written still has its
// experiment); other directories (a study's output) are looked into, two
// levels deep, for runs (a swarm's kept seeds are results/swarm-ID/…).
package index
