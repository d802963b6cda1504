package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	tpanalysis "tokenbed/analysis/tokenpassing"
	"tokenbed/internal/inject"
	"tokenbed/internal/nsenter"
	"tokenbed/internal/results"
)

// C crashes and comes back; while it is down and after its restart, an
// injector replays into its namespace every datagram C received in its
// previous life, from the original source addresses.
const replayed = `
name: replay-after-restart
seed: 21
duration: 50s
time_scale: 10
replicas: 1
defaults:
  agent:
    randomwalk: {hold: 1s}
    passing: {move_timeout: 100ms, ack_timeout: 100ms, commit_timeout: 100ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
schedule:
  - {action: crash, agent: C, at: 15s}
  - {action: restart, agent: C, at: 20s}
`

// A restarted agent has lost the soft state that recognises replays
// (002 §3.1). Replays of its previous life, spoofed from their original
// sources into its namespace, must not make it acquire a copy of the live
// token: requirement (ii) passes, and the restarted agent refuses them.
func TestRestartedAgentRefusesReplaysOfItsPreviousLife(t *testing.T) {
	requireRoot(t)
	e, path := load(t, replayed)
	root := t.TempDir()
	id := NewRunID()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inj := &injector{t: t, runDir: filepath.Join(root, id), ns: id + "-C"}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inj.run(ctx) }()
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: root, RunID: id, Impair: ImpairNone,
		AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	assertClean(t, dir)
	if inj.err != nil {
		t.Fatalf("injector: %v", inj.err)
	}
	t.Logf("captured %d datagrams to C before its crash; replayed %d after its restart", len(inj.captured), inj.sent)
	if len(inj.captured) < 20 || inj.sent < 3*len(inj.captured) {
		t.Fatalf("the injector captured %d and replayed %d datagrams: too few to test anything", len(inj.captured), inj.sent)
	}
	// The restarted C refused the replays as predating its start, and
	// none of them reached its endpoint.
	evs, err := eventlog.ReadFile(filepath.Join(dir, results.LogsDir, "C.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var starts, beforeStart, acquiredAfter int
	for _, ev := range evs {
		switch {
		case ev.Kind == eventlog.AgentStarted:
			starts++
		case ev.Kind == eventlog.DatagramRejected && ev.Reason == "before-start":
			beforeStart++
		case ev.Kind == eventlog.TokenAcquired && starts > 1:
			acquiredAfter++
		}
	}
	if starts != 2 {
		t.Fatalf("C's log shows %d starts, want 2", starts)
	}
	if beforeStart == 0 {
		t.Errorf("the restarted C logged no before-start rejection: the replays did not reach it")
	}
	// ... and, once its quarantine was over, it rejoined the circulation.
	if acquiredAfter == 0 {
		t.Errorf("the restarted C never acquired the token again")
	}
	s, err := analysis.Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Requirements["duplication"]; !r.Pass || len(tpanalysis.FiguresOf(s).Duplications) > 0 {
		t.Fatalf("requirement (ii): %+v, duplications %+v", r, tpanalysis.FiguresOf(s).Duplications)
	}
	t.Logf("C: %d before-start rejections logged, %d acquisitions after the restart; rejections %v", beforeStart, acquiredAfter, tpanalysis.FiguresOf(s).Rejections)
}

// injector records, from inside C's namespace, every UDP datagram
// delivered to it until C crashes, then, once C has restarted, sends all
// of them again with their original IP source through internal/inject
// (signatures bind source and destination, 002 §3, so a replay must
// spoof). The sender's checksum may have been left to offload (veth), so
// each copy carries none (RFC 768) and is otherwise byte for byte what C
// received.
type injector struct {
	t        *testing.T
	runDir   string
	ns       string
	captured [][]byte // whole IPv4 packets
	sent     int
	err      error
}

func (in *injector) run(ctx context.Context) {
	var h netns.NsHandle
	for {
		var err error
		if h, err = netns.GetFromName(in.ns); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			in.err = err
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	defer h.Close()
	var capFD int
	err := nsenter.Do(h, func() error {
		var err error
		capFD, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_UDP)
		return err
	})
	if err != nil {
		in.err = err
		return
	}
	defer syscall.Close(capFD)
	send, err := inject.Open(in.ns)
	if err != nil {
		in.err = err
		return
	}
	defer send.Close()
	tv := syscall.NsecToTimeval((20 * time.Millisecond).Nanoseconds())
	syscall.SetsockoptTimeval(capFD, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)

	// Record until the harness logs C's crash.
	buf := make([]byte, 2048)
	for !in.logged(eventlog.AgentCrash) {
		if ctx.Err() != nil {
			return
		}
		n, _, err := syscall.Recvfrom(capFD, buf, 0)
		if err != nil {
			continue
		}
		p, ok := inject.UDPNoChecksum(buf[:n])
		if !ok || binary.BigEndian.Uint16(p[int(p[0]&0xf)*4+2:]) != AgentPort {
			continue
		}
		in.captured = append(in.captured, p)
	}
	// Wait for the new C to be up (its second agent_started: its socket
	// is bound), so that the replays race ahead of the genuine traffic
	// that would otherwise teach it the current sessions first.
	for in.started() < 2 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
	// Replay everything every 10 ms for half a second, then every 200 ms
	// until the run ends: within C's quarantine and long after it.
	for round := 0; ctx.Err() == nil; round++ {
		for _, p := range in.captured {
			if err := send.Send(p); err == nil {
				in.sent++
			}
		}
		pause := 10 * time.Millisecond
		if round >= 50 {
			pause = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// started counts C's agent_started events.
func (in *injector) started() int {
	b, _ := os.ReadFile(filepath.Join(in.runDir, results.LogsDir, "C.jsonl"))
	return bytes.Count(b, []byte(`"kind":"`+eventlog.AgentStarted+`"`))
}

// logged reports whether the harness log has an event of kind about C.
func (in *injector) logged(kind eventlog.Kind) bool {
	f, err := os.Open(filepath.Join(in.runDir, results.LogsDir, "harness.jsonl"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(kind)) {
			continue
		}
		var ev eventlog.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Kind == kind && ev.Peer == "C" {
			return true
		}
	}
	return false
}
