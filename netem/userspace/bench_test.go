//go:build linux

package userspace

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tokenbed/internal/nsenter"
)

// The engine's cost, each figure against a baseline measured in the same
// run: the same two namespaces (lab_test.go) and the same sender and
// receiver, without the engine, the agents then talking over their veth
// pairs and the bridge. Every b.Loop iteration measures the baseline and
// then the engine, alternately, so that a load that comes and goes on the
// machine falls on both; the figures are totals over all iterations.
//
// Throughput: a closed-loop window. The sender keeps sent − received −
// lost ≤ window; the receiver counts arrivals and finds losses as gaps in
// the sequence numbers (every path here is FIFO). With delay d the ceiling
// is window/d: 10,000 / 100 ms = 100,000 pkt/s. Reported: pkt/s (engine),
// base-pkt/s, ratio (engine/baseline), inflight (the achieved window,
// sampled every 5 ms), ceiling-frac (pkt/s ÷ ceiling, delayed cases),
// lost (packets lost in the engine's measured windows), early (engine
// packets that arrived sooner than the configured delay after they were
// sent: netem never releases early), limitdrops (the profile's queue
// limit, window-sized, overflowed), tundrops and unintended (Stats),
// sockdrops (UDP InErrors and SndbufErrors in both namespaces: the
// sockets' buffers were too small); all of these should be 0. load1 is the 1-minute load average when the
// benchmark started; "load average" in the log, at start and at the end.
// The baseline has no delay (the kernel here has no netem to give it
// one): at 100 ms its ratio says how much of the unimpaired path's rate
// the engine keeps through a 10,000-packet window, ceiling-frac how close
// it gets to what the window allows.
//
// Latency: probes at 1 kHz, each carrying its send time; the receiver
// takes the one-way time on the same monotonic clock. Reported:
// p50-added-us and p99-added-us (engine one-way time less the configured
// delay), base-p50-us and base-p99-us (the baseline's one-way time), and
// p50-ratio, p99-ratio (added ÷ baseline), lost and early as above.
//
// Each phase runs for a fixed time, so one b.Loop iteration takes 2–4 s
// and "make bench" (-benchtime 2s) runs one or two. The sockets' buffers
// are 64 MiB (SO_RCVBUFFORCE, SO_SNDBUFFORCE): a window of 10,000 must
// wait in the engine, not be dropped by a socket.
//
// Nothing random is used: the profiles are pure delays and the engine is
// seeded.
//
// What it showed (2 CPUs, load 0.3–0.9, 25 Nov 2026), for whoever reads
// the figures next:
//   - delay 0: the engine relays ~200–225k pkt/s, ~1.4× the baseline: on
//     the veth path the sender's own write runs the whole receive path,
//     while the relay thread takes it to the other CPU.
//   - delay 100 ms, window 10,000: ~84–92k pkt/s, 0.84–0.92 of the
//     100k ceiling, with ~9,500 in flight; the relay thread is then
//     saturated (Late counts most packets).
//   - TUN txqueuelen: at the kernel's 500, 10k–150k packets per run were
//     dropped on the TUN queue; at DefaultTxQueueLen (10,000), none.
//   - Under that saturation the engine used to release packets early
//     (thousands per run) and overflow its own queue limit: the wake-up
//     bias was learnt from every packet's lateness, backlog included, and
//     grew to 5–12 ms. It is now learnt from wake-ups by the timer alone
//     and capped at 1 ms (Engine.track): early 0, limitdrops 0.

const (
	benchPayload = 64               // bytes of UDP payload: seq, send time, padding
	sockBuf      = 64 << 20         // SO_RCVBUF/SO_SNDBUF, bytes
	measureFor   = time.Second      // a throughput phase's measured window
	probeEvery   = time.Millisecond // latency probes' spacing
	probes       = 1000             // latency probes per phase
	recvTimeout  = 50 * time.Millisecond
	benchPort    = 9500
	kernelTxQLen = 500 // the kernel's default txqueuelen for TUN
)

// benchRunID names a benchmark's namespaces and devices: unique per
// process and benchmark, so parallel runs do not collide.
func benchRunID(k int) string {
	return fmt.Sprintf("tb%06x", (os.Getpid()&0xffff)<<8|k&0xff)
}

func loadavg() (float64, string) {
	b, _ := os.ReadFile("/proc/loadavg")
	s := strings.TrimSpace(string(b))
	f := strings.Fields(s)
	if len(f) == 0 {
		return -1, "unknown"
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v, s
}

// benchSocket opens a blocking UDP socket in agent's namespace, bound to
// its address, with large buffers and a receive timeout; connected to
// peer when peer is valid.
func (l *lab) benchSocket(agent string, peer netip.AddrPort) int {
	l.t.Helper()
	var fd int
	err := nsenter.Do(l.ns[agent], func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		for _, o := range []int{unix.SO_RCVBUFFORCE, unix.SO_SNDBUFFORCE} {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, sockBuf); err != nil {
				return fmt.Errorf("setsockopt %d: %w", o, err)
			}
		}
		tv := unix.NsecToTimeval(int64(recvTimeout))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		a := l.addrs[agent].As4()
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: a, Port: benchPort}); err != nil {
			return err
		}
		if peer.IsValid() {
			return unix.Connect(fd, &unix.SockaddrInet4{Addr: peer.Addr().As4(), Port: int(peer.Port())})
		}
		return nil
	})
	if err != nil {
		l.t.Fatalf("bench socket in %s: %v", agent, err)
	}
	return fd
}

// udpErrors is the sum of the UDP InErrors and SndbufErrors counters of
// agent's namespace (/proc/net/snmp; InErrors includes RcvbufErrors): what
// the sockets, not the paths, dropped.
func (l *lab) udpErrors(agent string) int64 {
	var n int64
	nsenter.Do(l.ns[agent], func() error {
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		var names []string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] != "Udp:" {
				continue
			}
			if names == nil {
				names = f
				continue
			}
			for i, v := range f {
				if i < len(names) && (names[i] == "InErrors" || names[i] == "SndbufErrors") {
					x, _ := strconv.ParseInt(v, 10, 64)
					n += x
				}
			}
		}
		return nil
	})
	return n
}

func (l *lab) sockDrops() int64 { return l.udpErrors("A") + l.udpErrors("B") }

// flow is one phase's sender and receiver, A to B.
type flow struct {
	base          time.Time
	sfd, rfd      int
	sent, recv    atomic.Int64
	lost          atomic.Int64 // gaps seen by the receiver, and stalls
	waiting       atomic.Bool  // the sender waits for the window
	wake          chan struct{}
	stopSend      atomic.Bool
	stopRecv      atomic.Bool
	wg            sync.WaitGroup
	lat           []time.Duration // one-way times, when recording
	record        bool
	delay         time.Duration // the configured delay
	early         atomic.Int64  // arrivals sooner than delay after sending
	window, lowat int64
}

func (l *lab) newFlow(window int, delay time.Duration) *flow {
	f := &flow{base: time.Now(), wake: make(chan struct{}, 1), window: int64(window), delay: delay}
	f.lowat = f.window - max(f.window/8, 1)
	f.rfd = l.benchSocket("B", netip.AddrPort{})
	f.sfd = l.benchSocket("A", netip.AddrPortFrom(l.addrs["B"], benchPort))
	return f
}

func (f *flow) inflight() int64 { return f.sent.Load() - f.recv.Load() - f.lost.Load() }

// receive runs on its own OS thread, in blocking reads.
func (f *flow) receive() {
	defer f.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 2048)
	var expect uint64
	for !f.stopRecv.Load() {
		n, err := unix.Read(f.rfd, buf)
		if err != nil || n < 16 {
			continue // the receive timeout: look at stopRecv
		}
		now := time.Since(f.base)
		seq := binary.LittleEndian.Uint64(buf)
		if seq > expect {
			f.lost.Add(int64(seq - expect))
		}
		if seq >= expect {
			expect = seq + 1
		}
		lat := now - time.Duration(binary.LittleEndian.Uint64(buf[8:]))
		if lat < f.delay {
			f.early.Add(1)
		}
		if f.record {
			f.lat = append(f.lat, lat)
		}
		f.recv.Add(1)
		if f.waiting.Load() && f.inflight() <= f.lowat && f.waiting.CompareAndSwap(true, false) {
			select {
			case f.wake <- struct{}{}:
			default:
			}
		}
	}
}

// put sends the next packet. It counts the packet sent before writing:
// the write may deliver it to the receiver before it returns.
func (f *flow) put(buf []byte) {
	seq := f.sent.Add(1) - 1
	binary.LittleEndian.PutUint64(buf, uint64(seq))
	binary.LittleEndian.PutUint64(buf[8:], uint64(time.Since(f.base)))
	if _, err := unix.Write(f.sfd, buf); err != nil {
		f.lost.Add(1) // refused by the sender's kernel: counts as lost
	}
}

// sendWindow sends as fast as the window allows until stopSend. A window
// that makes no progress for stall counts its packets as lost and goes on.
func (f *flow) sendWindow(stall time.Duration) {
	defer f.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, benchPayload)
	t := time.NewTimer(stall)
	for !f.stopSend.Load() {
		for f.inflight() >= f.window && !f.stopSend.Load() {
			f.waiting.Store(true)
			if f.inflight() < f.window {
				f.waiting.Store(false)
				break
			}
			t.Reset(stall)
			select {
			case <-f.wake:
			case <-t.C:
				f.lost.Add(f.inflight())
			}
		}
		f.put(buf)
	}
}

func (f *flow) close() {
	f.stopSend.Store(true)
	f.stopRecv.Store(true)
	select {
	case f.wake <- struct{}{}:
	default:
	}
	f.wg.Wait()
	unix.Close(f.sfd)
	unix.Close(f.rfd)
}

// drain waits until nothing is in flight, or for at most d.
func (f *flow) drain(d time.Duration) {
	for end := time.Now().Add(d); f.inflight() > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
}

type tput struct {
	pkts, lost     int64
	sockDrops      int64 // UDP socket errors in A and B, whole phase
	early          int64 // arrivals sooner than the delay, whole phase
	dur            time.Duration
	inflightSum    float64
	inflightN      int
	tunDrops, unin uint64
	limitDrops     uint64
}

// throughput runs one closed-loop phase: warm up, measure, drain.
func (l *lab) throughput(window int, delay time.Duration, acc *tput) {
	s0 := l.sockDrops()
	f := l.newFlow(window, delay)
	f.wg.Add(2)
	go f.receive()
	go f.sendWindow(delay + 500*time.Millisecond)
	time.Sleep(200*time.Millisecond + 2*delay) // the window fills
	r0, l0, t0 := f.recv.Load(), f.lost.Load(), time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	for end := t0.Add(measureFor); time.Now().Before(end); {
		<-tick.C
		acc.inflightSum += float64(f.inflight())
		acc.inflightN++
	}
	tick.Stop()
	acc.pkts += f.recv.Load() - r0
	acc.lost += f.lost.Load() - l0
	acc.dur += time.Since(t0)
	f.stopSend.Store(true)
	f.drain(delay + time.Second)
	f.close()
	acc.early += f.early.Load()
	acc.sockDrops += l.sockDrops() - s0
}

// latency runs one phase of paced probes and returns their one-way times,
// how many were lost and how many arrived sooner than delay.
func (l *lab) latency(delay time.Duration) ([]time.Duration, int64, int64) {
	f := l.newFlow(probes, delay)
	f.record = true
	f.lat = make([]time.Duration, 0, probes)
	f.wg.Add(1)
	go f.receive()
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, benchPayload)
		ts := unix.NsecToTimespec(int64(probeEvery))
		for i := 0; i < probes; i++ {
			f.put(buf)
			unix.Nanosleep(&ts, nil)
		}
	}()
	f.drain(delay + time.Second)
	lost := f.sent.Load() - f.recv.Load()
	f.close()
	return f.lat, lost, f.early.Load()
}

// withEngine runs phase with the engine between A and B, both ways at
// profile, and returns the engine's stats after it closed.
func (l *lab) withEngine(txqlen int, profile string, phase func()) Stats {
	l.attach(Config{RunID: l.id, Seed: 1, TxQueueLen: txqlen})
	l.profile("A", "B", profile)
	l.profile("B", "A", profile)
	if err := l.eng.Start(context.Background()); err != nil {
		l.t.Fatal(err)
	}
	phase()
	return l.detach()
}

func benchLab(b *testing.B, k int) *lab {
	id := benchRunID(k)
	removeLab(id, "A", "B") // what a killed run of this process ID left
	return newBareLab(b, id, "A", "B")
}

func BenchmarkEngineThroughput(b *testing.B) {
	load, la := loadavg()
	b.Logf("load average at start: %s", la)
	for k, c := range []struct {
		name   string
		delay  time.Duration
		window int
		txqlen int // 0: the engine's default (DefaultTxQueueLen)
	}{
		{"delay=0/window=10000", 0, 10000, 0},
		{"delay=0/window=10000/txqueuelen=500", 0, 10000, kernelTxQLen},
		{"delay=100ms/window=10000", 100 * time.Millisecond, 10000, 0},
		{"delay=100ms/window=10000/txqueuelen=500", 100 * time.Millisecond, 10000, kernelTxQLen},
	} {
		b.Run(c.name, func(b *testing.B) {
			l := benchLab(b, k)
			profile := fmt.Sprintf("delay %v limit %d", c.delay, c.window)
			var base, eng tput
			var st Stats
			for b.Loop() {
				l.throughput(c.window, 0, &base)
				s := l.withEngine(c.txqlen, profile, func() { l.throughput(c.window, c.delay, &eng) })
				eng.tunDrops += s.TunDrops
				eng.unin += s.Unintended()
				for _, d := range s.Directions {
					eng.limitDrops += d.LimitDrops
				}
				st = s
			}
			bps := float64(base.pkts) / base.dur.Seconds()
			eps := float64(eng.pkts) / eng.dur.Seconds()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(eps, "pkt/s")
			b.ReportMetric(bps, "base-pkt/s")
			b.ReportMetric(eps/bps, "ratio")
			b.ReportMetric(eng.inflightSum/float64(max(eng.inflightN, 1)), "inflight")
			b.ReportMetric(base.inflightSum/float64(max(base.inflightN, 1)), "base-inflight")
			if c.delay > 0 {
				b.ReportMetric(eps/(float64(c.window)/c.delay.Seconds()), "ceiling-frac")
			}
			b.ReportMetric(float64(eng.lost), "lost")
			b.ReportMetric(float64(eng.early), "early")
			b.ReportMetric(float64(eng.limitDrops), "limitdrops")
			b.ReportMetric(float64(eng.tunDrops), "tundrops")
			b.ReportMetric(float64(eng.sockDrops), "sockdrops")
			b.ReportMetric(float64(eng.unin), "unintended")
			b.ReportMetric(load, "load1")
			_, la := loadavg()
			b.Logf("baseline lost %d, socket drops %d; engine (last phase): realtime %v bias %v, %+v; load average now: %s",
				base.lost, base.sockDrops, st.Realtime, time.Duration(st.BiasNS), st.Directions[l.addrs["A"].String()+">"+l.addrs["B"].String()], la)
		})
	}
}

func BenchmarkEngineLatency(b *testing.B) {
	load, la := loadavg()
	b.Logf("load average at start: %s", la)
	for k, delay := range []time.Duration{0, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("delay=%v", delay), func(b *testing.B) {
			l := benchLab(b, 0x10+k)
			var base, eng []time.Duration
			var baseLost, engLost, early int64
			var st Stats
			for b.Loop() {
				lat, lost, _ := l.latency(0)
				base, baseLost = append(base, lat...), baseLost+lost
				var e int64
				st = l.withEngine(0, fmt.Sprintf("delay %v", delay), func() {
					lat, lost, e = l.latency(delay)
				})
				eng, engLost, early = append(eng, lat...), engLost+lost, early+e
			}
			if len(base) == 0 || len(eng) == 0 {
				b.Fatalf("no probe arrived: baseline %d, engine %d", len(base), len(eng))
			}
			slices.Sort(base)
			slices.Sort(eng)
			pct := func(s []time.Duration, p int) float64 {
				return float64(s[min(len(s)*p/100, len(s)-1)]) / 1e3
			}
			d := float64(delay) / 1e3
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(pct(eng, 50)-d, "p50-added-us")
			b.ReportMetric(pct(eng, 99)-d, "p99-added-us")
			b.ReportMetric(pct(base, 50), "base-p50-us")
			b.ReportMetric(pct(base, 99), "base-p99-us")
			b.ReportMetric((pct(eng, 50)-d)/pct(base, 50), "p50-ratio")
			b.ReportMetric((pct(eng, 99)-d)/pct(base, 99), "p99-ratio")
			b.ReportMetric(float64(engLost), "lost")
			b.ReportMetric(float64(early), "early")
			b.ReportMetric(load, "load1")
			_, la := loadavg()
			b.Logf("%d probes each; baseline lost %d; engine: realtime %v bias %v overshoot p50 %v p99 %v, unintended %d; load average now: %s",
				len(eng), baseLost, st.Realtime, time.Duration(st.BiasNS), time.Duration(st.OvershootP50NS), time.Duration(st.OvershootP99NS), st.Unintended(), la)
		})
	}
}
