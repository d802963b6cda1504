package config

import (
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/circulation"
	"tokenbed/agent/clock"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/node"
	"tokenbed/agent/passing"
)

// Node assembles the agent's node from its configuration and credentials:
// the policy from the registry, the seeded random source, the peers with
// the certificates given at start checked against the CA at now. `agent
// run` and the simulator (harness/sim, through the token passing plug-in)
// both build their nodes here, so a simulated agent is the real one.
// shared is nil for an agent process, which verifies for itself; the
// simulator passes one per run, which its agents share (ca.Verified).
// Errors name the field.
func (r *Resolved) Node(cred *ca.Credentials, shared *ca.Verified, now time.Time) (*node.Node, error) {
	verifier := shared.Verifier(cred.CA)
	var members []node.Member
	for i, p := range r.Peers {
		m := node.Member{Name: p.Name, Addr: r.PeerAddrs[i]}
		if p.Certificate != "" {
			key, err := peerKey(verifier, p, now)
			if err != nil {
				return nil, fmt.Errorf("peers[%d].certificate: %v", i, err)
			}
			m.Key = key
		}
		members = append(members, m)
	}
	policy, err := circulation.New(r.Role, r.Policy)
	if err != nil {
		return nil, fmt.Errorf("role: %v", err)
	}
	return node.New(node.Config{Name: r.Name, Addr: r.Listen, Key: cred.Key, Cert: cred.Cert, CA: verifier,
		Passing: r.passing(), Policy: policy, Peers: members, DirectoryTTL: r.DirectoryTTL,
		Rand: rand.New(rand.NewPCG(r.Seed, 0x70ce2009)), MaxClockSkew: r.MaxClockSkew})
}

// passing is the agent's passing configuration with its seed: the 3-way
// exchange's pass ids come from the agent's seed (logged in
// agent_started), on their own stream, so the policy's draws do not shift
// them and a run replays with the same ids.
func (r *Resolved) passing() passing.Config {
	pc := r.Passing
	pc.Seed = r.Seed
	return pc
}

// Started is the agent's first log record: what it runs, and with which
// settings (fault: the configured deliberate fault, "" for none).
func (r *Resolved) Started(fault string, dropRate float64) eventlog.Event {
	detail := fmt.Sprintf("passing=%+v policy=%s %s=%+v drop_rate=%v", r.passing(), r.Role, r.Role, r.Policy, dropRate)
	if d, ok := r.Policy.(circulation.Describer); ok {
		detail += " " + d.Describe(len(r.Peers)+1)
	}
	if r.Clock != (clock.Skew{}) {
		detail += fmt.Sprintf(" clock={offset:%v drift:%v}", r.Clock.Offset, r.Clock.Drift)
	}
	if fault != "" {
		detail = "FAULT " + fault + " (a deliberately broken agent); " + detail
	}
	return eventlog.Event{Kind: eventlog.AgentStarted, Role: r.Role, Addr: r.Listen.String(), Seed: r.Seed,
		TimeScale: r.TimeScale, Version: eventlog.SchemaVersion, Detail: detail}
}

// peerKey reads a peer's certificate given at start, verifies it against
// the CA at now and checks that it names the peer.
func peerKey(v *ca.Verifier, p Peer, now time.Time) (ed25519.PublicKey, error) {
	der, err := ca.ReadCert(p.Certificate)
	if err != nil {
		return nil, err
	}
	name, key, err := v.Verify(der, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Certificate, err)
	}
	if name != p.Name {
		return nil, fmt.Errorf("%s: certificate is for %q, not %q", p.Certificate, name, p.Name)
	}
	return key, nil
}
