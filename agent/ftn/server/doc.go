// Package server is the FTN token server (seed 001) as a pure state
// machine: no I/O, no clock. Its driver calls Step with every
// authenticated message, Tick at a fixed interval, and after each call
// sends the messages and logs the events that Ready returns, in that
// order: events first, so that a log that survives a crash never shows a
// message without what led to it.
//
// # Roles
//
// Every server runs the same machine; one of them is the leader. The
// leader keeps the global state (001 "Global state": the leader, each
// server's state DOWN/BOOTING/READY with its incarnation, the client
// list) and broadcasts it every HeartbeatTicks; the broadcast is its
// heartbeat. Servers send the leader their heartbeats; the leader
// declares DOWN a server silent for ServerDownTicks and drops a client
// silent for ClientDownTicks. A client's heartbeat echoes the term and
// tick of the newest acknowledgement the leader sent it (msg.Msg.Beat)
// and counts from that tick, not from its arrival: a copy replayed after
// the client crashed cannot keep it listed (001 "When a Client Crashes").
//
// Election (001 says only "elect a new leader"; this is how): a server
// that hears no broadcast for ElectionTicks (randomised up to twice that,
// from the seeded generator) asks for pre-votes for the next term, and
// only with a majority of them starts the election in that term; it
// becomes leader with the votes of a majority of the configured servers.
// The pre-vote (etcd raft's) keeps a server cut off from the others
// from raising its term, which would make it deaf to the leader's
// broadcasts when the partition heals.
// A voter grants one vote per term, only to a candidate whose latest
// global state is at least as new as its own (so the new leader inherits
// the client list and the servers' states) and only if it has heard no
// leader for ElectionTicks (so that a server cut off from the others
// cannot depose a working leader). A majority means at most one leader
// per term, and a minority side of a partition elects none. A leader
// that has not heard a majority of servers for ServerDownTicks steps
// down. A broadcast whose global state does not fit the shared list
// (msg.Global.Check), or names another leader than its sender, is
// refused before its term counts: a server with another configuration
// file (001 "Configuration") cannot depose the leader.
//
// # Serving, and leases
//
// A server answers client requests only when it is READY, has no client
// query round in progress, and has heard the leader within LeaseTicks
// (the leader: while it leads). LeaseTicks < ServerDownTicks, so a server
// cut off from the leader stops serving before the leader can declare it
// DOWN and let others reclaim its tokens: beyond the seed, which relies
// on the clients alone to discard late messages (001 "When a Server
// Crashes"); both guards are kept. Nor does a server serve while it holds
// a global state that moves names (a server newly DOWN or not, or a new
// life) that it does not yet know a majority of servers holds: see
// "Fencing numbers" and Server.act.
//
// # Fencing numbers (beyond the seed)
//
// Every grant carries a Fence (Epoch, Counter). A server creates its
// entry for a token name, receives it by transfer, or reclaims it from
// client reports, with Epoch = the version of the global state it holds
// at that moment; each grant increments Counter. Responsibility for a
// name passes from server A to server B only through a global state
// version V in which A is DOWN or B BOOTING, and A stops creating entries
// for the name once it holds V. No server acts on V (queries the
// clients, hands off or serves names) before a majority of servers holds
// V (Server.act): V is then in the global state of every later leader,
// so every version A can hold is either lower than V or says A is DOWN
// (or B BOOTING), and every entry A creates for the name has a lower
// epoch than B's. Reported or transferred fences raise the entry's fence
// (never lower it). Hence the guarantee: for each name, the grants made
// by the servers responsible for it, in the order of the global states
// that made them responsible, carry strictly increasing fences; and a
// grant made after losing responsibility (by a server falsely declared
// DOWN, 001's late message) carries a fence lower than every grant of its
// successor. A resource that keeps the highest fence it accepted for a
// name and refuses lower ones never accepts a stale holder after its
// successor, including the case 001 calls unavoidable: a client falsely
// declared down, whose token is granted again with a higher Counter.
// What fences do not give: a resource that never saw the successor's
// fence cannot know the stale one is stale. The servers keep nothing on
// disk: if servers of the majority that held V restart before the next
// election (forgetting V), a later leader may lack V, and the guarantee
// does not hold.
//
// # Fresh requests
//
// 001 repeats unacknowledged requests and asks servers to "guard against
// late messages"; a network that duplicates and delays, or an attacker
// who replays a captured datagram (its signature stays valid for its
// address pair), delivers old requests. A request is named by the
// client's ID (unique per registration: the leader's term and count)
// and its request number, which increases within the registration; the
// client has at most one request outstanding per name. So for a client
// and a name, only the newest request can still be awaited, and the
// server applies a request only if it is at least as new as every one it
// has seen from that client for that name (token.marks). The newest one
// again is a copy: an acquire granted is answered with its grant, a
// write already applied is answered and not applied again (another
// holder may have written since). Older ones are dropped with a "stale"
// event. A newer acquire from a client the server lists as holder ends
// that hold (the client does not know of it: it never asks for a name it
// holds) and is served with a new fence.
//
// The marks of a name go with it in transfers (TokenState.Marks). A
// server that takes names over by a query round (boot, a server DOWN) has
// not seen the requests sent to their previous server, so each client's
// answer carries its newest request number and the requests it has
// outstanding (QueryReply Req, Marks): anything up to that number that
// was not outstanding had completed, and is refused (floors). A request
// the client sends after answering goes to this server or a later one,
// since the client adopts the query's global state before it answers.
// A leader change moves no names by itself; the leader's global state
// carries no request numbers (the client list keeps the IDs, and the
// round covers what moves). A client dropped from the list loses its
// marks with its ID: its requests are refused as "ID invalid".
//
// # Files
//
// One concern a file: server.go (the machine, Tick and Step), config.go,
// election.go (pre-vote and vote), global.go (the leader's global state,
// heartbeats, acting on a version a majority holds), boot.go
// (initialization and reinitialization), transfer.go (handing names to
// their owner), round.go (client query rounds), tokens.go (entries,
// holders, grants), clients.go (registration, client heartbeats,
// requests), fresh.go (request marks: which requests are fresh).
package server
