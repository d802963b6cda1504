package passing

import (
	"time"

	"tokenbed/agent/wire"
	"tokenbed/internal/registry"
)

// An Exchange is one variant of the passing operation: the sender and
// receiver machines that the Endpoint runs for each session. The Endpoint
// (sessions, soft state, effects) is the same for every variant; only the
// datagrams exchanged and the timers differ. Variants register by name
// (RegisterExchange) and an agent selects one with Config.Exchange (the
// `exchange` field of the agent's passing section).
type Exchange interface {
	// PassIDs says whether the variant's passes carry a random id drawn
	// by the sender (004 §4); the Endpoint then draws one per pass.
	PassIDs() bool
	// NewSender starts a pass with random id id (0 when PassIDs is
	// false) and returns the first datagram to send.
	NewSender(cfg *Config, now time.Time, id uint64) (SenderMachine, Output)
	// NewReceiver answers move, the first valid Move of a session.
	NewReceiver(cfg *Config, now time.Time, move Msg) (ReceiverMachine, Output)
	// Next is the datagram that the side which sent a first datagram of
	// type sent sends next when all goes well, if any: what a driver may
	// sign ahead of need while the round trip is under way.
	Next(sent wire.Type) (wire.Type, bool)
}

// SenderMachine is the sending side of one passing operation.
type SenderMachine interface {
	// Step handles an authenticated datagram of this session from the peer.
	Step(now time.Time, m Msg) Output
	// Tick fires the timer if its deadline has passed.
	Tick(now time.Time) Output
	// PassID is the random id of the pass (0: the variant has none).
	PassID() uint64
	// Deadline returns when Tick must be called next, if ever.
	Deadline() (time.Time, bool)
	// Status is the machine's state: AwaitAck while the sender still
	// owns the token and waits for the Ack.
	Status() SenderState
	// Started is when the first Move was sent.
	Started() time.Time
	// skipAck implements FaultSkipAckCheck: behave as if the Ack had
	// arrived.
	skipAck(now time.Time) Output
}

// ReceiverMachine is the receiving side of one passing operation.
type ReceiverMachine interface {
	Step(now time.Time, m Msg) Output
	// Waits reports whether the receiver waits for the Commit of the
	// pass with random id id (variants without ids: id 0).
	Waits(id uint64) bool
	Tick(now time.Time) Output
	Deadline() (time.Time, bool)
	// Supersede ends the receiver because a newer session of its token
	// reached this agent (see Receiver.Supersede).
	Supersede() Output
	// Status is the machine's state: AwaitCommit while it waits for the
	// Commit, ReceiverExpired once it can be dropped.
	Status() ReceiverState
}

// The registered exchanges.
const (
	// Exchange4Way is 002 §3's Move, Ack, Commit, EarlyStop, with retries.
	Exchange4Way = "4way"
	// Exchange3Way is 004 §4's token passing message, acknowledgement and
	// commitment, each sent once.
	Exchange3Way = "3way"
	// DefaultExchange is the exchange of a configuration that names none.
	DefaultExchange = Exchange4Way
)

var exchanges = registry.New[Exchange]("exchange")

// RegisterExchange adds an exchange under name; registering a name twice
// panics.
func RegisterExchange(name string, x Exchange) { exchanges.Register(name, x) }

// Exchanges lists the registered exchanges, sorted.
func Exchanges() []string { return exchanges.Names() }

// LookupExchange returns the exchange registered under name ("" is the
// default), or an error listing the known names.
func LookupExchange(name string) (Exchange, error) {
	if name == "" {
		name = DefaultExchange
	}
	return exchanges.Lookup(name)
}

func init() {
	RegisterExchange(Exchange4Way, fourWay{})
	RegisterExchange(Exchange3Way, threeWay{})
}

// fourWay is 002 §3's exchange: Sender and Receiver.
type fourWay struct{}

// PassIDs: 002's passes are told apart by their session alone.
func (fourWay) PassIDs() bool { return false }

func (fourWay) NewSender(cfg *Config, now time.Time, _ uint64) (SenderMachine, Output) {
	s, out := NewSender(cfg, now)
	return s, out
}

func (fourWay) NewReceiver(cfg *Config, now time.Time, move Msg) (ReceiverMachine, Output) {
	r, out := NewReceiver(cfg, now, move.Cert)
	return r, out
}

func (fourWay) Next(sent wire.Type) (wire.Type, bool) {
	switch sent {
	case wire.Move:
		return wire.Commit, true
	case wire.Ack:
		return wire.EarlyStop, true
	}
	return 0, false
}
