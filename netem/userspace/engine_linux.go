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
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

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
//	ip tuntap add dev RUNID-t mode tun && ip link set RUNID-t up
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
	// lateness of releases, for compensating the engine's own bias (ns,
	// exponentially weighted).
	bias atomic.Int64

	// Drops the profile did not ask for.
	writeErrors atomic.Uint64
	noRoute     atomic.Uint64
	readErrors  atomic.Uint64
}

// Config configures an Engine.
type Config struct {
	RunID string // names the TUN devices: RUNID-t
	Seed  uint64 // every direction's random source derives from it
	Log   *slog.Logger
}

type port struct {
	addr   netip.Addr
	ns     netns.NsHandle
	name   string
	tun    *os.File
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
	// errors. Non-zero means the engine impaired more than asked.
	WriteErrors, NoRoute, ReadErrors uint64
	BiasNS                           int64
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

// inNS runs f on a locked OS thread switched into ns.
func inNS(ns netns.NsHandle, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		panic(fmt.Sprintf("userspace netem: cannot return to the original namespace: %v", err))
	}
	return ferr
}

// Attach puts the agent at addr, in namespace ns, behind the engine for
// traffic toward peers (the other agents' addresses).
func (e *Engine) Attach(ns netns.NsHandle, addr netip.Addr, peers []netip.Addr) (string, error) {
	name := e.TunName()
	if len(name) >= unix.IFNAMSIZ {
		return "", fmt.Errorf("userspace netem: device name %q is too long", name)
	}
	var fd int
	err := inNS(ns, func() error {
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
	p := &port{addr: addr, ns: ns, name: name, tun: os.NewFile(uintptr(fd), name)}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		p.tun.Close()
		return "", err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err == nil {
		err = h.LinkSetUp(l)
	}
	for _, peer := range peers {
		if err != nil {
			break
		}
		dst := &net.IPNet{IP: peer.AsSlice(), Mask: net.CIDRMask(peer.BitLen(), peer.BitLen())}
		via := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Priority: 10}
		stop := &netlink.Route{Type: unix.RTN_PROHIBIT, Dst: dst, Priority: 100}
		if err = h.RouteAdd(via); err == nil {
			p.routes = append(p.routes, via)
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
	if p.tun != nil {
		// Closing the last descriptor removes the device and its routes.
		errs = append(errs, p.tun.Close())
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
	seed := e.cfg.Seed
	for _, a := range []netip.Addr{from, to} {
		for _, b := range a.AsSlice() {
			seed = (seed ^ uint64(b)) * 1099511628211
		}
	}
	q, err := NewQdisc(p, seed)
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

// Start starts the relay: a reader per TUN device and one sender.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("userspace netem: started twice")
	}
	e.started = true
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
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
	for _, p := range ports {
		e.wg.Add(1)
		go e.read(p)
	}
	e.wg.Add(1)
	go e.send()
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
	data []byte
	dir  *direction
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

func (e *Engine) read(p *port) {
	defer e.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := p.tun.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			select {
			case <-e.done:
				return
			default:
			}
			e.readErrors.Add(1)
			continue
		}
		now := time.Now()
		pkt := buf[:n]
		if n < 20 || pkt[0]>>4 != 4 {
			continue // not IPv4: the agents use IPv4 only
		}
		src, _ := netip.AddrFromSlice(pkt[12:16])
		dst, _ := netip.AddrFromSlice(pkt[16:20])
		e.mu.Lock()
		d := e.dirs[[2]netip.Addr{src, dst}]
		to := e.ports[dst]
		if d == nil || to == nil {
			e.mu.Unlock()
			e.noRoute.Add(1)
			continue
		}
		d.stats.In++
		o := d.q.Enqueue(now, n)
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
			heap.Push(&e.q, release{at: o.At, seq: e.q.seq, to: to, data: data, dir: d})
			e.arm(o.At)
			if o.Dup != nil {
				d.stats.Duplicated++
				e.q.seq++
				heap.Push(&e.q, release{at: *o.Dup, seq: e.q.seq, to: to, data: append([]byte(nil), data...), dir: d})
				e.arm(*o.Dup)
			}
		}
		e.mu.Unlock()
	}
}

// send releases packets at their time. It sleeps on a timerfd (a kernel
// hrtimer, armed at the earliest release; readers re-arm it when a packet
// is due sooner), which wakes within tens of microseconds, where Go's own
// timers overshoot by hundreds under load. The remaining overshoot is
// measured and the timer armed that much early, so packets leave on time
// on average.
func (e *Engine) send() {
	defer e.wg.Done()
	var buf [8]byte
	for {
		e.mu.Lock()
		now := time.Now()
		bias := time.Duration(e.bias.Load())
		var due []release
		var next time.Time
		for e.q.Len() > 0 {
			if e.q.h[0].at.Add(-bias).After(now) {
				next = e.q.h[0].at
				break
			}
			due = append(due, heap.Pop(&e.q).(release))
		}
		e.armed = time.Time{}
		if !next.IsZero() {
			e.arm(next)
		}
		e.mu.Unlock()
		for _, r := range due {
			if _, err := r.to.tun.Write(r.data); err != nil {
				e.writeErrors.Add(1)
				continue
			}
			sent := time.Now()
			over := sent.Sub(r.at.Add(-bias)) // past the wake-up target
			e.bias.Store(e.bias.Load() + (int64(over)-e.bias.Load())/64)
			e.mu.Lock()
			r.dir.stats.Delivered++
			if sent.Sub(r.at) > time.Millisecond {
				r.dir.stats.Late++
			}
			e.mu.Unlock()
		}
		if _, err := unix.Read(e.tfd, buf[:]); err != nil && err != unix.EINTR && err != unix.EAGAIN {
			return
		}
		select {
		case <-e.done:
			return
		default:
		}
	}
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

// Stats returns the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stats{Directions: map[string]DirStats{}, WriteErrors: e.writeErrors.Load(), NoRoute: e.noRoute.Load(),
		ReadErrors: e.readErrors.Load(), BiasNS: e.bias.Load()}
	for k, d := range e.dirs {
		s.Directions[k[0].String()+">"+k[1].String()] = d.stats
	}
	return s
}

// Unintended is the number of packets dropped without the profile asking.
func (s Stats) Unintended() uint64 { return s.WriteErrors + s.NoRoute + s.ReadErrors }

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
		e.arm(time.Now()) // wake the sender so that it sees done
	}
	e.mu.Unlock()
	var errs []error
	for _, p := range ports {
		errs = append(errs, e.detach(p))
	}
	e.wg.Wait()
	if e.tfd >= 0 {
		unix.Close(e.tfd)
	}
	return errors.Join(errs...)
}
