package passing

import (
	"time"

	"tokenbed/agent/wire"
)

// The 3-way exchange of 004 §4: a token passing message from the sender
// (a Move), an acknowledgement from the receiver (an Ack), and a
// commitment from the sender (a Commit), each sent once. It runs on the
// wire format and signatures of 002 (agent/wire) and does not use 002's
// EarlyStop: the sender is done once its Commit is out.
//
//   - The sender waits MoveTimeout for the Ack (004: Δskip). With none in
//     time the pass fails and the sender keeps the token, sends no Commit
//     and ignores a late Ack; the policy retries, possibly with another
//     neighbour (004 §4). There are no Move retries within a pass.
//   - With the Ack in time the sender releases the token, sends the Commit
//     and is done: the pass succeeds and completes at once.
//   - The receiver waits AckTimeout for the Commit (004: Δskip). With none
//     in time it considers the token lost and does not take it (a
//     PassFailed "commit_timeout"); a late Commit is discarded. When the
//     sender had its Ack, that is the one way the 3-way exchange loses a
//     token: "only in case the commitment message is lost the token is
//     lost too" (004 §4).
//
// Departures from 004's text, neither of which can give two holders:
//
//   - The Move always carries the sender's certificate, and the Ack the
//     receiver's when the Move had one: with no resends, 002's rule
//     (certificate from the first resend on) would leave a member that
//     lacks our key unable to ever authenticate a pass from us. The
//     Commit carries none: the receiver cached the sender's key with the
//     Move.
//   - A repeated Move of the session while the receiver waits (the
//     sender's next pass to it after its own Ack timeout, or a network
//     duplicate) is answered with a new Ack and restarts the wait, at most
//     AckRetries times, so that a replayed datagram cannot cause an
//     unbounded stream of replies. The receiver still takes the token only
//     on a Commit, which the sender sends only after it released the token.
type threeWay struct{}

// Next: the sender's Commit follows its Move; the receiver sends nothing
// after its Ack.
func (threeWay) Next(sent wire.Type) (wire.Type, bool) { return wire.Commit, sent == wire.Move }

func (threeWay) NewSender(cfg *Config, now time.Time) (SenderMachine, Output) {
	s := &Sender3{cfg: cfg, State: AwaitAck, deadline: now.Add(cfg.MoveTimeout), Start: now}
	return s, Output{Send: &Send{Type: wire.Move, Attempt: 1, WithCert: true}}
}

func (threeWay) NewReceiver(cfg *Config, now time.Time, moveHadCert bool) (ReceiverMachine, Output) {
	r := &Receiver3{cfg: cfg, State: AwaitCommit, acks: 1, deadline: now.Add(cfg.AckTimeout)}
	out := Output{Send: &Send{Type: wire.Ack, Attempt: 1, WithCert: moveHadCert}}
	if cfg.Fault == FaultAcquireOnMove {
		r.State = ReceiverDone
		out.Outcome = Acquired
	}
	return r, out
}

// Sender3 is the sending side of a 3-way pass: AwaitAck, then SenderDone
// (Ack in time, Commit sent) or SenderFailed (no Ack in time).
type Sender3 struct {
	cfg      *Config
	State    SenderState
	deadline time.Time
	Start    time.Time
}

// Status returns the sender's state.
func (s *Sender3) Status() SenderState { return s.State }

// Started returns when the Move was sent.
func (s *Sender3) Started() time.Time { return s.Start }

// Deadline returns when Tick must be called next, if ever.
func (s *Sender3) Deadline() (time.Time, bool) {
	if s.State == AwaitAck {
		return s.deadline, true
	}
	return time.Time{}, false
}

// commit is the sender's one step on a valid Ack: release, commit, done.
func (s *Sender3) commit() Output {
	s.State = SenderDone
	return Output{Outcome: Succeeded, Reason: "commit_sent", Send: &Send{Type: wire.Commit, Attempt: 1}}
}

func (s *Sender3) skipAck(time.Time) Output { return s.commit() }

// Step handles an authenticated datagram of this session from the peer.
func (s *Sender3) Step(now time.Time, t wire.Type) Output {
	switch {
	case s.State == AwaitAck && t == wire.Ack && !now.Before(s.deadline):
		// Late by the clock, though the timer has not been run yet: the
		// pass has failed (Tick reports it), and late messages are
		// discarded (004 §4).
		return Output{Ignored: "late"}
	case s.State == AwaitAck && t == wire.Ack:
		return s.commit()
	case s.State == SenderFailed && t == wire.Ack:
		// Late: the pass failed and the token may be on its way to
		// another neighbour (004 §4: late messages are discarded).
		return Output{Ignored: "pass-failed"}
	case s.State == SenderDone:
		return Output{Ignored: "session-done"}
	}
	return Output{Ignored: "unexpected-" + t.String()}
}

// Tick fires the timer if its deadline has passed.
func (s *Sender3) Tick(now time.Time) Output {
	if d, ok := s.Deadline(); !ok || now.Before(d) {
		return Output{}
	}
	s.State = SenderFailed
	return Output{Outcome: Failed, Reason: "ack_timeout"}
}

// Receiver3 is the receiving side of a 3-way pass: AwaitCommit, then
// ReceiverDone (Commit in time: acquired) or ReceiverExpired (none in
// time: the token is considered lost).
type Receiver3 struct {
	cfg      *Config
	State    ReceiverState
	acks     int // Acks sent in this session
	deadline time.Time
}

// Status returns the receiver's state.
func (r *Receiver3) Status() ReceiverState { return r.State }

// Deadline returns when Tick must be called next, if ever.
func (r *Receiver3) Deadline() (time.Time, bool) {
	if r.State == AwaitCommit {
		return r.deadline, true
	}
	return time.Time{}, false
}

// Step handles an authenticated datagram of this session from the peer.
func (r *Receiver3) Step(now time.Time, t wire.Type) Output {
	switch {
	case r.State == AwaitCommit && !now.Before(r.deadline):
		// Late by the clock, though the timer has not been run yet: the
		// wait has ended (Tick reports it), and late messages are
		// discarded (004 §4).
		return Output{Ignored: "late"}
	case r.State == AwaitCommit && t == wire.Commit:
		r.State = ReceiverDone
		return Output{Outcome: Acquired}
	case r.State == AwaitCommit && t == wire.Move:
		if r.acks > r.cfg.AckRetries {
			return Output{Ignored: "retries-exhausted"}
		}
		r.acks++
		r.deadline = now.Add(r.cfg.AckTimeout)
		return Output{Send: &Send{Type: wire.Ack, Attempt: r.acks, WithCert: true}}
	case r.State == ReceiverDone:
		return Output{Ignored: "session-done"}
	case r.State == ReceiverExpired:
		return Output{Ignored: "session-expired"}
	}
	return Output{Ignored: "unexpected-" + t.String()}
}

// Supersede ends the receiver because a newer session of its token
// reached this agent: its Commit can no longer come (see
// Receiver.Supersede).
func (r *Receiver3) Supersede() Output {
	was := r.State
	r.State = ReceiverExpired
	if was == AwaitCommit {
		return Output{Outcome: Failed, Reason: "commit_timeout"}
	}
	return Output{}
}

// Tick fires the timer if its deadline has passed: no Commit in time, the
// token is considered lost and the protected operation is not run.
func (r *Receiver3) Tick(now time.Time) Output {
	if d, ok := r.Deadline(); !ok || now.Before(d) {
		return Output{}
	}
	r.State = ReceiverExpired
	return Output{Outcome: Failed, Reason: "commit_timeout"}
}
