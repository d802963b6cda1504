// Package circulation defines how a circulation policy plugs into the
// token passing operation: the routing rule that decides how long an agent
// keeps a token, whom it passes it to, when a token is presumed lost and
// regenerated, and which tokens are spurious (002 §2: the passing
// operation is orthogonal to the routing rule).
//
// A policy is a pure state machine like the passing machines: it reads no
// clock and does no I/O. The node calls it on the events below, with the
// current time, and carries out the Actions it returns. Implementations:
// package randomwalk (002 §3.2), package wandering (seed 003), package
// wandering004 (seed 004) and package baseline (the uncoordinated
// reference of 003 §3 and 004 §2, which holds no token).
//
// Policies register by role name (Register, from their package's init);
// the agent builds the configured one with New, and an unknown role is an
// error listing the registered ones. Adding a policy is one package and
// its registration line (docs/extending/circulation-policy.md).
package circulation

import (
	"math/rand/v2"
	"time"

	"tokenbed/agent/wire"
)

// Host is what a policy may ask of the agent that runs it.
type Host interface {
	// Self is the agent's member name.
	Self() string
	// Peers lists the members in the agent's directory, self excluded,
	// sorted by name. The slice is the agent's: read it, never modify it.
	Peers() []string
	// Rand is the agent's seeded random source.
	Rand() *rand.Rand
}

// ActionKind says what an Action asks for.
type ActionKind uint8

const (
	// Pass asks to pass Token to Peer with the passing operation.
	Pass ActionKind = iota + 1
	// Discard asks to drop the held Token; Reason says why (e.g. "sandwich").
	Discard
	// Generate asks for a new token; Reason says why: "start", "join"
	// or "loss" (regeneration after a presumed loss, 002 §3.2).
	Generate
	// OpStart reports that the protected operation A starts now (seed 003
	// Fig. 1 lines 24 and 31): the node logs op_started with Token (zero
	// for a policy without a token) and Reason. OpEnd reports that it
	// ends: op_finished. The policy decides when A runs and for how long
	// (Δop); a driver may hook a real operation to the two events.
	OpStart
	OpEnd
)

// Action is a request from the policy to its node.
type Action struct {
	Kind   ActionKind
	Token  wire.TokenID
	Peer   string
	Reason string
	Detail string // for the event log
}

// How says how a token came to be held.
type How uint8

const (
	// ByPass: received with a Commit.
	ByPass How = iota + 1
	// ByGeneration: generated here (Action Generate).
	ByGeneration
)

// Policy is a circulation policy.
type Policy interface {
	// Name is the policy's name in configuration files and logs.
	Name() string
	// Start is called once when the agent starts.
	Start(h Host, now time.Time) []Action
	// Acquired reports that the agent now holds t. reason is the Generate
	// reason for generated tokens.
	Acquired(now time.Time, t wire.TokenID, how How, reason string) []Action
	// Passed reports that t left the agent for peer (its Ack arrived).
	Passed(now time.Time, t wire.TokenID, peer string) []Action
	// PassFailed reports that passing t to peer failed: the agent still
	// holds t and must route it again (002 §3: "another receiver is
	// selected").
	PassFailed(now time.Time, t wire.TokenID, peer string) []Action
	// Tick is called at or after the time Deadline returned.
	Tick(now time.Time) []Action
	// Deadline returns when Tick must be called next, if ever.
	Deadline() (time.Time, bool)
}

// Describer is a policy configuration with figures of its own, derived
// from its parameters and the membership's size, for the agent's start
// record (agent_started's detail): e.g. seed 004's k_load.
type Describer interface {
	// Describe returns "name=value ..." for a membership of members
	// agents, the agent included.
	Describe(members int) string
}
