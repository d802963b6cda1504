package userspace

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/internal/nsenter"
	"tokenbed/netem"
)

// Engine is the relay. Attached to an agent's network namespace, it adds a
// TUN device there and, for every peer, two routes: one through the TUN
// device (metric 10) and a "prohibit" route (metric 100). The agent keeps
// its address and socket; only the route to its peers changes. The engine
// reads each packet from the sender's TUN device, asks that direction's
// Qdisc, and writes the packet into the receiver's TUN device at the time
// decided. The sender's device therefore sees every packet before
// impairment and the receiver's after: capture on the TUN devices.
//
// Fail closed: a TUN device lives as long as the engine holds it open. If
// the engine dies, the devices and their routes vanish with it and the
// prohibit routes take over: traffic between impaired agents stops (the
// sender gets EACCES) rather than flowing unimpaired.
//
// Equivalent to, in the namespace of A (10.77.0.1) with peer B (10.77.0.2):
//
//	ip tuntap add dev RUNID-t mode tun
//	ip link set RUNID-t txqueuelen 10000 up
//	sysctl -w net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.RUNID-t.rp_filter=0
//	ip route add 10.77.0.2/32 dev RUNID-t metric 10
//	ip route add prohibit 10.77.0.2/32 metric 100
type Engine struct {
	cfg     Config
	mu      sync.Mutex
	ports   map[netip.Addr]*port
	dirs    map[[2]netip.Addr]*direction
	q       sendQueue
	tfd     int       // timerfd the sender sleeps on
	armed   time.Time // when tfd fires (zero: not armed)
	started bool
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
	// the relay's wake-up overshoot floor, which the timer is armed that
	// much early to compensate (ns; see track).
	bias  atomic.Int64
	overs [256]int64 // the last wake-up overshoots (ns), a ring
	nOver int
	// The overshoot's median and 99th percentile over the same window,
	// reported in Stats: how late the relay is beyond its floor.
	overP50, overP99 atomic.Int64
	// realtime is set when the relay thread got SCHED_FIFO.
	realtime atomic.Bool

	// Drops the profile did not ask for.
	writeErrors atomic.Uint64
	noRoute     atomic.Uint64
	readErrors  atomic.Uint64
	// TUN drops of the devices already closed (Close reads them first:
	// the counters go with the device).
	tunDropsClosed atomic.Uint64
}

// Config configures an Engine.
type Config struct {
	RunID string // names the TUN devices: RUNID-t
	Seed  uint64 // every direction's random source derives from it
	Log   *slog.Logger
	// TxQueueLen is the TUN devices' transmit queue length in packets:
	// what an agent's kernel may queue on the device before the relay
	// reads it; beyond it the kernel drops (Stats.TunDrops). 0 means
	// DefaultTxQueueLen; the kernel's own default for TUN is 500.
	TxQueueLen int
}

// DefaultTxQueueLen is the TUN devices' transmit queue length unless
// Config says otherwise: as deep as the largest window of packets in
// flight the project runs (10,000), so that a burst the relay has not yet
// read waits instead of being dropped. The kernel's default, 500, dropped
// bursts that a 10 ms netem queue (limit 1000) would have held.
const DefaultTxQueueLen = 10000

type port struct {
	addr   netip.Addr
	ns     netns.NsHandle
	name   string
	index  int // the TUN device's ifindex in ns
	fd     int // the TUN device, non-blocking; -1 once closed
	routes []*netlink.Route
}

type direction struct {
	q     *Qdisc
	stats DirStats
}

// DirStats counts one direction's packets.
type DirStats struct {
	In, Delivered, Lost, LimitDrops, Duplicated, Reordered, Corrupted uint64
	// Late counts packets released more than 1 ms after their time.
	Late uint64
}

// Stats is the engine's health.
type Stats struct {
	Directions map[string]DirStats // "10.77.0.1>10.77.0.2"
	// Unintended drops: write errors, packets to no attached agent, read
	// errors, and packets the kernel dropped at a TUN device (TunDrops).
	// Non-zero means the engine impaired more than asked.
	WriteErrors, NoRoute, ReadErrors uint64
	// TunDrops is the sum of the TUN devices' tx_dropped counters: packets
	// an agent sent while the device's transmit queue (Config.TxQueueLen)
	// was full because the relay had not read them yet. Their rx_dropped
	// counts the relay's refused writes, which the relay counts itself
	// (WriteErrors, or nothing when the model corrupted the packet).
	TunDrops uint64
	BiasNS   int64
	Realtime bool // the relay thread runs SCHED_FIFO
	// The relay's wake-up overshoot over its last 256 wake-ups by the timer alone:
	// the bias is its 10th percentile, so a packet leaves about
	// OvershootP50−BiasNS late at the median.
	OvershootP50NS, OvershootP99NS int64
}

// New returns an engine; Attach agents, set profiles, then Start.
func New(cfg Config) *Engine {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Engine{cfg: cfg, ports: map[netip.Addr]*port{}, dirs: map[[2]netip.Addr]*direction{}, tfd: -1, done: make(chan struct{})}
}

// TunName is the TUN device's name in every attached namespace.
func (e *Engine) TunName() string { return e.cfg.RunID + "-t" }

type ifreq struct {
	name  [unix.IFNAMSIZ]byte
	flags uint16
	_     [22]byte
}

// Attach puts the agent at addr, in namespace ns, behind the engine for
// traffic toward peers (the other agents' addresses): two routes per peer.
func (e *Engine) Attach(ns netns.NsHandle, addr netip.Addr, peers []netip.Addr) (string, error) {
	dsts := make([]netip.Prefix, len(peers))
	for i, peer := range peers {
		dsts[i] = netip.PrefixFrom(peer, peer.BitLen())
	}
	return e.attach(ns, addr, dsts, 10)
}

// AttachSubnet puts the agent at addr, in namespace ns, behind the engine
// for traffic toward every address of subnet (its peers' subnet): two
// routes whatever the number of peers. The route through the TUN device
// replaces the subnet's connected route (same destination and metric 0),
// and the prohibit route stays behind it. Per-peer routes cost N(N-1)
// netlink calls for N agents: 258,000 take minutes at 360 agents. A
// destination in subnet that is not attached reaches the
// engine and is counted in Stats.NoRoute; an address the agent must reach
// around the engine needs a longer route of its own.
//
// Equivalent to, in the namespace of A (10.77.0.1/23):
//
//	ip route replace 10.77.0.0/23 dev RUNID-t metric 0
//	ip route add prohibit 10.77.0.0/23 metric 100
func (e *Engine) AttachSubnet(ns netns.NsHandle, addr netip.Addr, subnet netip.Prefix) (string, error) {
	return e.attach(ns, addr, []netip.Prefix{subnet.Masked()}, 0)
}

// attach adds the TUN device and, for each destination, a route through
// it at metric via (replacing a route of the same destination and
// metric) and a prohibit route at metric 100.
func (e *Engine) attach(ns netns.NsHandle, addr netip.Addr, dsts []netip.Prefix, via int) (string, error) {
	name := e.TunName()
	if len(name) >= unix.IFNAMSIZ {
		return "", fmt.Errorf("userspace netem: device name %q is too long", name)
	}
	var fd int
	err := nsenter.Do(ns, func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w (load the tun module)", err)
		}
		var req ifreq
		copy(req.name[:], name)
		req.flags = unix.IFF_TUN | unix.IFF_NO_PI
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); errno != 0 {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, errno)
		}
		// The replies come in on the TUN device, not on the interface
		// that routes back to the sender: strict reverse-path filtering
		// would drop them.
		for _, k := range []string{"all", "default", name} {
			os.WriteFile("/proc/sys/net/ipv4/conf/"+k+"/rp_filter", []byte("0"), 0)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("userspace netem: attach %v: %w", addr, err)
	}
	p := &port{addr: addr, ns: ns, name: name, fd: fd}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		unix.Close(fd)
		return "", err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err == nil {
		p.index = l.Attrs().Index
		qlen := e.cfg.TxQueueLen
		if qlen <= 0 {
			qlen = DefaultTxQueueLen
		}
		if err = h.LinkSetTxQLen(l, qlen); err == nil {
			err = h.LinkSetUp(l)
		}
	}
	for _, pfx := range dsts {
		if err != nil {
			break
		}
		dst := &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen())}
		viaRoute := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Priority: via}
		stop := &netlink.Route{Type: unix.RTN_PROHIBIT, Dst: dst, Priority: 100}
		if err = h.RouteReplace(viaRoute); err == nil {
			p.routes = append(p.routes, viaRoute)
			if err = h.RouteAdd(stop); err == nil {
				p.routes = append(p.routes, stop)
			}
		}
	}
	if err != nil {
		e.detach(p)
		return "", fmt.Errorf("userspace netem: attach %v: %w", addr, err)
	}
	e.mu.Lock()
	e.ports[addr] = p
	e.mu.Unlock()
	return name, nil
}

func (e *Engine) detach(p *port) error {
	var errs []error
	if p.fd >= 0 {
		// Closing the last descriptor removes the device and its routes.
		errs = append(errs, unix.Close(p.fd))
		p.fd = -1
	}
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, r := range p.routes {
		if r.Type == unix.RTN_PROHIBIT {
			if err := h.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// SetProfile sets (or changes, at run time) the profile of the direction
// from→to. The direction's random source is seeded from the engine's seed
// and the two addresses, so a run replays.
func (e *Engine) SetProfile(from, to netip.Addr, p netem.Profile) error {
	q, err := NewQdisc(p, DirectionSeed(e.cfg.Seed, from, to))
	if err != nil {
		return fmt.Errorf("userspace netem %v>%v: %w", from, to, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if d := e.dirs[[2]netip.Addr{from, to}]; d != nil {
		d.q = q
		return nil
	}
	e.dirs[[2]netip.Addr{from, to}] = &direction{q: q}
	return nil
}

// Start starts the relay thread.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("userspace netem: started twice")
	}
	e.started = true
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		e.mu.Unlock()
		return fmt.Errorf("userspace netem: timerfd: %w", err)
	}
	e.tfd = tfd
	ports := make([]*port, 0, len(e.ports))
	for _, p := range e.ports {
		ports = append(ports, p)
	}
	e.mu.Unlock()
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("userspace netem: epoll: %w", err)
	}
	// Pad carries the port's index: Fd alone would need a lookup.
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, tfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(tfd)}); err != nil {
		unix.Close(epfd)
		return fmt.Errorf("userspace netem: epoll: %w", err)
	}
	for i, p := range ports {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, p.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p.fd), Pad: int32(i)}); err != nil {
			unix.Close(epfd)
			return fmt.Errorf("userspace netem: epoll %s: %w", p.name, err)
		}
	}
	e.wg.Add(1)
	go e.loop(ports, epfd)
	go func() {
		select {
		case <-ctx.Done():
			e.Close()
		case <-e.done:
		}
	}()
	return nil
}

type release struct {
	at   time.Time
	seq  uint64
	to   *port
	fd   int
	data []byte
	dir  *direction
	// corrupted: the model flipped a bit of it (see release).
	corrupted bool
}

type sendQueue struct {
	h   []release
	seq uint64
}

func (q *sendQueue) Len() int { return len(q.h) }
func (q *sendQueue) Less(i, j int) bool {
	if !q.h[i].at.Equal(q.h[j].at) {
		return q.h[i].at.Before(q.h[j].at)
	}
	return q.h[i].seq < q.h[j].seq
}
func (q *sendQueue) Swap(i, j int) { q.h[i], q.h[j] = q.h[j], q.h[i] }
func (q *sendQueue) Push(x any)    { q.h = append(q.h, x.(release)) }
func (q *sendQueue) Pop() any {
	x := q.h[len(q.h)-1]
	q.h = q.h[:len(q.h)-1]
	return x
}

// loop is the whole relay: one OS thread waits in epoll on every TUN
// device and on the timerfd, takes in what the agents sent and releases
// what is due. Go's scheduler is kept out of the packet path: a goroutine
// woken by the netpoller, or by a timer, waits for a free P, and under the
// load of a many-replica run that wait added milliseconds at the 99th
// percentile of every hop (endurance-smoke: A>B p99 13.5 ms against 10 ms).
// The thread asks for SCHED_FIFO, as sch_netem runs in softirq context
// ahead of every process; without the privilege it runs at normal
// priority, and says so.
func (e *Engine) loop(ports []*port, epfd int) {
	defer e.wg.Done()
	defer unix.Close(epfd)
	defer func() {
		// A bug here must not take the harness down before it removes
		// what it created: the relay stops (fail closed: the prohibit
		// routes stop the traffic) and the run reports the fault.
		if v := recover(); v != nil {
			e.readErrors.Add(1)
			e.cfg.Log.Error("userspace netem: relay failed; traffic between agents stops", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0); err != nil {
		e.cfg.Log.Info("userspace netem: relay thread at normal priority", "reason", err)
	} else {
		e.realtime.Store(true)
	}
	events := make([]unix.EpollEvent, len(ports)+1)
	buf := make([]byte, 65536)
	var tick [8]byte
	var due []release
	for {
		n, err := unix.EpollWait(epfd, events, -1)
		woke := time.Now()
		if err == unix.EINTR {
			continue // a signal (the Go runtime preempts with them)
		}
		if err != nil {
			e.readErrors.Add(1)
			e.cfg.Log.Error("userspace netem: epoll", "err", err)
			return
		}
		// Only a wake-up by the timer alone measures the timer's overshoot:
		// when packets were also waiting, the relay may have been busy
		// (saturated), and its backlog is not a wake-up latency to
		// compensate (counting it armed the timer milliseconds early and
		// released packets before their time).
		timerOnly := false
		for _, ev := range events[:n] {
			if int(ev.Fd) == e.tfd {
				unix.Read(e.tfd, tick[:])
				timerOnly = n == 1
				continue
			}
			e.drain(ports[ev.Pad], buf)
		}
		select {
		case <-e.done:
			return
		default:
		}
		if timerOnly {
			e.mu.Lock()
			target := e.armed
			e.mu.Unlock()
			if !target.IsZero() {
				e.track(woke.Sub(target))
			}
		}
		due = e.release(due[:0])
	}
}

// drain reads every packet waiting on p's TUN device.
func (e *Engine) drain(p *port, buf []byte) {
	for {
		n, err := unix.Read(p.fd, buf)
		if err != nil {
			if err != unix.EAGAIN && err != unix.EINTR {
				e.readErrors.Add(1)
			}
			return
		}
		e.enqueue(time.Now(), buf[:n])
	}
}

// enqueue asks the direction's Qdisc what becomes of pkt, read at now.
func (e *Engine) enqueue(now time.Time, pkt []byte) {
	n := len(pkt)
	if n < 20 || pkt[0]>>4 != 4 {
		return // not IPv4: the agents use IPv4 only
	}
	src, _ := netip.AddrFromSlice(pkt[12:16])
	dst, _ := netip.AddrFromSlice(pkt[16:20])
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.dirs[[2]netip.Addr{src, dst}]
	to := e.ports[dst]
	if d == nil || to == nil {
		e.noRoute.Add(1)
		return
	}
	d.stats.In++
	o := d.q.Enqueue(now, n)
	if o.Dup != nil {
		// sch_netem clones the packet as it arrived, before the original
		// is corrupted, and queues the clone first: it goes even when the
		// original then hits the limit, and it has its own corruption.
		dup := append([]byte(nil), pkt...)
		if o.DupCorrupt >= 0 {
			dup[o.DupCorrupt/8] ^= 1 << (o.DupCorrupt % 8)
			d.stats.Corrupted++
		}
		d.stats.Duplicated++
		e.q.seq++
		heap.Push(&e.q, release{at: *o.Dup, seq: e.q.seq, to: to, data: dup, dir: d, corrupted: o.DupCorrupt >= 0})
		e.arm(*o.Dup)
	}
	switch {
	case o.Drop && o.Reason == "limit":
		d.stats.LimitDrops++
	case o.Drop:
		d.stats.Lost++
	default:
		data := append([]byte(nil), pkt...)
		if o.Corrupt >= 0 {
			data[o.Corrupt/8] ^= 1 << (o.Corrupt % 8)
			d.stats.Corrupted++
		}
		if o.At.Equal(now) && (d.q.p.Delay > 0 || d.q.p.Rate.BytesPerSecond > 0) {
			d.stats.Reordered++
		}
		e.q.seq++
		heap.Push(&e.q, release{at: o.At, seq: e.q.seq, to: to, data: data, dir: d, corrupted: o.Corrupt >= 0})
		e.arm(o.At)
	}
}

// release writes the packets that are due and re-arms the timerfd (a
// kernel hrtimer) for the next. What overshoot remains is measured and
// the timer armed that much early, so packets leave on time on average.
func (e *Engine) release(due []release) []release {
	e.mu.Lock()
	now := time.Now()
	bias := time.Duration(e.bias.Load())
	var next time.Time
	for e.q.Len() > 0 {
		if e.q.h[0].at.Add(-bias).After(now) {
			next = e.q.h[0].at
			break
		}
		r := heap.Pop(&e.q).(release)
		r.fd = r.to.fd // under e.mu: a port's descriptor changes only under it
		due = append(due, r)
	}
	e.armed = time.Time{}
	if !next.IsZero() {
		e.arm(next)
	}
	e.mu.Unlock()
	for _, r := range due {
		if _, err := unix.Write(r.fd, r.data); err != nil {
			// A bit flipped in the IP header (version, length) makes the
			// TUN device refuse the packet, as the receiver's IP stack
			// would drop it behind sch_netem: the corruption asked for,
			// not an unintended drop.
			if !r.corrupted {
				e.writeErrors.Add(1)
			}
			continue
		}
		sent := time.Now()
		e.mu.Lock()
		r.dir.stats.Delivered++
		if sent.Sub(r.at) > time.Millisecond {
			r.dir.stats.Late++
		}
		e.mu.Unlock()
	}
	return due
}

// maxBias caps the compensation: a floor above it is a machine too loaded
// for sub-millisecond fidelity, and netem never releases a packet early,
// so the engine then releases late (counted in Late) rather than early.
const maxBias = time.Millisecond

// track sets the bias to the 10th percentile of the relay's last 256
// wake-up overshoots, recomputed every 32. A mean would let the bursts of
// lateness of a loaded machine pull the bias up, and then every packet of
// a quiet moment would leave early: netem never releases a packet before
// its time, so the bias may only cover the floor. Called by the relay
// thread only.
func (e *Engine) track(over time.Duration) {
	e.overs[e.nOver%len(e.overs)] = int64(over)
	e.nOver++
	if e.nOver%32 != 0 || e.nOver < 64 {
		return
	}
	w := e.overs[:min(e.nOver, len(e.overs))]
	s := slices.Clone(w)
	slices.Sort(s)
	e.bias.Store(min(max(s[len(s)/10], 0), int64(maxBias)))
	e.overP50.Store(s[len(s)/2])
	e.overP99.Store(s[len(s)*99/100])
}

// arm sets the timerfd to fire at t less the bias, unless it is already
// set to fire sooner. Call with e.mu held.
func (e *Engine) arm(t time.Time) {
	t = t.Add(-time.Duration(e.bias.Load()))
	if !e.armed.IsZero() && !t.Before(e.armed) {
		return
	}
	e.armed = t
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	abs := ts.Nano() + int64(time.Until(t))
	if abs <= ts.Nano() {
		abs = ts.Nano() + 1
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(abs)}
	unix.TimerfdSettime(e.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// tunDrops reads the drop counters of ports' TUN devices (netlink, in each
// port's namespace). A device it cannot read counts as an error: a count
// that silently reads zero would hide drops.
func tunDrops(ports []*port) (uint64, error) {
	var n uint64
	var errs []error
	for _, p := range ports {
		h, err := netlink.NewHandleAt(p.ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, err := h.LinkByIndex(p.index)
		h.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			continue
		}
		if st := l.Attrs().Statistics; st != nil {
			n += st.TxDropped
		}
	}
	return n, errors.Join(errs...)
}

// Stats returns the counters. TunDrops is read from the kernel (netlink,
// one request per attached namespace), outside the relay's lock.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	ports := make([]*port, 0, len(e.ports))
	for _, p := range e.ports {
		if p.fd >= 0 {
			ports = append(ports, p)
		}
	}
	e.mu.Unlock()
	drops, err := tunDrops(ports)
	if err != nil {
		e.cfg.Log.Warn("userspace netem: TUN drop counters", "err", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stats{Directions: map[string]DirStats{}, WriteErrors: e.writeErrors.Load(), NoRoute: e.noRoute.Load(),
		ReadErrors: e.readErrors.Load(), TunDrops: e.tunDropsClosed.Load() + drops, BiasNS: e.bias.Load(), Realtime: e.realtime.Load(),
		OvershootP50NS: e.overP50.Load(), OvershootP99NS: e.overP99.Load()}
	for k, d := range e.dirs {
		s.Directions[k[0].String()+">"+k[1].String()] = d.stats
	}
	return s
}

// Unintended is the number of packets dropped without the profile asking.
func (s Stats) Unintended() uint64 {
	return s.WriteErrors + s.NoRoute + s.ReadErrors + s.TunDrops
}

// Close stops the relay and removes every device and route it made.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.done)
	ports := e.ports
	e.ports = map[netip.Addr]*port{}
	if e.tfd >= 0 {
		e.armed = time.Time{}
		e.arm(time.Now()) // wake the relay so that it sees done
	}
	e.mu.Unlock()
	// The relay stops before the devices close: it must not read a
	// descriptor number that the process may already have reused.
	e.wg.Wait()
	var errs []error
	// The devices' drop counters vanish with them: keep the total.
	pl := make([]*port, 0, len(ports))
	for _, p := range ports {
		if p.fd >= 0 {
			pl = append(pl, p)
		}
	}
	drops, err := tunDrops(pl)
	e.tunDropsClosed.Add(drops)
	if err != nil {
		e.cfg.Log.Warn("userspace netem: TUN drop counters at close", "err", err)
	}
	for _, p := range ports {
		errs = append(errs, e.detach(p))
	}
	if e.tfd >= 0 {
		unix.Close(e.tfd)
	}
	return errors.Join(errs...)
}
