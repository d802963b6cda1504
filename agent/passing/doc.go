// Package passing holds the state machines of the token passing operation
// of seed 002 §3: the sender (Fig. 2), the receiver (Fig. 3), and the
// Endpoint that owns one agent's tokens, sessions and the tokens' soft
// state.
//
// The sender and receiver are one variant of the operation, an Exchange
// registered by name: "4way" is 002 §3's (Sender, Receiver; the default),
// "3way" is 004 §4's (Sender3, Receiver3; threeway.go), selected by
// Config.Exchange. The Endpoint and what follows hold for both, except
// where a section names the 4-way exchange; the 3-way one's guarantees
// and departures are in threeway.go and checked by model3_test.go.
//
// The machines are pure: no sockets, no clocks, no randomness of their
// own. The one random draw, the 3-way exchange's per-pass id, comes from
// a source the Endpoint seeds with Config.Seed and the agent's name, so
// that the same seed replays the same ids. Time enters
// as the now argument of every call; what the machines want done leaves as
// Effects (datagrams to send, tokens acquired or released, passes that
// succeeded or failed, datagrams rejected). Messages enter already
// authenticated: decoding and signature checks belong to the caller (the
// node package), so that this package can be model-checked exhaustively
// without paying for cryptography.
//
// # The caller's loop
//
//	for {
//		select {
//		case m := <-authenticated:  e.Deliver(now, m)
//		case <-timer(e.Deadline()): e.Tick(now)
//		case ...policy wants a pass: e.Pass(now, token, peer)
//		}
//		for _, f := range e.Effects() { ...send, log, inform the policy... }
//	}
//
// Effects must be carried out in order: a TokenReleased effect precedes the
// Commit it allows, so a log written in effect order never shows two
// holders.
//
// # Guarantees of the 4-way exchange (002 §3.1), checked by model_test.go
//
//   - Duplication is excluded: the receiver acquires only on a Commit, which
//     the sender sends only after it released the token on a valid Ack; a
//     sender whose Move retries ran out ignores a late Ack for good.
//   - The token is lost only if every Commit fails to arrive while the
//     receiver still waits for it, or if the holder (or a partner within
//     the Move→Ack window) crashes.
//
// # Deviations of the 4-way exchange from 002's figures, all on the side of safety
//
//   - A receiver that exhausted its Ack retries still accepts a late Commit
//     of that session for a while (Config.Linger): the Commit proves the
//     sender released the token, so accepting it cannot duplicate the token
//     and turns a loss into a success.
//   - A receiver that gets a Move carrying a certificate, or a duplicate
//     Move, answers with an Ack carrying its own certificate at once: the
//     sender evidently lacks our key or our Ack. This lets a joining member
//     authenticate both ways within the default two Move retries.
//   - A receiver still waiting for a Commit when a newer session of the
//     token reaches it reports its commit timeout at once
//     (Receiver.Supersede): that Commit can no longer come, and the
//     failure counts in 002 §3.3's split even when compressed holds bring
//     the token back before the timeout would fire.
//   - Duplicate Acks and Moves trigger an immediate resend of the Commit or
//     Ack, counted against the same retry limits, so a replayed datagram
//     can never cause an unbounded stream of replies.
package passing
