// Package protocol is the run half of the seam between the testbed core
// and the protocol it tests. The core — experiment parsing, backends,
// impairment, capture, the fault schedule, the results directory and the
// report frame — knows processes, links and events; a protocol plug-in
// knows what its processes are. Data flows one way (experiment → run →
// logs and capture → analysis → report), so a plug-in is three parts:
//
//   - its declaration (package protocols and protocols/NAME), under both
//     halves: its name, its say over an experiment file (roles, sections,
//     the schedule's target words) and the basis of the paper clock;
//   - the run half (this package's Protocol, embedding the declaration),
//     used by harness/runner: each process's configuration file, the
//     command that starts it, and the live observers the schedule needs
//     (a crash target such as "holder");
//   - the analysis half (analysis.Register): its checkers, figures and
//     report sections.
//
// Token passing (seed 002: protocols/tokenpassing, run half
// harness/protocol/tokenpassing) and the FTN lock service (seed 001:
// protocols/ftn, harness/protocol/ftn, servers and clients) are the
// plug-ins; plugins/NAME pairs a protocol's run half with its analysis
// half, and the harness binary links each in by one line of its
// aggregator file (harness/plugins.go).
//
// Adding a protocol: see docs/extending/protocol.md.
package protocol

import (
	"net/netip"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/sim"
	"tokenbed/internal/registry"
	"tokenbed/protocols"
)

// Process is one process of a run as the runner placed it.
type Process struct {
	Instance string // member name: results.Instance(Name, Replica)
	Name     string // name in the experiment
	Replica  int
	Addr     netip.AddrPort
	// Spec is the process's resolved entry of the experiment file (its
	// role and its section of the configuration).
	Spec experiments.Agent
}

// Start says how a process is started.
type Start struct {
	// Join names the member the process joins through; "" at the start
	// of the run and on restarts.
	Join string
	// RTPriority, when not 0, asks the process to run its threads
	// SCHED_FIFO at this priority.
	RTPriority int
	// Verified, in a simulation, is the run's certificate verifications,
	// which its simulated processes share (ca.Verified: the processes of
	// one run are one OS process); nil for real processes, each of which
	// verifies what it loads.
	Verified *ca.Verified
}

// Files are the paths a process's configuration names.
type Files struct {
	CACert      string // the run CA's certificate
	Credentials string // directory with INSTANCE.crt and INSTANCE.key
	// PeerCert gives a peer's certificate file (for processes that start
	// warm, with their peers' keys cached).
	PeerCert func(instance string) string
	Log      string // the process's event log
}

// Protocol is the run half of a protocol plug-in.
type Protocol interface {
	// Declaration is what the analysis half shares: the name, the
	// experiment schema and the paper clock's basis. Its package
	// registers it (protocols.Register).
	protocols.Declaration
	// Config returns p's configuration file. peers are the processes it
	// knows at start (for a process that joins later, the one it joins
	// through); seed is p's own random seed.
	Config(e *experiments.Experiment, p Process, peers []Process, f Files, seed uint64) ([]byte, error)
	// Args is the command line that starts a process (after the binary)
	// with its configuration file cfg.
	Args(cfg string, o Start) []string
	// NominalNS is p's nominal interval of application time in wall
	// nanoseconds (its hold, scaled), or 0 when it has none.
	NominalNS(e *experiments.Experiment, p experiments.Agent) int64
	// NewObserver returns a live observer for one run.
	NewObserver() Observer
}

// Observer follows the processes' logs while a run goes on, for the
// schedule and for progress. The runner calls it from one goroutine.
type Observer interface {
	// Observe feeds one event of instance inst's log, in log order.
	Observe(inst string, e eventlog.Event)
	// Down says inst is not running (crashed, left, exited): it holds
	// nothing any more.
	Down(inst string)
	// Target resolves a schedule target word (e.g. "holder") among the
	// instances of one replica; ok is false when none qualifies now.
	// Words the protocol does not know are never passed here.
	Target(word string, among []string) (inst string, ok bool)
	// Holds names what inst holds, for the crash record ("" if nothing).
	Holds(inst string) string
	// Progress is a count worth showing while the run goes on, and what
	// it counts ("passes").
	Progress() (n int, what string)
}

// Simulated is implemented by a protocol whose processes can run in the
// simulator (harness/sim, backend "sim") as well as real processes: it
// builds, from the configuration file cfg that Config wrote, the process
// that Args would start, with the path of its event log. now is the
// virtual time it starts at.
type Simulated interface {
	SimProcess(cfg string, o Start, now time.Time) (p sim.Process, log string, err error)
}

// SimConfigured is implemented by a Simulated protocol that can keep a
// simulated process's configuration in memory, so that a simulation
// writes and parses no configuration files: SimConfig takes Config's
// arguments, and the SimStart it returns builds, at each start, the
// process SimProcess would build from the file Config writes. A file
// lists every peer a process knows: n processes that know each other
// write and parse n(n-1) entries, which made a simulation's set-up
// quadratic in n (BenchmarkSetup in harness/sim); in memory, what is the
// same for every process can be shared.
type SimConfigured interface {
	SimConfig(e *experiments.Experiment, p Process, peers []Process, f Files, seed uint64) (SimStart, error)
}

// SimStart starts a simulated process from the configuration it holds
// (SimConfigured), as SimProcess does from a file; it is called again for
// each restart.
type SimStart func(o Start, now time.Time) (p sim.Process, log string, err error)

// Default is the protocol of an experiment file that names none.
const Default = protocols.Default

var runHalves = registry.New[Protocol]("protocol")

// Register makes a protocol's run half known to the runner by its
// declaration's name. Plug-ins call it from init; registering a name twice
// panics.
func Register(p Protocol) { runHalves.Register(p.Name(), p) }

// Names lists the registered protocols, sorted.
func Names() []string { return runHalves.Names() }

// Lookup returns the named protocol ("" is Default), or an error listing
// the registered ones.
func Lookup(name string) (Protocol, error) {
	if name == "" {
		name = Default
	}
	return runHalves.Lookup(name)
}
