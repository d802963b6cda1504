package runner

import (
	"bytes"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/internal/results"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
)

// An outage in a replica other than the first ends on the direction's own
// profile. (A regression: the lookup used the instance name "A.r1", found
// nothing, and restored an empty profile, so the link ran unimpaired for
// the rest of the run.) A profile step during an outage takes effect when
// it ends, and overlapping outages end with the last.
func TestOutageRestoresTheDirectionsProfile(t *testing.T) {
	e, err := experiments.Parse("t.yaml", []byte(`
name: t
seed: 1
duration: 100s
replicas: 2
agents: [{name: A, generate: true}, {name: B}]
links:
  - {between: [A, B], a_to_b: "delay 5ms", b_to_a: "delay 7ms"}
`))
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	r := &run{seams: realSeams(), e: e, o: Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, agents: map[string]*agentRun{},
		planned: map[[2]string]netem.Profile{}, outages: map[[2]string]int{}, hlog: eventlog.NewWriter(&logBuf, "harness")}
	for i, n := range []string{"A", "B"} {
		inst := results.Instance(n, 1)
		r.agents[inst] = &agentRun{a: backend.Agent{Name: n, Replica: 1, Instance: inst, Addr: netip.AddrFrom4([4]byte{10, 77, 1, byte(i + 1)})}}
	}
	r.eng = userspace.New(userspace.Config{RunID: "tb000001", Seed: 1})
	ms := func(s string) *netem.Profile {
		p, err := netem.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	apply := func(s experiments.Step) []pending {
		ps, err := r.apply(t.Context(), s, 1)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	outage := experiments.Step{Action: experiments.ActOutage, From: "A", To: "B", Both: true, For: 2e9}
	end1 := apply(outage)
	end2 := apply(experiments.Step{Action: experiments.ActOutage, From: "A", To: "B", For: 1e9})
	apply(experiments.Step{Action: experiments.ActProfile, From: "B", To: "A", Profile: ms("delay 9ms")})
	end2[0].do() // A>B stays out: the first outage goes on
	end1[0].do()

	var ends []string
	for _, ev := range harnessEvents(t, &logBuf) {
		if ev.Kind == eventlog.OutageEnd {
			ends = append(ends, ev.Link+" "+ev.Profile)
		}
	}
	want := []string{
		"A.r1>B.r1 delay 5ms loss random 100%", // the second outage ends inside the first
		"A.r1>B.r1 delay 5ms",
		"B.r1>A.r1 delay 9ms", // the profile step that came during the outage
	}
	if len(ends) != len(want) {
		t.Fatalf("outage ends %q, want %q", ends, want)
	}
	for i := range want {
		if ends[i] != want[i] {
			t.Errorf("outage end %d: %q, want %q", i, ends[i], want[i])
		}
	}
}
