package runner

import (
	"fmt"
	"testing"

	"tokenbed/harness/backend"
)

// The self-test must be linear in the number of agents (all directed
// pairs of 360 agents take minutes, beyond the self-test's 2 s wait): one
// probe per agent, each to a peer of its own replica, every agent probed
// once.
func TestSelfTestRingIsOneProbePerAgent(t *testing.T) {
	r := &run{agents: map[string]*agentRun{}}
	for rep := 0; rep < 3; rep++ {
		for i := 0; i < 120; i++ {
			inst := fmt.Sprintf("a%d.r%d", i, rep)
			r.agents[inst] = &agentRun{a: backend.Agent{Instance: inst, Replica: rep}}
			r.order = append(r.order, inst)
		}
	}
	lone := "solo.r3"
	r.agents[lone] = &agentRun{a: backend.Agent{Instance: lone, Replica: 3}}
	r.order = append(r.order, lone)

	probes := r.selfTestRing()
	if len(probes) != 360 {
		t.Fatalf("%d probes for 360 agents with peers, want 360", len(probes))
	}
	from, to := map[string]int{}, map[string]int{}
	for _, p := range probes {
		if p[0] == p[1] {
			t.Errorf("probe %s>%s to itself", p[0], p[1])
		}
		if r.agents[p[0]].a.Replica != r.agents[p[1]].a.Replica {
			t.Errorf("probe %s>%s crosses replicas", p[0], p[1])
		}
		from[p[0]]++
		to[p[1]]++
	}
	for _, inst := range r.order[:360] {
		if from[inst] != 1 || to[inst] != 1 {
			t.Errorf("%s sends %d and receives %d probes, want 1 and 1", inst, from[inst], to[inst])
		}
	}
	if from[lone]+to[lone] != 0 {
		t.Errorf("an agent alone in its replica was probed")
	}
}
