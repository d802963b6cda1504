package tokenpassing

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"tokenbed/agent/config"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
)

// A simulated agent's configuration kept in memory (SimConfig) resolves
// to what the agent resolves from the file Config writes, for every role,
// cold and warm, started and joining: the simulator saves the file, not
// a setting.
func TestSimConfigIsTheFile(t *testing.T) {
	e, err := experiments.Parse("x.yaml", []byte(`name: x
duration: 10s
time_scale: 100
network_time_scale: 10
defaults:
  agent: {passing: {ack_timeout: 250ms, commit_retries: 0, linger: 0s}, randomwalk: {hold: 2s}, max_clock_skew: 20ms}
agents:
  - {name: A, generate: true, config: {randomwalk: {hold: 7s, regenerate_after: 3}, fault: skip_ack_check, directory_ttl: 1m, drop_rate: 0.1}}
  - {name: B, role: wandering, config: {wandering: {op: 4s, skip: 100ms, nmax: 6}, passing: {move_timeout: 100ms}}}
  - {name: C, role: wandering-004, config: {wandering-004: {op: 4s, skip: 1s, min: 24s}}}
  - {name: D, role: baseline, config: {baseline: {op: 4s, rule: "003"}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := protocol.Files{CACert: "/k/ca.crt", Credentials: "/k", PeerCert: func(i string) string { return "/k/" + i + ".crt" }}
	var ps []protocol.Process
	for i, a := range e.Agents {
		for rep := range 2 {
			ps = append(ps, protocol.Process{Instance: fmt.Sprintf("%s.r%d", a.Name, rep), Name: a.Name, Replica: rep,
				Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 77, byte(rep), byte(1 + i)}), 7400), Spec: a})
		}
	}
	for _, p := range ps {
		for _, join := range []string{"", "x"} {
			var peers []protocol.Process
			for _, o := range ps {
				if o.Replica == p.Replica && o.Instance != p.Instance && (join == "" || len(peers) == 0) {
					peers = append(peers, o)
				}
			}
			if join != "" {
				join = peers[0].Instance // a joining agent knows the member it joins through
			}
			files.Log = filepath.Join(dir, p.Instance+".jsonl")
			b, err := Protocol{}.Config(e, p, peers, files, 42)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, p.Instance+".yaml")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			fromFile, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			_, load, err := inMemory(e, p, peers, files, 42)
			if err != nil {
				t.Fatal(err)
			}
			for start := range 2 { // a restart loads it again
				inMem, err := load()
				if err != nil {
					t.Fatal(err)
				}
				var rs [2]*config.Resolved
				for i, c := range []*config.Config{fromFile, inMem} {
					if join != "" {
						c.Join = join
						c.SetByFlag("$.join", "join")
					}
					if rs[i], err = c.Validate(); err != nil {
						t.Fatalf("%s: %v", p.Instance, err)
					}
				}
				if !reflect.DeepEqual(rs[0], rs[1]) {
					t.Errorf("%s join %q start %d: from the file\n%+v\nin memory\n%+v", p.Instance, join, start, rs[0], rs[1])
				}
				if len(rs[1].Peers) != len(peers) || p.Replica == 1 && rs[1].Peers[0].Certificate == "" {
					t.Errorf("%s: peers %+v", p.Instance, rs[1].Peers)
				}
				if f, m := rs[0].Started(fromFile.Fault, rs[0].DropRate), rs[1].Started(inMem.Fault, rs[1].DropRate); !reflect.DeepEqual(f, m) {
					t.Errorf("%s: agent_started from the file %+v, in memory %+v", p.Instance, f, m)
				}
			}
		}
	}
}
