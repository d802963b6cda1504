package tokenpassing

import (
	"tokenbed/analysis"

	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/internal/results"
)

// These tests analyse literal results directories (testdata/runs: run.json,
// topology.json, experiment.yaml and logs of A, B and C, built from the
// circulating history), without root. runs/clean is whole; every other
// directory holds only the files in which it differs from clean, each with
// one thing wrong, and a REMOVE file lists the files it lacks.

// copyRun assembles testdata/runs/name over runs/clean in a temporary
// directory: Analyze writes its outputs beside the inputs.
func copyRun(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	for _, layer := range []string{"clean", name} {
		src := filepath.Join("..", "testdata", "runs", layer)
		err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if fi.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if rel == "REMOVE" {
				for _, f := range strings.Fields(string(b)) {
					if err := os.Remove(filepath.Join(dst, f)); err != nil {
						return err
					}
				}
				return nil
			}
			return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// What is missing fails the run, with the reason: nothing is lost
// silently.
func TestRunAgentsCheck(t *testing.T) {
	for _, c := range []struct {
		run, want string // want: "" for a pass, else a phrase of the failure
	}{
		{"clean", ""},
		{"exit-nonzero", `C: the process ended with "exit status 2"`},
		{"unscheduled-kill", `C: the process ended with "killed by signal 9 (killed)"`},
		{"log-missing", "C: started, but its event log is missing"},
		{"log-empty", "C: started, but its event log is empty"},
		{"no-agent-started", "C: never logged agent_started"},
		// A log cut mid-line halfway, and one without its last event, of
		// processes the schedule did not kill: the rest of the log is lost.
		{"agent-log-truncated", `A: logs/A.jsonl line 74: truncated line`},
		{"agent-log-no-stop", "A: logs/A.jsonl line 146 ends a process without agent_stopping, and the schedule did not kill it"},
		// C killed by the schedule's crash mid-write: its log ends early,
		// cut mid-line, as a kill leaves it.
		{"killed-agent-log-ends", ""},
	} {
		t.Run(c.run, func(t *testing.T) {
			dir := copyRun(t, c.run)
			s, err := analyzed(dir)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Requirements["agents"]
			if c.want == "" {
				if r.Verdict != analysis.VerdictPass {
					t.Errorf("agents %+v, want a pass", r)
				}
				return
			}
			if r.Verdict != analysis.VerdictFail || !strings.Contains(r.Detail, c.want) || !slicesContains(s.Failed(), "agents") {
				t.Errorf("agents %+v, want a failure saying %q", r, c.want)
			}
			report, _ := os.ReadFile(filepath.Join(dir, results.ReportFile))
			if !failedLine(string(report), "agents") || !strings.Contains(string(report), c.want) {
				t.Errorf("report does not put the failure first:\n%.1500s", report)
			}
		})
	}
}

// A harness's log cut mid-line: the report is written, the agents check
// fails naming the file and line, and the checks that need the schedule's
// record say they could not judge, and why.
func TestRunHarnessLogTruncated(t *testing.T) {
	dir := copyRun(t, "harness-log-truncated")
	s, err := analyzed(dir)
	if err != nil {
		t.Fatalf("a damaged harness's log gives no report: %v", err)
	}
	const where = "logs/harness.jsonl line 3: truncated line"
	if r := s.Requirements["agents"]; r.Verdict != analysis.VerdictFail || !strings.Contains(r.Detail, where) {
		t.Errorf("agents %+v, want a failure naming %q", r, where)
	}
	for _, k := range []string{"loss", "liveness"} {
		if r := s.Requirements[k]; r.Verdict != analysis.VerdictNotJudged || !strings.Contains(r.Detail, where) {
			t.Errorf("%s %+v, want not judged, naming %q", k, r, where)
		}
	}
	report, err := os.ReadFile(filepath.Join(dir, results.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !failedLine(string(report), "agents") || !strings.Contains(string(report), where) {
		t.Errorf("report does not say what failed and where:\n%.1500s", report)
	}
}

// failedLine says whether the report's headline lists check among the
// failed ones (a damaged log may fail other checks beside it).
func failedLine(report, check string) bool {
	for _, l := range strings.Split(report, "\n") {
		if head, ok := strings.CutPrefix(l, "**FAILED: "); ok {
			head, _, _ = strings.Cut(head, ".**")
			return slicesContains(strings.Split(head, ", "), check)
		}
	}
	return false
}

// A crash by the schedule ends its process with SIGKILL: expected.
func TestRunAgentsScheduledCrashIsFine(t *testing.T) {
	h := newHistory([]results.AgentInfo{{Name: "C", Instance: "C"}})
	h.add(h.agents["C"], eventlog.Event{Agent: "C", Seq: 1, Kind: eventlog.AgentStarted})
	h.harness = []eventlog.Event{{Kind: eventlog.AgentCrash, Peer: "C"}, {Kind: eventlog.AgentExit, Peer: "C", Detail: "killed by signal 9 (killed)"},
		{Kind: eventlog.AgentExit, Peer: "C", Detail: "killed by signal 9 (killed)"}}
	r := checkAgents(h, nil, "ok")
	if r.Verdict != analysis.VerdictFail || strings.Count(r.Detail, "killed by signal 9") != 1 {
		t.Errorf("one scheduled crash, two SIGKILLed exits: %+v, want the second one only reported", r)
	}
}

// A capture killed with its writer (no interface
// statistics at its end) lost its last records; validation judges only
// the acquisitions before its last record, and says so. A complete
// capture that misses a Commit still fails.
func TestValidationStopsWhereAKilledCaptureEnds(t *testing.T) {
	dir := copyRun(t, "clean")
	h, err := readHistory(filepath.Join("..", "testdata", "histories", "circulating.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var acqs []ev
	for _, e := range h.evs {
		if e.kind == eventlog.TokenAcquired && e.reason == "commit" {
			acqs = append(acqs, e)
		}
	}
	last := acqs[len(acqs)-1]
	// The killed capture: every Commit but the last acquisition's, which
	// was still in the writer's memory.
	writeCapture(t, dir, acqs[:len(acqs)-1], false)
	s, err := analyzed(dir)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Requirements["validation"]
	if v.Verdict != analysis.VerdictPass || !strings.Contains(v.Detail, "1 acquisitions after the capture ends without their Commit") || v.Value != "56 of 56" {
		t.Errorf("killed capture: validation %+v, want a pass on the 56 acquisitions before its end, the last one not judged", v)
	}
	// The same capture, stopped properly: the missing Commit is a failure.
	writeCapture(t, dir, acqs[:len(acqs)-1], true)
	s, err = analyzed(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := s.Requirements["validation"]; v.Verdict != analysis.VerdictFail || !strings.Contains(v.Detail, "session "+strconv.FormatUint(last.session, 10)+" ") {
		t.Errorf("complete capture without the last Commit: %+v, want a failure on session %d", v, last.session)
	}
}

// writeCapture writes dir/capture.pcapng with, for each acquisition, its
// Commit arriving at the receiver 0.5 ms before it, signed by the sender
// with credentials issued into dir/ca; stopped adds the interface
// statistics that capture.Stop writes.
func writeCapture(t *testing.T, dir string, acqs []ev, stopped bool) {
	t.Helper()
	cadir := filepath.Join(dir, results.CADir)
	if _, err := os.Stat(filepath.Join(cadir, ca.CACertFile)); err != nil {
		if err := ca.Init(cadir); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"A", "B", "C"} {
			if err := ca.Issue(cadir, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	addr := map[string]netip.AddrPort{"A": netip.MustParseAddrPort("10.0.0.1:7400"), "B": netip.MustParseAddrPort("10.0.0.2:7400")}
	f, err := os.Create(filepath.Join(dir, results.CaptureFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ifaces := []string{"A/eth0", "B/eth0"}
	w, err := pcapgo.NewNgWriterInterface(f, pcapgo.NgInterface{Name: ifaces[0], LinkType: layers.LinkTypeEthernet, SnapLength: 65535, TimestampResolution: 9}, pcapgo.NgWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddInterface(pcapgo.NgInterface{Name: ifaces[1], LinkType: layers.LinkTypeEthernet, SnapLength: 65535, TimestampResolution: 9}); err != nil {
		t.Fatal(err)
	}
	for _, e := range acqs {
		cred, err := ca.LoadMember(cadir, e.peer, filepath.Join(cadir, ca.CACertFile))
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := wire.ParseTokenID(e.token)
		d := wire.Datagram{Type: wire.Commit, Sender: e.peer, Token: tok, Session: e.session, Nonce: e.session}
		payload, err := d.Encode(cred.Key, addr[e.peer], addr[e.agent])
		if err != nil {
			t.Fatal(err)
		}
		src, dst := addr[e.peer].Addr().As4(), addr[e.agent].Addr().As4()
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, src[3]}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, dst[3]}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src[:], DstIP: dst[:]}
		udp := &layers.UDP{SrcPort: 7400, DstPort: 7400}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		idx := 1
		if e.agent == "A" {
			idx = 0
		}
		data := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, e.wall-500_000), CaptureLength: len(data), Length: len(data), InterfaceIndex: idx}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if stopped {
		for i := range ifaces {
			if err := w.WriteInterfaceStats(i, pcapgo.NgInterfaceStatistics{LastUpdate: time.Unix(0, acqs[len(acqs)-1].wall), PacketsReceived: uint64(len(acqs))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A process whose log ends without agent_stopping: lost lines in a run
// that finished, not judged in one killed with its agents; and a first
// process that the schedule did not kill, before a second one that
// stopped, is named by its last line.
func TestAgentsLogWithoutItsLastEvent(t *testing.T) {
	h := newHistory([]results.AgentInfo{{Name: "C", Instance: "C", Log: "logs/C.jsonl"}})
	h.agents["C"].log = "logs/C.jsonl"
	h.add(h.agents["C"], eventlog.Event{Agent: "C", Seq: 1, MonoNS: 1, Kind: eventlog.AgentStarted})
	h.add(h.agents["C"], eventlog.Event{Agent: "C", Seq: 2, MonoNS: 2, Kind: eventlog.TokenAcquired})
	if r := checkAgents(h, nil, "ok"); r.Verdict != analysis.VerdictFail || !strings.Contains(r.Detail, "C: logs/C.jsonl line 2 ends a process without agent_stopping") {
		t.Errorf("finished run: %+v, want a failure at line 2", r)
	}
	if r := checkAgents(h, nil, "killed"); r.Verdict != analysis.VerdictPass || !strings.Contains(r.Detail, `1 processes without agent_stopping at the end of a run that did not finish (status "killed") not judged`) {
		t.Errorf("killed run: %+v, want a pass saying what was not judged", r)
	}
	h.add(h.agents["C"], eventlog.Event{Agent: "C", Seq: 1, MonoNS: 3, Kind: eventlog.AgentStarted})
	h.add(h.agents["C"], eventlog.Event{Agent: "C", Seq: 2, MonoNS: 4, Kind: eventlog.AgentStopping})
	if r := checkAgents(h, nil, "killed"); r.Verdict != analysis.VerdictFail || !strings.Contains(r.Detail, "C: logs/C.jsonl line 2 ends a process without agent_stopping") {
		t.Errorf("two processes, the first unstopped and not killed: %+v, want a failure at line 2", r)
	}
	h.harness = []eventlog.Event{{Kind: eventlog.AgentCrash, Peer: "C", MonoNS: 2}}
	if r := checkAgents(h, nil, "ok"); r.Verdict != analysis.VerdictPass {
		t.Errorf("the first process crashed by the schedule: %+v, want a pass", r)
	}
}
