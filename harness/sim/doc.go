// Package sim is the testbed's deterministic simulator: the
// processes of a protocol, unchanged, on the userspace engine's model of
// netem, in virtual time. It is a backend like the others (registered as
// "sim"): the runner (harness/runner) loads the experiment, expands its
// schedule, writes the results directory and the credentials exactly as
// for real processes, makes every process's configuration (in memory
// when its protocol can keep it there, protocol.SimConfigured; else its
// file), and analysis reads the results without knowing where they came
// from. Data flows one
// way, as for every run: experiment → run (processes or this simulation)
// → logs and capture → analysis → report.
//
// # Processes
//
// A Process is the small interface any protocol process implements to be
// simulated: Start, Receive (a datagram in, at a time), Tick and Deadline
// (timers), Stop (a clean exit); each call returns an Output, the events
// to log and the datagrams to send. agent/node.Node fits it through the
// token passing plug-in (harness/protocol/tokenpassing), built by the
// same code as `agent run` builds it (agent/config: Resolved.Node), with
// real Ed25519 signatures and certificates from the run's CA. A lock
// service's servers and clients (seed 001) fit it the same way: the
// simulator knows addresses, datagrams and events, nothing of a protocol.
//
// # Time and order
//
// One event loop, one goroutine, ordered by (virtual time, sequence
// number): nothing races and nothing depends on map order or the wall
// clock. Virtual time starts at Config.Epoch on the processes' wall clock
// and at Config.MonoBase on their monotonic clock; logs and the capture are
// stamped with it. Every random choice comes from the run's seed: a
// process's from its configuration (the runner splits the seed per
// process, as for real runs), a direction's from the seed and its two
// addresses (userspace.DirectionSeed, as the engine does).
//
// # Links
//
// Each direction is a userspace.Qdisc with its netem.Profile: delay,
// jitter, correlation and distribution tables, every loss model,
// duplicate, reorder, corrupt, rate and limit. A datagram leaves its
// sender as an IPv4/UDP packet, is recorded on the sender's interface,
// goes through the direction's model and, at the time the model gives,
// is recorded on the receiver's interface and handed to the receiving
// process, if one runs there; a corrupted packet whose checksums fail is
// dropped there, as the kernel drops it. SetProfile replaces a
// direction's model (outages are 100% loss, as on the real backends);
// packets already in flight keep their times, as in the engine.
//
// # Processing time
//
// A process is busy for VerifyTime per datagram it handles and SignTime
// per datagram it sends; a datagram that arrives while it is busy waits,
// and what it sends leaves when the work is done. The defaults are the
// agent's own Ed25519 costs on this machine (BenchmarkVerify and
// BenchmarkSign in agent/wire).
//
// # Workers
//
// The loop is one goroutine, but a process may hand the simulator work
// that depends on nothing but its inputs and checks what it declared
// (Output.Ahead): an agent declares the key each datagram it sends is
// signed with, and the receiver's Verify takes the declaration as its
// answer (agent/wire.VerifyAhead) while the simulator's workers verify
// every such datagram beside the loop; a declaration that does not
// verify voids the run (RunUntil and Close return the error). The loop
// never waits for a verification, so the signatures of one pass and the
// verifications of the one before run on two cores; no output changes
// (TestSameSeedSameBytes runs with workers and without). The sender's
// presigning (Output.After) runs in the loop meanwhile.
//
// # Scale
//
// A direction's profile is interned and its netem model built at its
// first datagram: n agents have n(n-1) directions, and most never carry
// one (BenchmarkScale). n agents that know each other would write and
// parse n(n-1) peer entries in their configuration files, and, starting
// warm, verify n(n-1) certificates: the token passing plug-in keeps the
// configurations in memory, and the agents of one run share their
// certificate verifications (protocol.Start.Verified, ca.Verified), which
// is sound within one process only: the same bytes, verified once
// against the same CA (BenchmarkSetup).
//
// # Faults
//
// Crash drops a process and its state (SIGKILL: nothing more is logged);
// Stop lets it log its exit (SIGTERM); a restart is a new process from the
// same configuration, logging to the same file with its sequence numbers
// from 1, as a restarted agent does.
package sim
