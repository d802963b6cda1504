package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/harness/results"
	"tokenbed/harness/uml/umltest"
	"tokenbed/netem"
)

// Three agents, A>B duplicating 10%, plain delays elsewhere, on the
// kernel's netem (inside User Mode Linux on a host without it). The
// per-receiver tree used to hold a duplicating leaf beside the others,
// which Linux refuses ("netem: cannot mix duplicating netems with other
// netems in tree"), so the run failed at setup.
const dupLink = `
name: dup-link
seed: 9
duration: 400s
time_scale: 20
defaults:
  profile: "delay 2ms"
  agent:
    randomwalk: {hold: 2s, regenerate_after: 10}
    passing: {move_timeout: 300ms, ack_timeout: 300ms, commit_timeout: 300ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
links:
  - {between: [A, B], a_to_b: "delay 2ms duplicate 10%", b_to_a: "delay 2ms"}
`

func TestKernelRunWithDuplication(t *testing.T) {
	requireRoot(t)
	if umltest.Reexec(t, umltest.Options{Modules: []string{"sch_netem", "sch_htb", "cls_u32", "veth", "bridge"}, MemMB: 1024,
		Timeout: 5 * time.Minute, Env: []string{"RUNNER_TEST_AGENT=" + agentBin},
		RunOnHost: func() bool { return netem.CheckKernel(NewRunID()) == nil }}) {
		return
	}
	e, path := load(t, dupLink)
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairKernel,
		ImpairReason: "test", AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatalf("run with a duplicating direction among three agents: %v", err)
	}
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	if info.Status != "ok" || info.Impairment != ImpairKernel {
		t.Fatalf("run.json: status %q, impairment %q (%s); want ok on the kernel", info.Status, info.Impairment, info.ImpairWhy)
	}
	// Copies beyond the first of each A→X datagram, on A's interface
	// (before impairment) and on X's (after). Agents' retransmissions
	// are identical bytes too, so compare the two.
	extra := extraCopies(t, filepath.Join(dir, results.CaptureFile))
	sent := extra["A/eth0 A>B distinct"]
	dupAB := extra["B/eth0 A>B"] - extra["A/eth0 A>B"]
	dupAC := extra["C/eth0 A>C"] - extra["A/eth0 A>C"]
	t.Logf("A>B: %d distinct datagrams sent, %d duplicated by netem; A>C: %d distinct, %d duplicated", sent, dupAB, extra["A/eth0 A>C distinct"], dupAC)
	if sent < 50 {
		t.Fatalf("only %d A>B datagrams captured", sent)
	}
	if dupAB <= 0 || float64(dupAB) > 0.25*float64(sent) {
		t.Errorf("A>B: %d copies added for %d datagrams, want about 10%%", dupAB, sent)
	}
	if dupAC != 0 {
		t.Errorf("A>C: %d copies added, want none", dupAC)
	}
}

// extraCopies counts, per capture interface and direction ("B/eth0 A>B"),
// the copies of UDP payloads beyond the first, and ("… distinct") the
// distinct payloads.
func extraCopies(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"10.77.0.1": "A", "10.77.0.2": "B", "10.77.0.3": "C"}
	seen := map[string]map[string]int{}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		intf, _ := r.Interface(ci.InterfaceIndex)
		if intf.LinkType != layers.LinkTypeEthernet {
			continue
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil {
			continue
		}
		k := intf.Name + " " + names[ip.SrcIP.String()] + ">" + names[ip.DstIP.String()]
		if seen[k] == nil {
			seen[k] = map[string]int{}
		}
		seen[k][string(udp.Payload)]++
	}
	out := map[string]int{}
	for k, m := range seen {
		for _, n := range m {
			out[k] += n - 1
			out[k+" distinct"]++
		}
	}
	return out
}
