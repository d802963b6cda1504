package userspace

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A real topology (lab_test.go: a namespace per agent on a hub's bridge, a
// veth per agent), with the engine in front: per-destination
// delays, loss, fail-closed, TUN drops, and nothing left behind.

func echo(c *net.UDPConn) {
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			c.WriteToUDP(buf[:n], from)
		}
	}()
}

// rtts sends n probes from c to each destination in turn, interleaved so
// that every path sees the same moments of the host's load, and returns
// each destination's round-trip times in probe order.
func rtts(t *testing.T, c *net.UDPConn, n int, to ...netip.AddrPort) [][]time.Duration {
	out := make([][]time.Duration, len(to))
	buf := make([]byte, 2048)
	for i := 0; i < n; i++ {
		for j, dst := range to {
			t0 := time.Now()
			if _, err := c.WriteToUDPAddrPort([]byte(fmt.Sprint("probe ", i)), dst); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, _, err := c.ReadFromUDP(buf); err != nil {
				t.Fatalf("probe %d to %v: %v", i, dst, err)
			}
			out[j] = append(out[j], time.Since(t0))
		}
	}
	return out
}

// addedDelay is the median, over paired probes, of how much longer a
// round trip on path took than the one just before it on base: the delay
// the engine added, without the host's own cost of a round trip (two
// wake-ups of the relay, of the echo and of the prober), which depends on
// the machine and on what else runs on it (CI's make test ran other
// packages beside this one and the plain RTT to B read 11.37 ms).
func addedDelay(base, path []time.Duration) time.Duration {
	d := make([]time.Duration, len(path))
	for i := range path {
		d[i] = path[i] - base[i]
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func TestPerDestinationDelayAndLoss(t *testing.T) {
	l := newBareLab(t, "tbe11a01", "A", "B", "C", "D")
	l.attach(Config{RunID: "tbe11a01", Seed: 7})
	l.profile("A", "B", "delay 5ms")
	l.profile("B", "A", "delay 5ms")
	l.profile("A", "C", "delay 40ms")
	l.profile("C", "A", "delay 40ms")
	l.profile("B", "C", "delay 1ms")
	l.profile("C", "B", "delay 1ms")
	// D is the baseline: through the relay like the others, with no delay.
	l.profile("A", "D", "delay 0ms")
	l.profile("D", "A", "delay 0ms")
	if err := l.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := l.socket("A", 9000)
	for _, n := range []string{"B", "C", "D"} {
		echo(l.socket(n, 9000))
	}
	r := rtts(t, a, 30, netip.AddrPortFrom(l.addrs["D"], 9000), netip.AddrPortFrom(l.addrs["B"], 9000), netip.AddrPortFrom(l.addrs["C"], 9000))
	base, toB, toC := r[0], r[1], r[2]
	addB, addC := addedDelay(base, toB), addedDelay(base, toC)
	st := l.eng.Stats()
	t.Logf("RTT median: to D %v (no delay), to B %v (2×5 ms), to C %v (2×40 ms); added over D: B %v, C %v; engine bias %v, overshoot p50 %v p99 %v, realtime %v",
		slices.Sorted(slices.Values(base))[len(base)/2], slices.Sorted(slices.Values(toB))[len(toB)/2], slices.Sorted(slices.Values(toC))[len(toC)/2],
		addB, addC, time.Duration(st.BiasNS), time.Duration(st.OvershootP50NS), time.Duration(st.OvershootP99NS), st.Realtime)
	// The relay releases a packet no earlier than its time less the bias
	// (at most maxBias, and only the floor of its wake-up lateness), and
	// late by what the timer overshoots beyond that: half a millisecond
	// either way over two hops is well outside both.
	const tol = 500 * time.Microsecond
	if addB < 10*time.Millisecond-tol || addB > 10*time.Millisecond+tol {
		t.Errorf("delay added to the round trip to B %v, want 10 ms ± %v", addB, tol)
	}
	if addC < 80*time.Millisecond-tol || addC > 80*time.Millisecond+tol {
		t.Errorf("delay added to the round trip to C %v, want 80 ms ± %v", addC, tol)
	}

	// Loss changed at run time, one way: 20% from A to B.
	l.profile("A", "B", "loss 20%")
	b := l.socket("B", 9100)
	const n = 3000
	count := make(chan int)
	go func() { // read while sending: the socket buffer holds only a few hundred
		got := 0
		buf := make([]byte, 64)
		for {
			b.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, _, err := b.ReadFromUDP(buf); err != nil {
				count <- got
				return
			}
			got++
		}
	}()
	for i := 0; i < n; i++ {
		a.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(l.addrs["B"], 9100))
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	got := <-count
	sd := math.Sqrt(n * 0.2 * 0.8)
	if lost := n - got; math.Abs(float64(lost)-n*0.2) > 4*sd {
		t.Errorf("loss 20%%: %d of %d lost", lost, n)
	}
	st = l.eng.Stats()
	if st.Unintended() != 0 {
		t.Errorf("unintended drops: %+v", st)
	}
	t.Logf("A>B stats %+v", st.Directions[l.addrs["A"].String()+">"+l.addrs["B"].String()])
}

// If the engine dies, traffic stops rather than flowing unimpaired over
// the bridge.
func TestFailsClosed(t *testing.T) {
	l := newLab(t, "tbe11a02")
	l.profile("A", "B", "delay 5ms")
	l.profile("B", "A", "delay 5ms")
	if err := l.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := l.socket("A", 9000)
	b := l.socket("B", 9000)
	// Alive: a datagram gets through.
	a.WriteToUDPAddrPort([]byte("alive"), netip.AddrPortFrom(l.addrs["B"], 9000))
	buf := make([]byte, 64)
	b.SetReadDeadline(time.Now().Add(time.Second))
	if _, _, err := b.ReadFromUDP(buf); err != nil {
		t.Fatalf("engine alive: %v", err)
	}
	// The engine dies without tidying: its TUN devices go, the routes
	// through them too; only the prohibit routes remain.
	l.eng.mu.Lock()
	for _, p := range l.eng.ports {
		unix.Close(p.fd) // the relay loses the device: epoll forgets it
		p.fd = -1
	}
	l.eng.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	_, err := a.WriteToUDPAddrPort([]byte("after death"), netip.AddrPortFrom(l.addrs["B"], 9000))
	b.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, rerr := b.ReadFromUDP(buf); rerr == nil {
		t.Fatalf("a datagram (%q) flowed unimpaired after the engine died", buf[:n])
	}
	t.Logf("send after the engine died: %v (prohibit route)", err)
}

// Packets the kernel drops on a full TUN transmit queue are drops the
// profile did not ask for: they count in TunDrops and in Unintended, also
// after Close has removed the devices. The queue is made tiny and the
// relay not yet started, so the burst overflows it whatever the load.
func TestTunDropsCountAsUnintended(t *testing.T) {
	const qlen, burst = 4, 200
	l := newBareLab(t, "tbe11a03", "A", "B")
	l.attach(Config{RunID: "tbe11a03", Seed: 7, TxQueueLen: qlen})
	l.profile("A", "B", "delay 1ms")
	l.profile("B", "A", "delay 1ms")
	a := l.socket("A", 9000)
	b := l.socket("B", 9000)
	to := netip.AddrPortFrom(l.addrs["B"], 9000)
	for i := 0; i < burst; i++ {
		a.WriteToUDPAddrPort([]byte("burst"), to)
	}
	st := l.eng.Stats()
	t.Logf("after a burst of %d into a queue of %d with the relay stopped: %+v", burst, qlen, st)
	if st.TunDrops == 0 {
		t.Fatalf("TunDrops = 0 after a burst of %d into a TUN queue of %d", burst, qlen)
	}
	if st.TunDrops > burst {
		t.Errorf("TunDrops = %d, more than the %d packets sent", st.TunDrops, burst)
	}
	if st.Unintended() < st.TunDrops {
		t.Errorf("Unintended() = %d does not include TunDrops = %d", st.Unintended(), st.TunDrops)
	}
	// What the queue held still goes through once the relay runs.
	if err := l.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	b.SetReadDeadline(time.Now().Add(time.Second))
	if _, _, err := b.ReadFromUDP(buf); err != nil {
		t.Errorf("the queued packets did not arrive: %v", err)
	}
	// Close removes the devices and their counters; the total stays.
	drops := st.TunDrops
	st = l.detach()
	if st.TunDrops < drops || st.Unintended() < st.TunDrops {
		t.Errorf("after Close: TunDrops %d (had %d), Unintended %d", st.TunDrops, drops, st.Unintended())
	}
}

// The TUN devices get DefaultTxQueueLen, not the kernel's 500: a window of
// 10,000 packets in flight must not overflow them.
func TestTxQueueLenDefault(t *testing.T) {
	l := newBareLab(t, "tbe11a04", "A", "B")
	l.attach(Config{RunID: "tbe11a04", Seed: 7})
	for n, ns := range l.ns {
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		link, err := h.LinkByName(l.eng.TunName())
		h.Close()
		if err != nil {
			t.Fatal(err)
		}
		if q := link.Attrs().TxQLen; q != DefaultTxQueueLen {
			t.Errorf("%s: %s txqueuelen %d, want %d", n, l.eng.TunName(), q, DefaultTxQueueLen)
		}
	}
}

// sch_netem queues a duplicate's clone before the original, so with
// "limit 1" the clone takes the only place and the original is dropped at
// the limit: one copy of every packet still arrives (the clone). A flipped
// bit that makes the TUN device refuse a packet is the corruption asked
// for, never an unintended drop.
func TestDuplicateOutlivesLimitAndCorruptionIsIntended(t *testing.T) {
	l := newLab(t, "tbe11a04")
	l.profile("A", "B", "delay 20ms duplicate 100% limit 1")
	l.profile("A", "C", "corrupt 100%")
	if err := l.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, b := l.socket("A", 9000), l.socket("B", 9000)
	const n = 20
	got := make(chan int)
	go func() {
		k := 0
		buf := make([]byte, 64)
		for {
			b.SetReadDeadline(time.Now().Add(time.Second))
			if _, _, err := b.ReadFromUDP(buf); err != nil {
				got <- k
				return
			}
			k++
		}
	}()
	for i := 0; i < n; i++ {
		a.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(l.addrs["B"], 9000))
		time.Sleep(40 * time.Millisecond) // the queue empties between packets
	}
	if k := <-got; k != n {
		t.Errorf("delay 20ms duplicate 100%% limit 1: %d of %d packets arrived, want each once (the clone)", k, n)
	}
	for i := 0; i < 1000; i++ {
		a.WriteToUDPAddrPort(make([]byte, 28), netip.AddrPortFrom(l.addrs["C"], 9000))
	}
	time.Sleep(200 * time.Millisecond)
	st := l.eng.Stats()
	ab := st.Directions[l.addrs["A"].String()+">"+l.addrs["B"].String()]
	ac := st.Directions[l.addrs["A"].String()+">"+l.addrs["C"].String()]
	t.Logf("A>B %+v; A>C %+v", ab, ac)
	if ab.Duplicated != n || ab.LimitDrops != n {
		t.Errorf("A>B: %d duplicated, %d limit drops, want %d each", ab.Duplicated, ab.LimitDrops, n)
	}
	if ac.Corrupted < 1000 {
		t.Errorf("A>C: %d of 1000 corrupted", ac.Corrupted)
	}
	if st.Unintended() != 0 {
		t.Errorf("unintended drops with corrupt 100%%: %+v", st)
	}
}
