package experiments_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
	_ "tokenbed/protocols/ftn"          // protocol ftn's schema (ftn-*.yaml)
	_ "tokenbed/protocols/tokenpassing" // the default protocol's schema
)

func TestShippedExperimentsLoad(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	if len(files) == 0 {
		t.Fatal("no experiment files")
	}
	for _, f := range files {
		// Campaign files (experiments/campaign: a top-level jobs list)
		// sit beside the experiments; their test parses them.
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "\njobs:") {
			continue
		}
		e, err := experiments.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		n := len(e.Agents)
		if len(e.Directions) != n*(n-1) {
			t.Errorf("%s: %d directions for %d agents", f, len(e.Directions), n)
		}
	}
}

func TestResolutionOrder(t *testing.T) {
	src := `
name: x
seed: 3
duration: 100s
defaults:
  profile: "delay 1ms"
  agent:
    randomwalk: {hold: 2s}
    passing: {move_retries: 3}
agents:
  - {name: A, generate: true, config: {randomwalk: {hold: 5s}}}
  - {name: B}
  - {name: C}
links:
  - {between: [A, B], profile: "delay 5ms", b_to_a: "delay 7ms loss 1%"}
schedule:
  - {action: outage, links: [A-C], at: 10s, until: 90s, count: 5, for: 1s}
`
	e, err := experiments.Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A>B": "delay 5ms", "B>A": "delay 7ms loss 1%", "A>C": "delay 1ms", "C>B": "delay 1ms"}
	for k, v := range want {
		from, to, _ := strings.Cut(k, ">")
		d, _ := e.Direction(from, to)
		if d.Text != v {
			t.Errorf("%s: profile %q, want %q", k, d.Text, v)
		}
	}
	a, _ := e.Agent("A")
	b, _ := e.Agent("B")
	// The merged section, as the protocol will decode it.
	section := func(a experiments.Agent) map[string]map[string]any {
		var m map[string]map[string]any
		if err := a.Config.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	ah, bh := section(a)["randomwalk"]["hold"], section(b)["randomwalk"]["hold"]
	if ah != "5s" || bh != "2s" {
		t.Errorf("hold: A %v (want 5s, its own), B %v (want 2s, the default)", ah, bh)
	}
	if r := section(b)["passing"]["move_retries"]; fmt.Sprint(r) != "3" {
		t.Errorf("defaults.agent.passing not inherited: move_retries %v", r)
	}
	if len(e.Schedule) != 5 {
		t.Fatalf("count: 5 gave %d steps", len(e.Schedule))
	}
	for i, s := range e.Schedule {
		if s.At < 10*time.Second || s.At >= 90*time.Second || (i > 0 && s.At < e.Schedule[i-1].At) {
			t.Errorf("step %d at %v: outside [10s, 90s) or unsorted", i, s.At)
		}
		if !s.Both || s.From != "A" || s.To != "C" {
			t.Errorf("step %d: link %s %s both=%v", i, s.From, s.To, s.Both)
		}
	}
	// The same seed gives the same schedule.
	e2, _ := experiments.Parse("x.yaml", []byte(src))
	for i := range e.Schedule {
		if e.Schedule[i].At != e2.Schedule[i].At {
			t.Fatal("schedule is not reproducible from the seed")
		}
	}
}

// Every error is reported at once, each with file and line.
func TestAllErrorsAtOnce(t *testing.T) {
	src := `name: bad
duration: 100s
agents:
  - {name: A, generate: true}
  - {name: A}
  - {name: "b c"}
links:
  - {between: [A, Z], profile: "delay 5ms"}
  - {between: [A, A]}
  - {between: [A, "b c"], profile: "delay fast"}
schedule:
  - {action: explode, at: 10s}
  - {action: outage, link: "A>Q", at: 200s}
  - {action: crash, agent: nobody, at: 1s}
checks:
  latency:
    - {link: "A>B", tolerance: -1}
`
	_, err := experiments.Parse("bad.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, want := range []string{
		"bad.yaml:5:",  // duplicate A
		"bad.yaml:6:",  // bad name
		"bad.yaml:8:",  // unknown agent Z
		"bad.yaml:9:",  // self link
		"bad.yaml:12:", // unknown action
		"bad.yaml:13:", // outside the run, unknown agent Q, no for
		"bad.yaml:14:", // unknown agent to crash
		"bad.yaml:17:", // checks
	} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("no error at %s in:\n%s", want, err)
		}
	}
	if len(lines) < 10 {
		t.Errorf("only %d errors reported:\n%s", len(lines), err)
	}
	// Unknown fields name file and line too.
	_, err = experiments.Parse("typo.yaml", []byte("name: x\nduration: 1s\nagnets: []\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "typo.yaml:3:") {
		t.Errorf("unknown field: %v", err)
	}
}

// The reference page's complete example must stay a valid experiment.
func TestReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../docs/reference/experiment-file.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "# Experiment files")
	if i < 0 {
		t.Fatal("docs/reference/experiment-file.md has no experiment files title")
	}
	s = s[i:]
	start := strings.Index(s, "```yaml\n")
	end := strings.Index(s[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no yaml block in the section")
	}
	if _, err := experiments.Parse("docs/reference/experiment-file.md example", []byte(s[start+8:start+8+end])); err != nil {
		t.Fatal(err)
	}
}

// expectErrors parses src and checks that each wanted text appears in one
// error line, which starts with the file and the wanted line number.
func expectErrors(t *testing.T, src string, want map[string]int) {
	t.Helper()
	_, err := experiments.Parse("x.yaml", []byte(src))
	if err == nil {
		t.Fatalf("accepted:\n%s", src)
	}
	for text, line := range want {
		found := false
		for _, l := range strings.Split(err.Error(), "\n") {
			found = found || strings.Contains(l, text) && strings.HasPrefix(l, fmt.Sprintf("x.yaml:%d:", line))
		}
		if !found {
			t.Errorf("no error %q at line %d in:\n%v", text, line, err)
		}
	}
}

// Names that would collide at run time are rejected at
// validation, naming the field.
func TestNamesThatCollide(t *testing.T) {
	expectErrors(t, `name: x
duration: 10s
replicas: 2
agents:
  - {name: A, generate: true}
  - {name: hub0}
  - {name: A.r1}
  - {name: holder}
  - {name: B-C}
  - {name: netemcheck}
  - {name: owncheck}
`, map[string]int{
		`agents[1].name: "hub0": reserved`:       6,
		`agents[2].name: "A.r1": want letters`:   7,
		`agents[3].name: "holder": reserved`:     8,
		`agents[4].name: "B-C": want letters`:    9,
		`agents[5].name: "netemcheck": reserved`: 10,
		`agents[6].name: "owncheck": reserved`:   11,
	})
}

// The schedule's own proof that a step cannot
// work is a validation error at the step's field.
func TestLifecycleErrors(t *testing.T) {
	expectErrors(t, `name: x
duration: 100s
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
  - {name: D, later: true}
  - {name: E, later: true}
schedule:
  - {action: join, agent: C, via: A, at: 1s}
  - {action: restart, agent: B, at: 2s}
  - {action: restart, agent: holder, at: 3s}
  - {action: restart, agent: D, at: 4s}
  - {action: join, agent: E, via: A, at: 5s}
  - {action: join, agent: E, via: A, at: 6s}
  - {action: leave, agent: A, at: 7s}
  - {action: join, agent: D, via: A, at: 8s}
`, map[string]int{
		`schedule[0].agent: "C" is not later: true`: 10,
	})
	expectErrors(t, `name: x
duration: 100s
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: D, later: true}
  - {name: E, later: true}
schedule:
  - {action: restart, agent: B, at: 2s}
  - {action: restart, agent: holder, at: 3s}
  - {action: restart, agent: D, at: 4s}
  - {action: join, agent: E, via: A, at: 5s}
  - {action: join, agent: E, via: A, at: 6s}
  - {action: leave, agent: A, at: 7s}
  - {action: join, agent: D, via: A, at: 8s}
`, map[string]int{
		`schedule[0].agent: restart of B at 2s: it is running`:           9,
		`schedule[1].agent: restart of holder at 3s: no crash of holder`: 10,
		`schedule[2].agent: restart of D at 4s: it is later: true`:       11,
		`schedule[4].agent: join of E at 6s: it has joined already`:      13,
		`schedule[6].via: join through A at 8s: A is not running`:        15,
	})
	// What the schedule cannot prove is accepted: after a crash of the
	// holder any agent may be down, and a crashed agent may restart; with
	// replicas each shard starts afresh.
	for _, src := range []string{`name: x
duration: 100s
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: D, later: true}
schedule:
  - {action: crash, agent: holder, at: 1s}
  - {action: restart, agent: B, at: 2s}
  - {action: restart, agent: holder, at: 3s}
  - {action: crash, agent: A, at: 4s}
  - {action: restart, agent: A, at: 5s}
  - {action: join, agent: D, via: B, at: 6s}
  - {action: crash, agent: D, at: 7s}
  - {action: restart, agent: D, at: 8s}
`, `name: x
duration: 100s
replicas: 2
agents:
  - {name: A, generate: true}
  - {name: D, later: true}
schedule:
  - {action: join, agent: D, via: A, at: 10s}
  - {action: join, agent: D, via: A, at: 60s}
`} {
		if _, err := experiments.Parse("ok.yaml", []byte(src)); err != nil {
			t.Errorf("rejected: %v\n%s", err, src)
		}
	}
}

// A duration that does not parse is reported at its
// line with its field, beside the file's other errors.
func TestBadDurationHasLineAndField(t *testing.T) {
	expectErrors(t, `name: x
duration: 10 parsecs
agents:
  - {name: A, generate: true}
  - {name: B}
schedule:
  - {action: outage, link: A-B, at: soon, for: 1s}
  - {action: explode, at: 1s}
`, map[string]int{
		`duration: "10 parsecs": want a duration`: 2,
		`schedule[0].at: "soon": want a duration`: 7,
		`schedule[1].action: "explode"`:           8,
	})
}

// Load refuses an oversized file with a clear error
// rather than reading it (the results keep the bytes that were loaded).
func TestLoadRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte("name: x\n"+strings.Repeat("# pad\n", 300000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := experiments.Load(p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("want a size error, got %v", err)
	}
}

// An agent's configuration is decoded by its own types (the agent's
// fields, each policy's section), and its errors keep the line of the
// value: in defaults.agent or in the agent's config.
func TestAgentConfigErrorsAtTheirLines(t *testing.T) {
	expectErrors(t, `name: x
duration: 10s
defaults:
  agent:
    randomwalk: {hold: -1s}
agents:
  - {name: A, generate: true}
  - name: B
    role: wandering
    config:
      wandering: {op: 1s, skip: 2s}
      passing:
        move_timeout: -5ms
  - {name: C, role: ring}
`, map[string]int{
		`agents[1].config.wandering.skip: must be in [0, op)`:     11,
		`agents[1].config.passing.move_timeout: must be positive`: 13,
		`randomwalk.hold: must not be negative`:                   5,
		// B's own config is merged over the defaults: the error names B's
		// field, at the line of the default value it inherited.
		`agents[1].config.randomwalk.hold: must not be negative`: 5,
		`agents[2].role: "ring"`:                                 14,
	})
	expectErrors(t, `name: x
duration: 10s
agents:
  - {name: A, generate: true}
  - name: B
    config:
      wandering: {opp: 1s}
`, map[string]int{`unknown field "opp"`: 7})
}
