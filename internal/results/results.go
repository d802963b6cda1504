// Package results is the layout of a run's results directory,
// results/<run-id>/, which the harness writes and analysis reads. Data
// flows one way: nothing in a results directory is read back by the
// harness while it runs.
//
// It is also where the harness and analysis agree on what both read: the
// instance naming rule (Instance, ParseInstance: "A.r3") and the paper
// clock (PaperClock, on a basis the protocol plug-in supplies).
//
//	run.json            RunInfo: run id, experiment, protocol, seed, git revision, kernel, backend, impairment path, times
//	experiment.yaml     the experiment file as given (a copy)
//	topology.json       Topology: every agent's address, namespace and interface, every direction's profile
//	ca/ca.crt           the CA certificate: the only datum needed to verify every signature offline
//	ca/NAME.crt         members' certificates (their keys stay out of results)
//	logs/NAME.jsonl     agent event logs (agent/eventlog schema)
//	logs/harness.jsonl  harness actions on the same clocks
//	logs/NAME.stderr    the agent process's standard error
//	capture.pcapng      every agent interface, with harness annotations
//	report.md, summary.json, junit.xml, plots/*.png, bundles/*   written by analysis
//	samples.json        written by analysis: the samples behind the figures (name → values)
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The environment a campaign gives the harness processes it starts, so
// that every run of a job (a swarm's, a study's) is tagged in its
// run.json whichever verb made it: the campaign ID, the job's name, and
// its overrides as a JSON object.
const (
	CampaignEnv  = "TOKENBED_CAMPAIGN"
	JobEnv       = "TOKENBED_JOB"
	OverridesEnv = "TOKENBED_OVERRIDES"
)

// File names inside a results directory.
const (
	RunFile        = "run.json"
	ExperimentFile = "experiment.yaml"
	TopologyFile   = "topology.json"
	CADir          = "ca"
	CACertFile     = "ca.crt" // the CA certificate in CADir
	LogsDir        = "logs"
	HarnessLog     = "harness.jsonl"
	CaptureFile    = "capture.pcapng"
	ReportFile     = "report.md"
	SummaryFile    = "summary.json"
	JUnitFile      = "junit.xml"
	SamplesFile    = "samples.json"
	PlotsDir       = "plots"
	BundlesDir     = "bundles"
)

// ReplicaCACert is replica rep's CA certificate in CADir, where it is not
// CACertFile: a run merged from shards that each made their own CA.
func ReplicaCACert(rep int) string { return fmt.Sprintf("ca.r%d.crt", rep) }

// RunInfo describes a run.
type RunInfo struct {
	RunID      string `json:"run_id"`
	Experiment string `json:"experiment"`
	Seed       uint64 `json:"seed"`
	// GitRevision is the commit the harness was built from (its VCS
	// stamp) or, when the build has none, the tokenbed tree's HEAD asked
	// at run time; "-dirty" appended when the tree had changes
	// (internal/revision). RevisionSource says which: build | git.
	GitRevision    string `json:"git_revision"`
	RevisionSource string `json:"revision_source,omitempty"`
	Kernel         string `json:"kernel"`
	Host           string `json:"host,omitempty"`
	Cores          int    `json:"cores,omitempty"`
	// Campaign and Job tag a run that a campaign started (CampaignEnv);
	// Overrides are the experiment fields the campaign's job set, path →
	// value as written in the campaign file (experiment.yaml holds the
	// experiment after them).
	Campaign  string            `json:"campaign,omitempty"`
	Job       string            `json:"job,omitempty"`
	Overrides map[string]string `json:"overrides,omitempty"`
	Backend   string            `json:"backend"` // netns | container
	// Protocol is the protocol plug-in the processes ran (package
	// protocol); empty in runs before it was recorded: token passing.
	Protocol   string  `json:"protocol,omitempty"`
	Impairment string  `json:"impairment"` // kernel | userspace | uml
	ImpairWhy  string  `json:"impairment_reason"`
	TimeScale  float64 `json:"time_scale"`
	NetScale   float64 `json:"network_time_scale"`
	Replicas   int     `json:"replicas"`
	// The paper timeline: its length, and the length of the consecutive
	// shard each replica replays (replica r covers [r×shard, (r+1)×shard)).
	PaperSeconds float64 `json:"paper_seconds"`
	ShardSeconds float64 `json:"shard_seconds"`
	// AgentsStartNS is the wall time (ns) the agents were started: paper
	// time 0 of every replica's PaperClock.
	AgentsStartNS int64     `json:"agents_start_ns"`
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished,omitempty"`
	Status        string    `json:"status"` // running | ok | error | interrupted | killed (found dead by clean or analyze)
	Error         string    `json:"error,omitempty"`
	// A run merged from shards (harness merge): ReplicaStartNS[r] is
	// replica r's AgentsStartNS where the shards started apart (empty
	// when they all started at once, as simulated shards do);
	// MissingShards ("K/N") and MissingReplicas are the shards the merge
	// was not given and their replicas, which no check saw.
	ReplicaStartNS  []int64  `json:"replica_start_ns,omitempty"`
	MissingShards   []string `json:"missing_shards,omitempty"`
	MissingReplicas []int    `json:"missing_replicas,omitempty"`
	// HostCPU is what the host's CPUs did while the agents ran; absent
	// in a simulation and in runs before it was recorded.
	HostCPU *HostCPU `json:"host_cpu,omitempty"`
	// Engine is how faithful the userspace netem engine was, when the
	// run went through it.
	Engine *EngineFidelity `json:"engine,omitempty"`
}

// EngineFidelity is the userspace engine's own account of its timing
// (netem/userspace Stats): how many datagrams it released, and how many
// of those over 1 ms after their time.
type EngineFidelity struct {
	Realtime    bool   `json:"realtime"` // the relay thread ran SCHED_FIFO
	BiasNS      int64  `json:"bias_ns"`  // its wake-up compensation at the end
	Delivered   uint64 `json:"delivered"`
	LateOver1ms uint64 `json:"late_over_1ms"`
}

// HostCPU is the host's CPU time over a run on real processes, summed
// over all CPUs, from /proc/stat (internal/cpustat).
type HostCPU struct {
	WallS float64 `json:"wall_s"`
	BusyS float64 `json:"busy_s"`
	// StealS is CPU time the hypervisor gave to someone else while the
	// CPUs had work; StealFraction is StealS / (BusyS + StealS).
	StealS        float64 `json:"steal_s"`
	StealFraction float64 `json:"steal_fraction"`
	// WorstStealS is the most stolen in one second, at WorstStealAt.
	WorstStealS  float64   `json:"worst_steal_s"`
	WorstStealAt time.Time `json:"worst_steal_at,omitzero"`
	// Error is the reading that failed; the figures stop before it.
	Error string `json:"error,omitempty"`
	// LatencyBoundUS is the PM QoS CPU latency bound the run held while
	// the agents ran (µs; 0: idle CPUs poll), absent when it held none;
	// LatencyError says why a bound asked for was not held.
	LatencyBoundUS *int64 `json:"latency_bound_us,omitempty"`
	LatencyError   string `json:"latency_error,omitempty"`
}

// StartNS is replica rep's AgentsStartNS: paper time 0 of its clock.
func (i RunInfo) StartNS(rep int) int64 {
	if rep >= 0 && rep < len(i.ReplicaStartNS) && i.ReplicaStartNS[rep] != 0 {
		return i.ReplicaStartNS[rep]
	}
	return i.AgentsStartNS
}

// AgentInfo is one agent process of a run.
type AgentInfo struct {
	Name      string `json:"name"`      // the agent's name in the experiment (A, B, C)
	Replica   int    `json:"replica"`   // 0-based replica of the topology
	Instance  string `json:"instance"`  // its member name in logs and datagrams: Name, or Name.rN for replica N > 0
	Addr      string `json:"addr"`      // IP:PORT it binds and signs as
	Namespace string `json:"namespace"` // network namespace or container name
	Interface string `json:"interface"` // its interface toward the others
	Log       string `json:"log"`       // relative to the results directory
	// HoldNS is the agent's nominal hold in wall time (the configured
	// paper hold divided by the time scale); 0 when its role has no fixed
	// hold. PaperClock stretches holds up to it.
	HoldNS int64 `json:"hold_ns,omitempty"`
}

// DirectionInfo is the profile applied from one agent to another.
type DirectionInfo struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Profile string `json:"profile"` // tc netem syntax, as applied (after network scaling)
	Paper   string `json:"paper"`   // as written in the experiment
}

// Topology is what the harness built.
type Topology struct {
	Agents     []AgentInfo     `json:"agents"`
	Directions []DirectionInfo `json:"directions"`
	Port       uint16          `json:"port"`
}

// WriteJSON writes v to dir/name atomically (write, fsync, rename).
func WriteJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// ReadJSON reads dir/name into v.
func ReadJSON(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
