// Package node is one agent's protocol logic without I/O: it decodes and
// authenticates datagrams (002 §3: signatures, certificates, the member
// key cache), keeps the member directory, runs the passing Endpoint and a
// circulation policy, and turns what they decide into signed datagrams and
// event-log records.
//
// Like the machines it wraps, a Node reads no clock and owns no socket:
// the driver passes the current time to Receive and Tick, then takes the
// datagrams to send and the events to log from Ready, writing the events
// before sending the datagrams (so that a log never shows a Commit sent
// before the release it follows). The time given to Start must be the wall
// clock: replay protection counts from it.
//
// # Order of checks on a datagram
//
// Decode; sender is not ourselves; key: the cached one, or the key of a
// certificate carried by the datagram, checked against the CA but not yet
// cached; signature under that key, for this source and destination;
// freshness (below); then the passing Endpoint. Only if the Endpoint
// accepts the datagram does the node cache the new key, count the sender
// as alive at its address, and merge the directory the datagram carries:
// a rejected datagram (a replay, a stale session) changes nothing but the
// rejection counters.
//
// # Restarts (002 §3.1: replays against a restarted member)
//
// Replays are recognised by the tokens' soft state (002 §3.1), which lives
// in memory and is lost in a crash: a restarted agent would take the
// Moves and Commits of its previous life as new, acquire a copy of a live
// token and keep it. Every datagram carries a nonce that is its sender's
// wall clock in ns when it signed it (made strictly increasing). With S,
// Config.MaxClockSkew, the bound on how far apart any two members' clocks
// are, a datagram signed before our start at real time t carries a nonce
// of at most t + S on its sender's clock, which is below start + S on
// ours. So the node rejects ("before-start"), for its whole life, every
// datagram whose nonce is below start + S. No stable storage is needed,
// and after the first 2·S nothing legitimate is below that line: a peer
// whose clock is S behind ours signs nonces of at least start + S from
// start + 2·S on. A later nonce cannot come from a previous life, and from
// then on the soft state rebuilt since the start covers replays as before.
//
// The cost: an agent is deaf for up to 2·S after every start (S if clocks
// agree), first starts included, since it cannot tell them from restarts.
// Its own policy starts S after the node (Node.startPolicy), since until
// then it would refuse the replies to its own passes.
// A pass toward it in that window fails like a pass to a crashed member:
// the sender's Move retries run out and the sender keeps the token (002
// §3.1: no loss, no duplication), and the policy tries again. The
// assumption: members' clocks are within S of each other (NTP; the
// default, DefaultMaxClockSkew, is 100 ms). If a clock is off by more, a
// replay of that member's datagrams signed just before our crash may be
// accepted, or its fresh datagrams refused until its nonces catch up.
// Nonces and S are real time: the harness's compressed time divides the
// protocol's durations, not the wall clock, so S is never scaled.
//
// Alternatives we did not take: a persisted high-water mark costs an
// fsync per accepted datagram (or batch) on the pass's critical path; an
// incarnation number that peers must echo changes the format of every
// datagram and still needs stable storage or the clock to be unique; a
// quarantine alone, without the nonce bound, does not help, since a
// captured datagram stays valid as long as the sender's certificate.
//
// # Member keys (002 §3: certificates and the key a member signs with)
//
// A key is cached only from a datagram that verified under it and that
// the Endpoint accepted; a datagram carrying another valid certificate of
// a member but a signature that does not verify under that certificate's
// key is rejected and changes nothing. A member that legitimately re-keys
// (a new key pair and certificate from the CA) is first rejected with
// "bad-signature" on its certificate-less datagrams, times out and resends
// with its certificate (002 §3); that datagram verifies under the new key,
// which then replaces the old one. A replay of an old datagram carrying
// an old, still valid certificate could roll the key back only if the
// Endpoint accepted it, that is, if it opened a session the soft state
// does not know; the member's next retry with its certificate undoes it.
//
// # Directory (002 §3.2: membership learnt from others)
//
// Directory entries are signed by the member they describe (see
// agent/wire, "Directory entries") and relayed verbatim, so that a member
// can only speak for itself. An entry replaces what we hold only if it is
// newer (so a directory in sync costs no verification: an Ed25519
// verification is ~60 µs) and not more than S in the future (it would
// outlive its member). An agent signs its own entry at start and again
// when a quarter of directory_ttl has passed, not per datagram, which
// keeps the Move's critical path at one signature. An entry about a
// member whose key we do not have yet (a join, 002 §3.2) is kept as an
// unverified candidate: it gives an address to try, never replaces an
// address we were given at start, heard from the member itself or read in
// an entry it signed, is not relayed, and is checked (and dropped if
// false) as soon as the member's key arrives. Liveness for directory_ttl
// is the signing time of what the member itself signed: the nonce of a
// datagram from it that was accepted, or the seen-time of its entry; a
// replay therefore proves nothing newer than the original.
//
// # Pass targets
//
// The policy chooses among Peers, the pass targets: members that have
// shown they are alive, never names on hearsay alone. A name is a target
// when it is configured (Config.Peers: the operator's word), or when it
// has answered this agent, that is, sent an Ack, Commit or EarlyStop that
// was accepted: it verified under the member's certified key, for its
// address, and replies to a datagram of ours, so the member is reachable
// there. A Move alone does not count: it costs the sender nothing to send.
// An entry we cannot verify yet (a joiner's, relayed by synchronisation,
// 002 §3.2) is a target on the word of a configured member that relayed
// it, for one pass: at most MaxVouches names per configured member per
// VouchWindow, so an insider among the configured members costs at most
// that many failed passes. A target outside the configuration whose
// passes fail MaxUnanswered times in a row (each a Move and its retries,
// 002 §3) stops being one until it answers again. Configured members stay
// targets: a leave is a silent failure that the Move retries absorb (the
// sender keeps the token, 002 §3.1), and directory_ttl, when set, ends it.
//
// Joins keep working (002 §3.2): the joiner passes its fresh token to the
// member it was given, whose Ack and the joiner's Commit make each a
// target of the other; synchronisation carries the joiner's entry on,
// vouched for by that member, and the first pass to the joiner (with
// certificates both ways after one timeout, 002 §3) makes it answer.
//
// Members outside the configuration expire after UnlistedTTL without
// news (DefaultUnlistedTTL, ten minutes: twenty return times of 002 §1's
// typical deployment). A live member re-signs its entry every quarter of
// the TTL and the token carries it everywhere within a few return times,
// so only a silent member expires. Joins are bounded per sender
// (JoinBurst, Config.JoinInterval): a Move of a token this agent has
// never seen costs it an Ack sequence and a commit timeout.
//
// # What a certified member can still do
//
// 002 §3.1 trusts members: a member holding a valid key pair and
// certificate (an insider) is outside its threat model, and some of what
// it can do stays possible. An insider can mint a copy of a live token (it
// can sign a Move and Commit for any token id and session), and so
// duplicate tokens; nothing here detects that beyond the analysis, which
// reports it as a duplication. It can drop the tokens it is passed (a
// silent failure), claim any address for itself, and fill directories
// with entries for names that do not exist, as unverified candidates that
// are neither relayed nor passed to and that expire after UnlistedTTL; if
// it is configured, MaxVouches of them per VouchWindow get one pass each.
// It can introduce JoinBurst tokens at once and one per JoinInterval, and
// open sessions of known tokens at any rate, each costing the receiver an
// Ack sequence and a commit timeout (and, above the current session,
// making it refuse the genuine holder's next pass as stale). Having answered once, it costs
// MaxUnanswered failed passes per agent before it must answer again. It
// can no longer move another member's entry, plant entries in the
// future, displace another member's key, become a pass target without
// answering, or, like an outsider, make an agent accept a replay of its
// previous life. If a restarted agent's clock is behind its peers' by
// more than S, it can accept replays signed in the last (lag − S) before
// its crash (TestClockSkewBeyondTheBoundAdmitsReplays).
package node
