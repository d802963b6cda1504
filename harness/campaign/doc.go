// Package campaign runs a campaign file (experiments/campaign) on this
// machine: its jobs in order, each as child harness processes (harness
// run, harness swarm, a study's commands), so that a job that fails or
// crashes does not stop the others. Every run a job makes is an ordinary
// results directory under the results root, tagged in its run.json with
// the campaign and the job (results.CampaignEnv); the campaign's record
// (results.CampaignInfo) is rewritten in RESULTS/campaigns/ID/ as each
// job starts and ends, and the results database is updated as each job
// finishes.
//
// Interrupted (SIGINT or SIGTERM to the harness), the job running gets
// SIGINT, then SIGKILL after Grace; its runs and every finished job's
// stay readable and indexed, and the campaign is recorded as
// interrupted. A campaign killed outright (SIGKILL) leaves its record
// "running" with its PID; harness index records it as interrupted once
// that process is gone.
package campaign
