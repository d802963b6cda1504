package node

import (
	"fmt"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/eventlog"
)

// LoseNextPass makes the next pass the policy asks for lose its token in
// transit: the agent lets the token go as after a successful pass (the
// policy hears Passed) and sends nothing, so no receiver ever holds it.
// It is seed 003's token loss event (§3: "we injected token loss events
// every 10^4 seconds"), which the harness injects with a lose-token step
// (SIGUSR1 to the holder). It is made here, not in the network: a
// datagram lost on the way is what the 4-way exchange's retries repair
// (002 §3), so dropping datagrams would not lose the token.
func (n *Node) LoseNextPass() { n.loseNext = true }

// loseInTransit carries out the pass a as a loss in transit.
func (n *Node) loseInTransit(now time.Time, a circulation.Action) {
	n.loseNext = false
	if err := n.ep.Discard(a.Token, "lost_in_transit"); err != nil {
		n.event(eventlog.Event{Kind: eventlog.AgentNotice, Token: a.Token.String(), Reason: "policy_error", Detail: err.Error()})
		return
	}
	n.drain(now)
	n.event(eventlog.Event{Kind: eventlog.TokenLost, Token: a.Token.String(), Peer: a.Peer, Reason: "in_transit",
		Detail: fmt.Sprintf("injected: the pass to %s lost the token (lose-token)", a.Peer)})
	n.actions(now, n.pol.Passed(now, a.Token, a.Peer))
}
