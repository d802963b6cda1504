package capture_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/analysis/wireshark"
	"tokenbed/harness/capture"
)

func datagram(t testing.TB, from, to *peer, typ wire.Type, session, nonce uint64) []byte {
	t.Helper()
	d := wire.Datagram{Type: typ, Sender: from.name, Token: wire.TokenID{Gen: 7, Origin: "A"}, Session: session, Nonce: nonce}
	if typ == wire.Move || typ == wire.Ack {
		d.ReplyPort = port
	}
	enc, err := d.Encode(from.key, from.addr, to.addr)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// nonces returns, per interface name, the nonces of the datagrams in file.
func nonces(t testing.TB, file string) map[string][]uint64 {
	t.Helper()
	out := map[string][]uint64{}
	for _, r := range readFile(t, file).records {
		if r.ifName == "harness" {
			continue
		}
		// Ethernet(14) + IPv4(20) + UDP(8).
		d, err := wire.Decode(r.data[42:])
		if err != nil {
			t.Fatalf("frame %d: %v", r.frame, err)
		}
		out[r.ifName] = append(out[r.ifName], d.Nonce)
	}
	return out
}

func ifaces(p *pair) []capture.Interface {
	return []capture.Interface{
		{Name: "A/" + p.devA, Device: p.devA, NetNSPath: p.pathA},
		{Name: "B/" + p.devB, Device: p.devB, NetNSPath: p.pathB},
	}
}

// A link taken down and up again (an outage with Reason "down") must not
// end the capture: the kernel reports ENETDOWN on the socket, and packets
// after the link is back are captured.
func TestCaptureLinkDownUp(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 2)
	file := filepath.Join(t.TempDir(), "down.pcapng")
	c, err := capture.Create(context.Background(), file, capture.Config{Interfaces: ifaces(p), Filter: capture.UDP(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	exchange(t, a, b, datagram(t, a, b, wire.Commit, 1, 1))

	h, err := netlink.NewHandleAt(p.hA)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(p.devA)
	if err != nil {
		t.Fatal(err)
	}
	// Equivalent to: ip -n A link set devA down; ...; ip -n A link set devA up
	if err := h.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	// Wait for the veth to carry traffic again.
	deadline := time.Now().Add(5 * time.Second)
	for n := uint64(100); ; n++ {
		a.conn.WriteToUDPAddrPort(datagram(t, a, b, wire.Commit, 2, n), b.addr)
		b.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := b.conn.ReadFromUDPAddrPort(make([]byte, 2048)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("link did not come back up")
		}
	}
	drain(b)
	exchange(t, a, b, datagram(t, a, b, wire.Commit, 3, 1000))
	exchange(t, b, a, datagram(t, b, a, wire.Commit, 3, 1001))
	stats, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Interfaces[0].PollErrors == 0 {
		t.Errorf("A: no socket error counted while its link was down: the down/up path was not exercised (%+v)", stats.Interfaces[0])
	}
	got := nonces(t, file)
	for _, name := range []string{"A/" + p.devA, "B/" + p.devB} {
		ns := got[name]
		if len(ns) < 4 || ns[0] != 1 || ns[len(ns)-2] != 1000 || ns[len(ns)-1] != 1001 {
			t.Errorf("%s: nonces %v: want 1 first and 1000, 1001 (after the link came back) last", name, ns)
		}
	}
}

// failWriter accepts the first ok writes, then fails.
type failWriter struct {
	mu sync.Mutex
	ok int
	b  bytes.Buffer
}

func (w *failWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ok == 0 {
		return 0, errors.New("disk full")
	}
	w.ok--
	return w.b.Write(p)
}

// A failing file write stops the capture on its own and is reported.
func TestCaptureWriterError(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 3)
	w := &failWriter{ok: 1} // the header
	c, err := capture.Start(context.Background(), w, capture.Config{Interfaces: ifaces(p)})
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, a, b, datagram(t, a, b, wire.Commit, 1, 1))
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		c.Stop()
		t.Fatal("capture still running 5 s after its writer failed")
	}
	_, err = c.Stop()
	if err == nil || !strings.Contains(err.Error(), "capture: writing: disk full") {
		t.Fatalf("Stop: %v, want the writer's error", err)
	}
	if err := c.Annotate(eventlog.Event{Kind: eventlog.HarnessNotice}); !errors.Is(err, capture.ErrStopped) {
		t.Errorf("Annotate after failure: %v, want ErrStopped", err)
	}
}

// Cancelling the context stops the capture and completes the file.
func TestCaptureContextCancel(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 4)
	file := filepath.Join(t.TempDir(), "cancel.pcapng")
	ctx, cancel := context.WithCancel(context.Background())
	c, err := capture.Create(ctx, file, capture.Config{Interfaces: ifaces(p), Filter: capture.UDP(port)})
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, a, b, datagram(t, a, b, wire.Commit, 1, 1))
	cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("capture still running 5 s after its context was cancelled")
	}
	if _, err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	// Everything sent before the cancel is in, then the statistics.
	got := nonces(t, file)
	if len(got["A/"+p.devA]) != 1 || len(got["B/"+p.devB]) != 1 {
		t.Errorf("copies %v, want one on each end", got)
	}
	cf := readFile(t, file)
	if cf.ifaces[0].Statistics.PacketsReceived == 0 || cf.ifaces[0].Statistics.EndTime.IsZero() {
		t.Errorf("no statistics block for A: %+v", cf.ifaces[0].Statistics)
	}
}

// An interface added to a running capture (an agent joining) gets its own
// pcapng interface, after the others; tshark reads the file.
func TestCaptureAddInterface(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 5)
	file := filepath.Join(t.TempDir(), "add.pcapng")
	c, err := capture.Create(context.Background(), file, capture.Config{Interfaces: ifaces(p)[:1], Filter: capture.UDP(port)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	exchange(t, a, b, datagram(t, a, b, wire.Commit, 1, 1))
	// Let the first packet reach the file before the new interface block.
	time.Sleep(200 * time.Millisecond)
	if _, err := c.Add(ifaces(p)[0]); err == nil {
		t.Error("adding a second interface named like the first: no error")
	}
	idx, err := c.Add(ifaces(p)[1])
	if err != nil {
		t.Fatal(err)
	}
	if idx != 2 || c.AnnotationIndex() != 1 {
		t.Errorf("added interface index %d, annotation index %d; want 2 and 1", idx, c.AnnotationIndex())
	}
	exchange(t, a, b, datagram(t, a, b, wire.Commit, 1, 2))
	if _, err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	got := nonces(t, file)
	if len(got["A/"+p.devA]) != 2 || len(got["B/"+p.devB]) != 1 || got["B/"+p.devB][0] != 2 {
		t.Errorf("nonces per interface %v: want A: 1, 2 and B: 2", got)
	}
	ts, err := wireshark.New(t.TempDir())
	if err != nil {
		if os.Geteuid() == 0 || !errors.Is(err, wireshark.ErrNoTshark) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := ts.Fields(ctx, file, "", "frame.interface_name")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r[0])
	}
	want := "A/" + p.devA + " A/" + p.devA + " B/" + p.devB
	if strings.Join(names, " ") != want {
		t.Errorf("tshark interfaces %v, want %s", names, want)
	}
}

// slowWriter makes every write take d: a disk that cannot keep up.
type slowWriter struct {
	f *os.File
	d time.Duration
}

func (w slowWriter) Write(p []byte) (int, error) { time.Sleep(w.d); return w.f.Write(p) }

// When the file cannot keep up, the kernel drops packets and the drops are
// reported: in Stats and in the file's interface statistics blocks.
func TestCaptureReportsKernelDrops(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 6)
	file := filepath.Join(t.TempDir(), "drops.pcapng")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := capture.Start(context.Background(), slowWriter{f, 200 * time.Millisecond}, capture.Config{
		Interfaces:    ifaces(p)[:1],
		RingBlockSize: os.Getpagesize(),
		RingBlocks:    1,
		MaxPending:    1,
	})
	if err != nil {
		t.Fatal(err)
	}
	enc := datagram(t, a, b, wire.Commit, 1, 1)
	for i := 0; i < 5000; i++ {
		a.conn.WriteToUDPAddrPort(enc, b.addr)
	}
	stats, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	is := stats.Interfaces[0]
	t.Logf("%+v", is)
	if is.KernelDrops == 0 {
		t.Fatalf("no kernel drops with a one-page ring and a stalled writer: %+v", is)
	}
	if is.KernelPackets < is.KernelDrops+is.Received {
		t.Errorf("kernel packets %d < drops %d + read %d", is.KernelPackets, is.KernelDrops, is.Received)
	}
	st := readFile(t, file).ifaces[0].Statistics
	if st.PacketsDropped != is.KernelDrops || st.PacketsReceived != is.KernelPackets {
		t.Errorf("statistics block: received %d dropped %d; want %d, %d", st.PacketsReceived, st.PacketsDropped, is.KernelPackets, is.KernelDrops)
	}
}

// The in-kernel filter: only the port's datagrams reach the ring (the
// noise on port 9999 and the ARP exchange do not), with no userspace
// filter at all.
func TestCaptureKernelBPF(t *testing.T) {
	p := newPair(t)
	a, b := newPeers(t, p, 7)
	noiseA, noiseB := listen(t, p.hA, p.ipA, 9999), listen(t, p.hB, p.ipB, 9999)
	prog, err := capture.UDPBPF(port)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bpf.pcapng")
	c, err := capture.Create(context.Background(), file, capture.Config{Interfaces: ifaces(p), BPF: prog})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	t0 := realtime()
	for i := uint64(0); i < 5; i++ {
		exchange(t, a, b, datagram(t, a, b, wire.Commit, 1, i))
		noiseA.WriteToUDPAddrPort([]byte("noise"), noiseB.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	noiseB.SetReadDeadline(time.Now().Add(time.Second))
	if _, _, err := noiseB.ReadFromUDPAddrPort(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readFile(t, file).records {
		if r.ci.Timestamp.UnixNano() < t0 {
			continue // may have reached the ring before the filter was attached
		}
		if len(r.data) < 42 || r.data[23] != 17 || (r.data[36] != 0x1c || r.data[37] != 0xe8) {
			t.Errorf("frame %d on %s passed the kernel filter: % x", r.frame, r.ifName, r.data[:min(len(r.data), 42)])
		}
	}
	for _, is := range stats.Interfaces {
		if is.Written < 5 || is.KernelDrops != 0 {
			t.Errorf("%s: %d written, %d dropped; want the 5 datagrams", is.Name, is.Written, is.KernelDrops)
		}
	}
}
