package runner

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	agentres "tokenbed/agent/resource"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/sim"
	"tokenbed/internal/strictyaml"
)

func resourceRun(t *testing.T, simulated bool) (*run, *backend.Spec) {
	t.Helper()
	op, err := strictyaml.Parse("exp.yaml", []byte("operation: {kind: resource}\npassing: {move_timeout: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := &experiments.Experiment{Agents: []experiments.Agent{{Name: "A", Config: op}, {Name: "B", Config: op}}}
	r := &run{seams: realSeams(), e: e, agents: map[string]*agentRun{}, o: Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	if simulated {
		r.seams = simSeams(&sim.Backend{}, 1)
	}
	pfx := netip.MustParsePrefix("10.77.0.0/24")
	spec := &backend.Spec{Prefixes: []netip.Prefix{pfx}, Replicas: [][]backend.Agent{nil}}
	for i, a := range e.Agents {
		ba := backend.Agent{Name: a.Name, Instance: a.Name, Addr: backend.AgentAddr(pfx, i)}
		spec.Replicas[0] = append(spec.Replicas[0], ba)
		r.agents[a.Name] = &agentRun{a: ba, spec: a}
		r.order = append(r.order, a.Name)
	}
	if err := r.planResource(spec); err != nil {
		t.Fatal(err)
	}
	return r, spec
}

// {kind: resource} without a server: the run adds a server at the host
// number after the agents' and gives every agent its address.
func TestPlanResourceAddsTheServer(t *testing.T) {
	r, spec := resourceRun(t, false)
	if len(spec.Replicas[0]) != 3 || spec.Replicas[0][2].Instance != agentres.ServerName || spec.Replicas[0][2].Addr.String() != "10.77.0.3" {
		t.Fatalf("replica 0 to build: %+v, want A, B and the server at 10.77.0.3", spec.Replicas[0])
	}
	for _, inst := range r.order {
		cfg := r.agents[inst].spec.Config
		if got := operationOf(cfg); got.Kind != agentres.KindResource || got.Server != "10.77.0.3:7500" {
			t.Errorf("%s: operation %+v, want the server's address", inst, got)
		}
		if _, taken := cfg.Split(func(k string) bool { return k == "passing" }); taken["passing"].IsZero() {
			t.Errorf("%s: the rest of the configuration was lost", inst)
		}
	}
}

// The simulator has no server: the operation becomes the hold.
func TestPlanResourceInTheSimulatorIsAHold(t *testing.T) {
	r, spec := resourceRun(t, true)
	if len(spec.Replicas[0]) != 2 || len(r.servers) != 0 {
		t.Errorf("a server was planned in the simulator: %+v", spec.Replicas[0])
	}
	for _, inst := range r.order {
		if got := operationOf(r.agents[inst].spec.Config); got.Kind != agentres.KindHold {
			t.Errorf("%s: operation %+v in the simulator, want hold", inst, got)
		}
	}
}
