package passing

import (
	"fmt"
	"time"

	"tokenbed/agent/wire"
)

// Config holds the timeouts and retry limits of the passing operation.
// Retries count resends after the first send.
type Config struct {
	// Exchange names the variant of the operation (RegisterExchange):
	// "4way" (002 §3, the default when empty) or "3way" (004 §4). The
	// fields below are read by the 4-way exchange; the 3-way one reads
	// MoveTimeout (its wait for the Ack), AckTimeout (its wait for the
	// Commit) and AckRetries (see threeway.go).
	Exchange string
	// MoveTimeout is how long the sender waits for an Ack before it resends
	// the Move, with its certificate from the first resend on (002 §3).
	MoveTimeout time.Duration
	// MoveRetries is how many times the Move is resent before the pass
	// fails and the sender keeps the token. The paper suggests 2 (002 §3).
	MoveRetries int
	// AckTimeout is how long the receiver waits for a Commit before it
	// resends the Ack.
	AckTimeout time.Duration
	// AckRetries is how many times the Ack is resent before the receiver
	// gives up and considers that the sender still holds the token.
	AckRetries int
	// CommitTimeout is how long the sender waits for an EarlyStop before it
	// resends the Commit.
	CommitTimeout time.Duration
	// CommitRetries is how many times the Commit is resent; the pass
	// succeeds either way. The paper suggests 10 (002 §3).
	CommitRetries int
	// Linger is how long a receiver that gave up still accepts a late
	// Commit of that session; 0 means the paper's behaviour (never).
	Linger time.Duration
	// Seed seeds the random ids that the 3-way exchange's sender draws
	// for its passes (004 §4), mixed with the agent's name. An agent sets
	// it from its own seed (agent/config), which the harness derives from
	// the experiment's seed and the agent's name and the agent logs in
	// agent_started, so a run replays with the same ids.
	Seed uint64
	// Fault breaks the protocol on purpose, to prove that the testbed's
	// checks catch a broken agent. Never set outside tests.
	Fault Fault
}

// Fault is a deliberate protocol violation, for testing the testbed.
type Fault uint8

const (
	NoFault Fault = iota
	// FaultSkipAckCheck: the sender does not wait for a valid Ack; it
	// commits and lets the token go as soon as its Move is out. A lost
	// Move then loses the token (requirement i).
	FaultSkipAckCheck
	// FaultAcquireOnMove: the receiver takes the token on the Move, while
	// the sender still holds it: two holders (requirement ii).
	FaultAcquireOnMove
)

// Faults by name, as the agent's --fault flag takes them.
var Faults = map[string]Fault{"": NoFault, "skip_ack_check": FaultSkipAckCheck, "acquire_on_move": FaultAcquireOnMove}

// DefaultConfig returns the paper's retry limits with timeouts suited to
// the 20-day experiment's Internet paths (RTT up to a few hundred ms).
func DefaultConfig() Config {
	c := Config{
		MoveTimeout:   500 * time.Millisecond,
		MoveRetries:   2,
		AckTimeout:    500 * time.Millisecond,
		AckRetries:    4,
		CommitTimeout: 500 * time.Millisecond,
		CommitRetries: 10,
	}
	c.Linger = c.DefaultLinger()
	return c
}

// DefaultLinger is the time a sender may go on sending Commits after the
// Ack it answers: one Commit timeout per Commit send.
func (c Config) DefaultLinger() time.Duration {
	return time.Duration(c.CommitRetries+1) * c.CommitTimeout
}

// Validate reports the first invalid field by name.
func (c Config) Validate() error {
	if _, err := LookupExchange(c.Exchange); err != nil {
		return fmt.Errorf("exchange: %v", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"move_timeout", c.MoveTimeout}, {"ack_timeout", c.AckTimeout}, {"commit_timeout", c.CommitTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s: must be positive, got %v", d.name, d.v)
		}
	}
	for _, r := range []struct {
		name string
		v    int
	}{{"move_retries", c.MoveRetries}, {"ack_retries", c.AckRetries}, {"commit_retries", c.CommitRetries}} {
		if r.v < 0 || r.v > 1000 {
			return fmt.Errorf("%s: must be in 0..1000, got %d", r.name, r.v)
		}
	}
	if c.Linger < 0 {
		return fmt.Errorf("linger: must not be negative, got %v", c.Linger)
	}
	return nil
}

// Scaled returns c with every duration divided by k (compressed time).
func (c Config) Scaled(k float64) Config {
	div := func(d time.Duration) time.Duration { return time.Duration(float64(d) / k) }
	c.MoveTimeout = div(c.MoveTimeout)
	c.AckTimeout = div(c.AckTimeout)
	c.CommitTimeout = div(c.CommitTimeout)
	c.Linger = div(c.Linger)
	return c
}

// Send asks for one datagram of the session to be sent to the peer.
type Send struct {
	Type     wire.Type
	Attempt  int    // 1 for the first send of this type in the session
	WithCert bool   // piggyback the sender's certificate
	PassID   uint64 // the pass's random id (3-way), 0 for none
}

// Outcome is what a machine concluded on a step.
type Outcome uint8

const (
	NoOutcome Outcome = iota
	// Succeeded: the sender got a valid Ack; the token is no longer its own.
	Succeeded
	// Completed: the sender is done (EarlyStop, or Commit retries used up).
	Completed
	// Failed: sender, Move retries used up (it keeps the token); receiver,
	// Ack retries used up (the sender is considered to keep it).
	Failed
	// Acquired: the receiver got a valid Commit and holds the token.
	Acquired
	// Expired: a receiver's linger time ended; the machine can be dropped.
	Expired
)

// Output is the result of one step of a machine.
type Output struct {
	Send    *Send
	Outcome Outcome
	// Reason, for Completed: "earlystop" or "commit_retries"; for Failed:
	// "ack_timeout" or "commit_timeout"; for Succeeded, set only when the
	// sender is done with this step's send ("commit_sent", 3-way): the
	// pass completes at once.
	Reason  string
	Late    bool   // Acquired by a Commit that came after the receiver gave up
	Ignored string // non-empty when the message was not acceptable in this state: the reason
}

// SenderState is the state of a Sender (002 Fig. 2).
type SenderState uint8

const (
	AwaitAck     SenderState = iota // Move sent, waiting for an Ack
	Committing                      // Ack received, Commits sent until an EarlyStop
	SenderDone                      // EarlyStop received or Commit retries used up
	SenderFailed                    // Move retries used up: the sender keeps the token
)

var senderStateNames = [...]string{"await-ack", "committing", "done", "failed"}

func (s SenderState) String() string { return senderStateNames[s] }

// Sender is the sending side of one passing operation.
type Sender struct {
	cfg      *Config
	State    SenderState
	attempts int // sends of the current datagram type
	deadline time.Time
	Start    time.Time // first Move sent
}

// NewSender starts a pass: it asks for the first Move.
func NewSender(cfg *Config, now time.Time) (*Sender, Output) {
	s := &Sender{cfg: cfg, State: AwaitAck, attempts: 1, deadline: now.Add(cfg.MoveTimeout), Start: now}
	return s, Output{Send: &Send{Type: wire.Move, Attempt: 1}}
}

// skipAck is FaultSkipAckCheck: behave as if the Ack had arrived.
func (s *Sender) skipAck(now time.Time) Output {
	s.State, s.attempts, s.deadline = Committing, 1, now.Add(s.cfg.CommitTimeout)
	return Output{Outcome: Succeeded, Send: &Send{Type: wire.Commit, Attempt: 1}}
}

// Holds reports whether the sender still owns the token.
func (s *Sender) Holds() bool { return s.State == AwaitAck || s.State == SenderFailed }

// Status returns the sender's state.
func (s *Sender) Status() SenderState { return s.State }

// Started returns when the first Move was sent.
func (s *Sender) Started() time.Time { return s.Start }

// Deadline returns when Tick must be called next, if ever.
func (s *Sender) Deadline() (time.Time, bool) {
	if s.State == AwaitAck || s.State == Committing {
		return s.deadline, true
	}
	return time.Time{}, false
}

// PassID returns 0: the 4-way exchange has no per-pass id.
func (s *Sender) PassID() uint64 { return 0 }

// Step handles an authenticated datagram of this session from the peer.
func (s *Sender) Step(now time.Time, m Msg) Output {
	t := m.Type
	switch {
	case s.State == AwaitAck && t == wire.Ack:
		// The pass succeeds: stop all token activity at once and commit (002 §3).
		s.State, s.attempts, s.deadline = Committing, 1, now.Add(s.cfg.CommitTimeout)
		return Output{Outcome: Succeeded, Send: &Send{Type: wire.Commit, Attempt: 1}}
	case s.State == Committing && t == wire.Ack:
		// The receiver resent its Ack: our Commit was lost. Resend at once,
		// counted against the Commit retries.
		if s.attempts > s.cfg.CommitRetries {
			return Output{Ignored: "retries-exhausted"}
		}
		s.attempts++
		s.deadline = now.Add(s.cfg.CommitTimeout)
		return Output{Send: &Send{Type: wire.Commit, Attempt: s.attempts}}
	case s.State == Committing && t == wire.EarlyStop:
		s.State = SenderDone
		return Output{Outcome: Completed, Reason: "earlystop"}
	}
	return refuse(s.State, t)
}

// refuse is a sender's answer, of either exchange, to a datagram its
// state does not take.
func refuse(s SenderState, t wire.Type) Output {
	switch {
	case s == SenderFailed && t == wire.Ack:
		// A late Ack after the pass failed must never be honoured: the
		// token may already be on its way to another peer (004 §4: late
		// messages are discarded).
		return Output{Ignored: "pass-failed"}
	case s == SenderDone:
		return Output{Ignored: "session-done"}
	}
	return Output{Ignored: "unexpected-" + t.String()}
}

// Tick fires the timer if its deadline has passed.
func (s *Sender) Tick(now time.Time) Output {
	if d, ok := s.Deadline(); !ok || now.Before(d) {
		return Output{}
	}
	switch s.State {
	case AwaitAck:
		if s.attempts > s.cfg.MoveRetries {
			s.State = SenderFailed
			return Output{Outcome: Failed, Reason: "ack_timeout"}
		}
		s.attempts++
		s.deadline = now.Add(s.cfg.MoveTimeout)
		return Output{Send: &Send{Type: wire.Move, Attempt: s.attempts, WithCert: true}}
	case Committing:
		if s.attempts > s.cfg.CommitRetries {
			// Success all the same: EarlyStop only shortens the protocol (002 §3).
			s.State = SenderDone
			return Output{Outcome: Completed, Reason: "commit_retries"}
		}
		s.attempts++
		s.deadline = now.Add(s.cfg.CommitTimeout)
		return Output{Send: &Send{Type: wire.Commit, Attempt: s.attempts}}
	}
	return Output{}
}

// ReceiverState is the state of a Receiver (002 Fig. 3).
type ReceiverState uint8

const (
	AwaitCommit     ReceiverState = iota // Ack sent, waiting for a Commit
	ReceiverDone                         // Commit received: the token is acquired
	ReceiverFailed                       // Ack retries used up; lingering for a late Commit
	ReceiverExpired                      // linger over: the machine can be dropped
)

var receiverStateNames = [...]string{"await-commit", "acquired", "failed", "expired"}

func (s ReceiverState) String() string { return receiverStateNames[s] }

// Receiver is the receiving side of one passing operation.
type Receiver struct {
	cfg      *Config
	State    ReceiverState
	attempts int
	deadline time.Time
}

// NewReceiver answers the first valid Move of a session. If the Move
// carried a certificate, the Ack carries ours (see the package doc).
func NewReceiver(cfg *Config, now time.Time, moveHadCert bool) (*Receiver, Output) {
	r := &Receiver{cfg: cfg, State: AwaitCommit, attempts: 1, deadline: now.Add(cfg.AckTimeout)}
	return r, firstAck(cfg, moveHadCert, 0, &r.State)
}

// firstAck is a new receiver's answer to the Move, of either exchange,
// echoing the pass id (0: none); FaultAcquireOnMove makes it take the
// token at once (state *s).
func firstAck(cfg *Config, moveHadCert bool, id uint64, s *ReceiverState) Output {
	out := Output{Send: &Send{Type: wire.Ack, Attempt: 1, WithCert: moveHadCert, PassID: id}}
	if cfg.Fault == FaultAcquireOnMove {
		*s = ReceiverDone
		out.Outcome = Acquired
	}
	return out
}

// Status returns the receiver's state.
func (r *Receiver) Status() ReceiverState { return r.State }

// Deadline returns when Tick must be called next, if ever.
func (r *Receiver) Deadline() (time.Time, bool) {
	if r.State == AwaitCommit || r.State == ReceiverFailed {
		return r.deadline, true
	}
	return time.Time{}, false
}

// Waits reports whether id is 0: the 4-way exchange has no per-pass id.
func (r *Receiver) Waits(id uint64) bool { return id == 0 }

// Step handles an authenticated datagram of this session from the peer.
func (r *Receiver) Step(now time.Time, m Msg) Output {
	t := m.Type
	switch {
	case r.State == AwaitCommit && t == wire.Move:
		// The sender did not get our Ack (or could not check it): resend it
		// at once with our certificate, counted against the Ack retries.
		return reAck(r.cfg, now, &r.attempts, &r.deadline, 0)
	case r.State == ReceiverFailed && t == wire.Move:
		// The sender still holds the token and tries us again (with the same
		// session, 002 §3): start over. Acquisition still needs a Commit.
		r.State, r.attempts, r.deadline = AwaitCommit, 1, now.Add(r.cfg.AckTimeout)
		return Output{Send: &Send{Type: wire.Ack, Attempt: 1, WithCert: true}}
	case (r.State == AwaitCommit || r.State == ReceiverFailed) && t == wire.Commit:
		late := r.State == ReceiverFailed
		r.State = ReceiverDone
		// Exactly one EarlyStop (002 §3).
		return Output{Outcome: Acquired, Late: late, Send: &Send{Type: wire.EarlyStop, Attempt: 1}}
	}
	return refuseAtReceiver(r.State, t)
}

// refuseAtReceiver is a receiver's answer, of either exchange, to a
// datagram its state does not take.
func refuseAtReceiver(s ReceiverState, t wire.Type) Output {
	switch s {
	case ReceiverDone:
		return Output{Ignored: "session-done"}
	case ReceiverExpired:
		return Output{Ignored: "session-expired"}
	}
	return Output{Ignored: "unexpected-" + t.String()}
}

// reAck answers a repeated Move of the session, of either exchange: a new
// Ack with our certificate, echoing pass id id (0: none), and a new wait
// for the Commit, at most AckRetries times (*acks counts the Acks sent),
// so that a replayed Move cannot draw an unbounded stream of replies.
func reAck(cfg *Config, now time.Time, acks *int, deadline *time.Time, id uint64) Output {
	if *acks > cfg.AckRetries {
		return Output{Ignored: "retries-exhausted"}
	}
	*acks++
	*deadline = now.Add(cfg.AckTimeout)
	return Output{Send: &Send{Type: wire.Ack, Attempt: *acks, WithCert: true, PassID: id}}
}

// Supersede ends the receiver because a newer session of its token
// reached this agent. That session exists only because the token was
// acquired in this one by another receiver: the sender's pass to us failed
// (its Moves got no Ack through) and it passed the token elsewhere, so our
// Commit will never come. A receiver still waiting for it has detected the
// failure that its commit timeout would report once the Ack retries ran
// out ("the token passing fails and the destination considers the source
// still holds the token", 002 §3), so it reports it now, as Failed with
// the same reason: with compressed holds the token can come back within
// that wait, and 002 §3.3 counts such a failure as detected by the commit
// timeout. A receiver that already failed has reported it and just ends.
func (r *Receiver) Supersede() Output { return supersede(&r.State) }

// supersede is Supersede for a receiver in state *s, of either exchange.
func supersede(s *ReceiverState) Output {
	was := *s
	*s = ReceiverExpired
	if was == AwaitCommit {
		return Output{Outcome: Failed, Reason: "commit_timeout"}
	}
	return Output{}
}

// Tick fires the timer if its deadline has passed.
func (r *Receiver) Tick(now time.Time) Output {
	if d, ok := r.Deadline(); !ok || now.Before(d) {
		return Output{}
	}
	switch r.State {
	case AwaitCommit:
		if r.attempts > r.cfg.AckRetries {
			r.State = ReceiverFailed
			r.deadline = now.Add(r.cfg.Linger)
			if r.cfg.Linger == 0 {
				r.State = ReceiverExpired // the paper's Fig. 3: no late Commit
			}
			return Output{Outcome: Failed, Reason: "commit_timeout"}
		}
		r.attempts++
		r.deadline = now.Add(r.cfg.AckTimeout)
		// After the first timeout the certificate is piggybacked (002 §3).
		return Output{Send: &Send{Type: wire.Ack, Attempt: r.attempts, WithCert: true}}
	case ReceiverFailed:
		r.State = ReceiverExpired
		return Output{Outcome: Expired}
	}
	return Output{}
}
