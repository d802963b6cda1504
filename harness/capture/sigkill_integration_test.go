package capture_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/analysis/wireshark"
	"tokenbed/harness/capture"
)

// The SIGKILL test runs the capture in a child process: this test binary,
// re-executed with childEnv set. The child captures the interfaces listed
// in childIfacesEnv ("NAME=DEV@NETNSPATH;...") into childFileEnv, writes
// one annotation, prints "ready" and waits to be killed.
const (
	childEnv       = "TOKENBED_CAPTURE_CHILD"
	childFileEnv   = "TOKENBED_CAPTURE_CHILD_FILE"
	childIfacesEnv = "TOKENBED_CAPTURE_CHILD_IFACES"
)

func childMain() int {
	var ifcs []capture.Interface
	for _, spec := range strings.Split(os.Getenv(childIfacesEnv), ";") {
		name, rest, _ := strings.Cut(spec, "=")
		dev, ns, _ := strings.Cut(rest, "@")
		ifcs = append(ifcs, capture.Interface{Name: name, Device: dev, NetNSPath: ns})
	}
	c, err := capture.Create(context.Background(), os.Getenv(childFileEnv), capture.Config{
		Interfaces: ifcs,
		Filter:     capture.UDP(port),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	mono, wall := eventlog.Now()
	if err := c.Annotate(eventlog.Event{Agent: "harness", Seq: 1, MonoNS: mono, WallNS: wall, Kind: eventlog.RunStarted, Detail: "sigkill"}); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// TestCaptureSurvivesSIGKILL kills the capturing process, mid-traffic and
// without warning, and checks that the file holds every packet older than
// the flush interval, and, once Repair has cut a partial last block if the
// kill left one, that gopacket reads it to a clean EOF and tshark without
// error.
func TestCaptureSurvivesSIGKILL(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 1)
	ts, tsErr := wireshark.New(t.TempDir())
	if errors.Is(tsErr, wireshark.ErrNoTshark) && os.Geteuid() == 0 {
		t.Fatalf("%v: as root, `make deps` installs it", tsErr)
	}
	tok := wire.TokenID{Gen: 1, Origin: "A"}

	for round := 0; round < 3; round++ {
		file := filepath.Join(t.TempDir(), fmt.Sprintf("killed-%d.pcapng", round))
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), childEnv+"=1", childFileEnv+"="+file,
			childIfacesEnv+"="+"A/"+p.devA+"="+p.devA+"@"+p.pathA+";B/"+p.devB+"="+p.devB+"@"+p.pathB)
		child.Stderr = os.Stderr
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		killed := false
		t.Cleanup(func() {
			if !killed {
				child.Process.Kill()
				child.Wait()
			}
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("child: %q, %v", line, err)
		}

		// Phase 1: datagrams that must reach the file without any stop.
		const n = 20
		for i := 0; i < n; i++ {
			d := wire.Datagram{Type: wire.Commit, Sender: "A", Token: tok, Session: uint64(round), Nonce: uint64(i)}
			enc, err := d.Encode(a.key, a.addr, b.addr)
			if err != nil {
				t.Fatal(err)
			}
			exchange(t, a, b, enc)
		}
		sent := time.Now()
		for {
			// The file is readable at any moment: whole blocks only.
			if got := countDatagrams(t, file); got == 2*n {
				t.Logf("round %d: %d copies in the file %v after the last send", round, got, time.Since(sent).Round(time.Millisecond))
				break
			} else if time.Since(sent) > 5*time.Second {
				t.Fatalf("round %d: %d of %d copies in the file 5 s after sending", round, got, 2*n)
			}
			time.Sleep(10 * time.Millisecond)
		}

		// Phase 2: kill it while packets are flowing.
		stop := make(chan struct{})
		blasted := make(chan int)
		go func() {
			k := 0
			for {
				select {
				case <-stop:
					blasted <- k
					return
				default:
				}
				d := wire.Datagram{Type: wire.EarlyStop, Sender: "A", Token: tok, Session: uint64(round), Nonce: uint64(n + k)}
				enc, _ := d.Encode(a.key, a.addr, b.addr)
				a.conn.WriteToUDPAddrPort(enc, b.addr)
				k++
			}
		}()
		time.Sleep([]time.Duration{30, 170, 400}[round] * time.Millisecond)
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed = true
		err = child.Wait()
		close(stop)
		k := <-blasted
		drain(b)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child ended with %v, want killed by SIGKILL", err)
		}

		// The kill can land inside a multi-page write, leaving a partial
		// last block; Repair removes exactly that.
		removed, err := capture.Repair(file)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		cf := readFile(t, file) // fails on a partial block
		got := countDatagrams(t, file)
		ann := 0
		for _, r := range cf.records {
			if r.ifName == "harness" {
				ann++
			}
		}
		t.Logf("round %d: killed while sending (%d sent in phase 2); file holds %d copies, %d annotation(s), %d bytes; repair removed %d bytes",
			round, k, got, ann, fileSize(file), removed)
		if got < 2*n || ann != 1 {
			t.Errorf("round %d: %d copies and %d annotations after SIGKILL, want at least %d and 1", round, got, ann, 2*n)
		}
		if tsErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			rows, err := ts.Fields(ctx, file, "", "frame.number")
			cancel()
			if err != nil {
				t.Errorf("round %d: tshark on the killed capture: %v", round, err)
			} else if len(rows) != len(cf.records) {
				t.Errorf("round %d: tshark reads %d frames, gopacket %d", round, len(rows), len(cf.records))
			}
		}
	}
}

// drain empties p's socket of datagrams nobody waited for.
func drain(p *peer) {
	buf := make([]byte, 2048)
	for {
		p.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := p.conn.ReadFromUDPAddrPort(buf); err != nil {
			return
		}
	}
}

// countDatagrams counts the tokenbed packets in a capture file.
func countDatagrams(t testing.TB, file string) int {
	t.Helper()
	n := 0
	for _, r := range readFile(t, file).records {
		if r.ifName != "harness" {
			n++
		}
	}
	return n
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}
