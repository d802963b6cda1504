package ctrbackend

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis/pcaptimeline"
	"tokenbed/experiments"
	"tokenbed/harness/runner"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
)

// Three agents without profiles; C crashes and comes back, then whoever
// holds the token crashes.
const crashRestart = `
name: containers-crash-restart
seed: 21
duration: 60s
time_scale: 10
defaults:
  agent:
    randomwalk: {hold: 1s}
    passing: {move_timeout: 100ms, ack_timeout: 100ms, commit_timeout: 100ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
schedule:
  - {action: crash, agent: C, at: 10s}
  - {action: restart, agent: C, at: 20s}
  - {action: crash, agent: holder, at: 45s}
`

// runInContainers runs the experiment text yaml through the runner with
// every agent in a container, impaired by impair, and checks that
// run.json says it ran in containers to the end.
func runInContainers(t *testing.T, yaml, impair string) (dir string, info results.RunInfo, be *Backend) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "exp.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := experiments.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	be = New(Options{AgentBin: agentBin, Log: log})
	dir, err = runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: p, ResultsRoot: t.TempDir(),
		Backend: be, Impair: impair, ImpairReason: "test", AgentBin: agentBin, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil || info.Status != "ok" || info.Backend != "container" {
		t.Errorf("run.json: %+v %v", info, err)
	}
	return dir, info, be
}

// A whole run through the runner with every agent in a container: the
// token circulates among all three, the crashes kill the right containers
// and leave their logs whole, the restarted agent works in the same
// namespace (its capture interface keeps seeing it), the capture decodes,
// and Docker is left as it was.
func TestRunInContainersCrashRestart(t *testing.T) {
	requireDocker(t)
	before := dockerState(t)
	dir, info, be := runInContainers(t, crashRestart, runner.ImpairNone)
	tm := be.Timings()
	t.Logf("setup: image build %v, network %v, 3 pods %v", tm.ImageBuild, tm.Networks, tm.Pods)

	// The harness's record: C crashed (killed by signal 9), restarted,
	// then the holder crashed holding a token.
	hevs, err := eventlog.ReadFile(filepath.Join(dir, "logs", "harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var crashes []eventlog.Event
	var restartAt int64
	exits := map[string][]string{}
	for _, ev := range hevs {
		switch ev.Kind {
		case eventlog.AgentCrash:
			crashes = append(crashes, ev)
		case eventlog.AgentRestart:
			restartAt = ev.WallNS
		case eventlog.AgentExit:
			exits[ev.Peer] = append(exits[ev.Peer], ev.Detail)
		}
	}
	if len(crashes) != 2 || crashes[0].Peer != "C" || crashes[1].Token == "" || restartAt == 0 {
		t.Fatalf("crashes %+v, restart at %d: want C, then a holder with its token, and a restart", crashes, restartAt)
	}
	holder := crashes[1].Peer
	t.Logf("holder crashed: %s holding %s; exits %v", holder, crashes[1].Token, exits)
	killed := "killed by signal 9 (killed)"
	if d := exits["C"]; len(d) < 1 || d[0] != killed {
		t.Errorf("C's first exit %v, want %q", d, killed)
	}
	if d := exits[holder]; len(d) == 0 || d[len(d)-1] != killed {
		t.Errorf("the holder %s's last exit %v, want %q", holder, d, killed)
	}
	for _, inst := range []string{"A", "B", "C"} {
		if inst == holder {
			continue
		}
		if d := exits[inst]; len(d) == 0 || d[len(d)-1] != "exit status 0" {
			t.Errorf("%s's last exit %v, want exit status 0 (SIGTERM at the end): only the holder is killed", inst, d)
		}
	}

	// Every agent acquired the token; the logs of the killed agents are
	// whole, and hold what they did up to the kill.
	for _, inst := range []string{"A", "B", "C"} {
		path := filepath.Join(dir, "logs", inst+".jsonl")
		raw, _ := os.ReadFile(path)
		if len(raw) == 0 || raw[len(raw)-1] != '\n' {
			t.Errorf("%s: log does not end with a whole line", inst)
		}
		evs, err := eventlog.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", inst, err)
		}
		starts, acq, acqAfterRestart, heldAtCrash := 0, 0, 0, false
		for _, ev := range evs {
			switch ev.Kind {
			case eventlog.AgentStarted:
				starts++
			case eventlog.TokenAcquired:
				acq++
				if starts == 2 {
					acqAfterRestart++
				}
				if inst == holder && ev.Token == crashes[1].Token && ev.WallNS <= crashes[1].WallNS {
					heldAtCrash = true
				}
			}
		}
		last := evs[len(evs)-1].Kind
		t.Logf("%s: %d events, %d agent_started, %d token_acquired, last %s", inst, len(evs), starts, acq, last)
		if acq == 0 {
			t.Errorf("%s never acquired the token", inst)
		}
		if inst == holder && (!heldAtCrash || last == eventlog.AgentStopping) {
			t.Errorf("%s (crashed holder): acquisition of %s logged %v, last event %s (want no agent_stopping)", inst, crashes[1].Token, heldAtCrash, last)
		}
		if inst == "C" && (starts != 2 || acqAfterRestart == 0) {
			t.Errorf("C: %d starts, %d acquisitions after its restart; want 2 and some", starts, acqAfterRestart)
		}
	}

	// The capture has the agents' datagrams on each container's eth0,
	// C's after its restart too: the pod's namespace outlived the crash.
	tl, err := pcaptimeline.ReadFile(filepath.Join(dir, results.CaptureFile), pcaptimeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tl.Truncated != nil || len(tl.Malformed) > 0 {
		t.Errorf("capture: truncated %v, %d malformed", tl.Truncated, len(tl.Malformed))
	}
	seen := map[string]int{}
	cAfter := 0
	for _, g := range tl.Groups {
		for _, l := range g.Lines {
			if o := l.Obs; o != nil {
				seen[o.Interface]++
				if o.Interface == "C/eth0" && o.Time.UnixNano() > restartAt {
					cAfter++
				}
			}
		}
	}
	t.Logf("capture: datagram sightings by interface %v (C/eth0 after the restart: %d), %d other packets (ICMP port unreachable: toward a crashed agent)", seen, cAfter, tl.Other)
	for _, i := range []string{"A/eth0", "B/eth0", "C/eth0"} {
		if seen[i] == 0 {
			t.Errorf("no datagram captured on %s", i)
		}
	}
	if cAfter == 0 {
		t.Error("no datagram captured on C/eth0 after C's restart")
	}
	if k := os.Getenv("CTRBACKEND_TEST_KEEP"); k != "" {
		os.CopyFS(k, os.DirFS(dir))
	}
	// The other packets may only be ICMP port unreachable (a datagram
	// toward a crashed agent, whose namespace lives on, as with the netns
	// backend): no ARP (static neighbours) and no IPv6 autoconfiguration.
	if other := otherPackets(t, filepath.Join(dir, results.CaptureFile)); len(other) > 0 {
		t.Errorf("packets other than tokenbed datagrams and ICMP port unreachable: %v", other)
	}
	var out strings.Builder
	tl.WriteText(&out)
	for _, w := range []string{"Move", "Ack", "Commit", "EarlyStop", "agent_crash", "agent_restart"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("capture timeline lacks %q", w)
		}
	}

	// Nothing is left behind.
	if after := dockerState(t); after != before {
		t.Errorf("docker state changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if runner.LiveRuns()[info.RunID] {
		t.Errorf("run %s still registered", info.RunID)
	}
	if tmp, _ := filepath.Glob(filepath.Join(os.TempDir(), "tokenbed-"+info.RunID+"-*")); len(tmp) > 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
}

// otherPackets counts, by kind, the captured packets on the agents' links
// that are neither UDP datagrams on the agents' port nor ICMP port
// unreachable.
func otherPackets(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapread.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]int{}
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.LinkType != layers.LinkTypeEthernet {
			continue // the harness's annotations
		}
		if p.UDP != nil && (p.UDP.DstPort == runner.AgentPort || p.UDP.SrcPort == runner.AgentPort) {
			continue
		}
		if p.Fragment && p.UDP == nil {
			continue // judged with its datagram, when its last fragment makes it whole
		}
		// The reader decodes up to UDP; what else crossed the links is
		// decoded whole here, for its kind.
		pkt := gopacket.NewPacket(p.Data, layers.LayerTypeEthernet, gopacket.Default)
		if icmp, ok := pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && icmp.TypeCode == layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodePort) {
			continue
		}
		// Docker's bridge (the gateway address, not an agent) may send an
		// IGMP report when it joins the multicast snoopers' group; this
		// kernel cannot turn snooping off.
		if ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok && ip.Protocol == layers.IPProtocolIGMP && ip.SrcIP[3] == 254 {
			continue
		}
		kind := "?"
		if ls := pkt.Layers(); len(ls) > 1 {
			kind = ls[1].LayerType().String()
		}
		intf, _ := r.Interface(p.Iface)
		other[intf.Name+" "+kind]++
	}
	return other
}

// Ctrl-C at any point of a run (during the image build, while the pods
// start, while the agents run) leaves Docker as it was and says the run
// was interrupted.
func TestInterruptedRunLeavesNothing(t *testing.T) {
	requireDocker(t)
	p := filepath.Join(t.TempDir(), "exp.yaml")
	os.WriteFile(p, []byte(crashRestart), 0o644)
	e, err := experiments.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{200 * time.Millisecond, time.Second, 4 * time.Second} {
		before := dockerState(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		dir, err := runner.Run(ctx, runner.Options{Experiment: e, ExperimentFile: p, ResultsRoot: t.TempDir(),
			Backend: New(Options{AgentBin: agentBin, Log: log}), Impair: runner.ImpairNone, AgentBin: agentBin, Log: log})
		cancel()
		if err == nil {
			t.Fatalf("interrupted after %v: no error", after)
		}
		var info results.RunInfo
		results.ReadJSON(dir, results.RunFile, &info)
		t.Logf("interrupted after %v: status %s: %v", after, info.Status, err)
		if info.Status != "interrupted" {
			t.Errorf("interrupted after %v: run.json status %q", after, info.Status)
		}
		if a := dockerState(t); a != before {
			t.Errorf("interrupted after %v: docker state changed:\nbefore:\n%s\nafter:\n%s", after, before, a)
		}
	}
}
