package runtest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnlayer"
	"tokenbed/agent/ftn/msg"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/runner"
	"tokenbed/internal/inject"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
)

const lateDuplicates = "../../../experiments/ftn-late-duplicates.yaml"

// TestLateDuplicatesSimulated: ftn-late-duplicates.yaml (client->server
// links delaying 200 ms +- 190 ms and duplicating 30%, no attacker, no
// fault) in the simulator: late copies of the clients' own requests are
// 001's failure model, and every check of both views passes. Seeded: a
// failure replays exactly.
func TestLateDuplicatesSimulated(t *testing.T) {
	if testing.Short() {
		t.Skip("a 25 s experiment in virtual time")
	}
	judge(t, simulate(t, loadFile(t, lateDuplicates), lateDuplicates))
}

// TestLateDuplicatesNetns: the same experiment with real processes on
// network namespaces, the links impaired by the netem engine.
func TestLateDuplicatesNetns(t *testing.T) {
	t.Parallel() // real time, little CPU (see TestMain)
	testenv.RequireRoot(t, "creates network namespaces")
	dir, _ := runRealFile(t, nil, lateDuplicates, nil)
	judge(t, dir)
}

// replayExperiment: 3 servers and 6 workload clients on unimpaired links
// for 25 s; the leader crashes at 8 s and restarts at 14 s, so replays
// cross a leader change and a transfer of names.
const replayExperiment = `
name: ftn-replay
description: FTN lock service, 3 servers, 6 clients, a leader crash; the test replays the clients' datagrams
protocol: ftn
seed: 22
duration: 25s
defaults:
  role: client
  profile: "delay 1ms"
  agent:
    tick: 50ms
agents:
  - {name: s0, role: server}
  - {name: s1, role: server}
  - {name: s2, role: server}
  - {name: c0}
  - {name: c1}
  - {name: c2}
  - {name: c3}
  - {name: c4}
  - {name: c5}
schedule:
  - {action: crash, agent: leader, at: 8s}
  - {action: restart, agent: leader, at: 14s}
`

// TestReplayedRequestsNetns: while the run goes on, an injector reads the
// run's own capture.pcapng and sends every client->server FTN datagram
// captured arriving at a server into that server's namespace again, from
// the client's address, 1 s and 4 s after it was captured: an attacker
// with a tap, or a network delivering very late copies (001: servers
// "must guard against late messages"). Every check of both views passes.
func TestReplayedRequestsNetns(t *testing.T) {
	t.Parallel() // real time, little CPU (see TestMain)
	testenv.RequireRoot(t, "creates network namespaces and raw sockets in them")
	file := filepath.Join(t.TempDir(), "ftn-replay.yaml")
	if err := os.WriteFile(file, []byte(replayExperiment), 0o644); err != nil {
		t.Fatal(err)
	}
	var rp *replayer
	dir, _ := runRealFile(t, nil, file, func(ctx context.Context, runDir, runID string, e *experiments.Experiment) func() {
		rp = &replayer{capture: filepath.Join(runDir, results.CaptureFile), runID: runID, servers: map[string]bool{},
			injectors: map[string]*inject.Injector{}, seen: map[string]bool{}, kinds: map[msg.Kind]int{}}
		for _, a := range e.Agents {
			if a.Role == "server" {
				rp.servers[a.Name] = true
			}
		}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); rp.run(ctx) }()
		return func() { cancel(); wg.Wait() }
	})
	if rp.err != nil {
		t.Fatalf("injector: %v", rp.err)
	}
	t.Logf("replayed %d client->server datagrams (%d distinct: %v), %d sends failed", rp.sent, len(rp.seen), rp.kinds, rp.failed)
	if rp.kinds[msg.Acquire] < 20 || rp.kinds[msg.Release] == 0 || rp.sent < len(rp.seen) {
		t.Fatalf("the injector replayed %d datagrams (%v): too few to test anything", rp.sent, rp.kinds)
	}
	judge(t, dir)
	// The replays reached the servers: they refused some as stale (a
	// replay of the current request is answered again, a heartbeat's is
	// a heartbeat). Without this a replayer that sent nowhere would pass.
	refused := 0
	for s := range rp.servers {
		evs, err := eventlog.ReadFile(filepath.Join(dir, results.LogsDir, s+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == eventlog.DatagramRejected {
				refused++
			}
		}
	}
	t.Logf("the servers logged %d rejections", refused)
	if refused == 0 {
		t.Errorf("the servers logged no rejected datagram: the replays never reached them")
	}
}

// replay is one datagram to send again: a whole IPv4 packet, into a
// server's namespace, at a time.
type replay struct {
	at     time.Time
	server string
	pkt    []byte
}

// replayer follows the run's capture as it grows.
type replayer struct {
	capture   string
	runID     string
	servers   map[string]bool
	injectors map[string]*inject.Injector
	seen      map[string]bool // signatures of the datagrams already scheduled
	kinds     map[msg.Kind]int
	read      int // records of the capture already read
	due       []replay
	sent      int
	failed    int
	err       error
}

// Replays of each datagram, after its capture: within a hold (the plug-in
// workload holds 200 ms, acquires once a second) and well after it.
var replayAfter = []time.Duration{time.Second, 4 * time.Second}

func (rp *replayer) run(ctx context.Context) {
	defer func() {
		for _, in := range rp.injectors {
			in.Close()
		}
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := rp.scan(); err != nil {
			rp.err = err
			return
		}
		now := time.Now()
		keep := rp.due[:0]
		for _, r := range rp.due {
			if r.at.After(now) {
				keep = append(keep, r)
				continue
			}
			in := rp.injectors[r.server]
			if in == nil {
				var err error
				if in, err = inject.Open(rp.runID + "-" + r.server); err != nil {
					// The server's namespace is there as long as the run's
					// network is: a failure here is the test's.
					rp.err = err
					return
				}
				rp.injectors[r.server] = in
			}
			if in.Send(r.pkt) != nil {
				rp.failed++ // the server is down: no socket bound, ICMP
				continue
			}
			rp.sent++
		}
		rp.due = keep
	}
}

// scan reads the capture from its start (it is written as the run goes,
// up to a block the writer has not finished) and schedules the replays of
// the client->server datagrams not read before.
func (rp *replayer) scan() error {
	b, err := os.ReadFile(rp.capture)
	if os.IsNotExist(err) || len(b) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	r, err := pcapread.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil // the header is not whole yet
	}
	var dg ftnlayer.Datagram
	for {
		p, err := r.Next()
		if err != nil {
			return nil // the end, or a block cut short: read again next time
		}
		if p.Record <= rp.read {
			continue
		}
		rp.read = p.Record
		d, err := r.Interface(p.Iface)
		if err != nil {
			continue
		}
		inst, _, _ := strings.Cut(d.Name, "/")
		if !rp.servers[inst] {
			continue
		}
		pkt, ok := inject.UDPNoChecksum(p.IPv4)
		if !ok || p.UDP == nil {
			continue
		}
		if dg.DecodeFromBytes(p.UDP.Payload, gopacket.NilDecodeFeedback) != nil || dg.Msg.Kind.FromServer() {
			continue
		}
		if rp.seen[string(dg.Sig)] {
			continue
		}
		rp.seen[string(dg.Sig)] = true
		rp.kinds[dg.Msg.Kind]++
		for _, after := range replayAfter {
			rp.due = append(rp.due, replay{at: p.Time.Add(after), server: inst, pkt: pkt})
		}
	}
}

// runRealFile runs the experiment file with real processes on be (nil:
// network namespaces) and returns its results directory. during, if not
// nil, is called once the run's directory and ID are known, before the
// run starts, and the function it returns once the run has ended.
func runRealFile(t *testing.T, be backend.Backend, file string, during func(ctx context.Context, runDir, runID string, e *experiments.Experiment) func()) (string, *experiments.Experiment) {
	t.Helper()
	e := loadFile(t, file)
	root := resultsRoot(t)
	id := runner.NewRunID()
	impair := impairment(t, id)
	if during != nil {
		stop := during(context.Background(), filepath.Join(root, id), id, e)
		defer stop()
	}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: file, ResultsRoot: root,
		RunID: id, Backend: be, Impair: impair, ImpairReason: "test", AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return dir, e
}
