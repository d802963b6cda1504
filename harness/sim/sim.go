package sim

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/capture"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
)

// Process is a protocol process as the simulator runs it. Its methods are
// called from the simulator's one goroutine, with virtual time as now;
// each returns what the process does in response.
type Process interface {
	// Start starts the process; its first events are its start record.
	Start(now time.Time) Output
	// Receive hands it a datagram that arrived from from.
	Receive(now time.Time, from netip.AddrPort, data []byte) Output
	// Tick runs its timers that are due.
	Tick(now time.Time) Output
	// Deadline is when Tick is due next, if ever.
	Deadline() (time.Time, bool)
	// Stop is a clean exit (SIGTERM): its last events.
	Stop(now time.Time, reason string) Output
}

// Output is what a process does after a call: log Events, then send
// Packets, in order.
type Output struct {
	Events  []eventlog.Event
	Packets []Packet
	// Ahead is work that depends on nothing but its own inputs and that
	// checks what the process declared (an agent: the Ed25519
	// verification of each datagram it sends, agent/wire.VerifyAhead);
	// the simulator runs it on its workers (Config.Workers) while the
	// loop goes on, in the loop when they are behind, or at once without
	// workers. An error voids the run: RunUntil or Close returns it.
	Ahead []func() error
	// After, if set, is the process's own work after the step (an agent:
	// presigning, node.Prepare); the simulator calls it once Ahead is
	// handed to the workers, so the two overlap.
	After func()
}

// Packet is a datagram to send from the process's address.
type Packet struct {
	To   netip.AddrPort
	Data []byte
}

// Default processing times: the agent's decode+verify and encode+sign of
// a datagram (agent/wire BenchmarkDecodeVerify and BenchmarkEncodeSign on
// this 2-core machine: 36 µs and 16 µs).
const (
	DefaultVerifyTime = 36 * time.Microsecond
	DefaultSignTime   = 16 * time.Microsecond
)

// Epoch is the default start of virtual time on the processes' wall
// clock: the first day of seed 002's 20-day run (a fixed instant, so that
// a seed replays byte for byte).
var Epoch = time.Date(2009, 5, 26, 0, 0, 0, 0, time.UTC)

// Config of a simulation.
type Config struct {
	Seed uint64
	// Epoch is virtual time 0 on the wall clock (default: Epoch);
	// MonoBase the monotonic clock there (default: 1 s).
	Epoch    time.Time
	MonoBase int64
	// VerifyTime and SignTime are a process's work per datagram handled
	// and sent (defaults: DefaultVerifyTime, DefaultSignTime; negative:
	// none).
	VerifyTime, SignTime time.Duration
	// Capture, if set, records every datagram on its sender's and its
	// receiver's interface (the host's index given by AddHost).
	Capture *capture.Writer
	// OnExit, if set, hears of every process that ends: sig is
	// os.Kill for a crash, nil for a clean stop.
	OnExit func(host string, sig os.Signal)
	// OnEvent, if set, sees every event logged, after it is written.
	OnEvent func(host string, e eventlog.Event)
	// Workers run the processes' Ahead work beside the event loop
	// (default: one per CPU but the loop's; negative: none, Ahead runs
	// at once in the loop). Whatever it is, every byte of the run is the
	// same: Ahead work only checks what the process declared, and a
	// failed check voids the run.
	Workers int
}

type host struct {
	name  string
	index int
	addr  netip.Addr
	proc  Process
	life  int // incremented at every start: events of an older life are void
	log   *eventlog.Writer
	file  *os.File
	buf   *bufio.Writer // the log's buffer: flushed at start and at exit
	busy  time.Time     // the process works until then
	timer time.Time     // earliest timer event queued (zero: none)
}

// dirKey is a direction by its hosts' indexes.
type dirKey [2]int32

// direction is a link direction's profile, shared by every direction
// with the same one, and its model, built at the first datagram: a
// thousand agents have a million directions, and most never carry one.
type direction struct {
	p *netem.Profile
	q *userspace.Qdisc
}

// World is one simulation. It is not safe for concurrent use.
type World struct {
	cfg    Config
	now    time.Time
	seq    uint64
	q      queue
	hosts  []*host // in AddHost order
	byName map[string]*host
	byAddr map[netip.Addr]*host
	dirs   map[dirKey]direction
	// profiles interns the directions' profiles, by their text and then
	// in full; each was checked once by building a model of it.
	profiles map[string][]*netem.Profile
	stats    Stats
	work     chan func() error // the Ahead workers' queue; nil until first used
	workers  sync.WaitGroup
	aheadErr atomic.Pointer[error] // the first Ahead error
}

// Stats counts what the simulation did.
type Stats struct {
	Events      uint64 // events of the loop handled
	Sent        uint64 // datagrams sent by processes
	Delivered   uint64 // handed to a running process
	Lost        uint64 // dropped by a direction's model (loss, limit)
	Corrupted   uint64 // dropped at the receiver: checksum
	Unreachable uint64 // arrived where no process ran, or to no host
}

// New returns an empty world at virtual time 0.
func New(cfg Config) *World {
	if cfg.Epoch.IsZero() {
		cfg.Epoch = Epoch
	}
	if cfg.MonoBase == 0 {
		cfg.MonoBase = int64(time.Second)
	}
	if cfg.VerifyTime == 0 {
		cfg.VerifyTime = DefaultVerifyTime
	}
	if cfg.SignTime == 0 {
		cfg.SignTime = DefaultSignTime
	}
	cfg.VerifyTime, cfg.SignTime = max(cfg.VerifyTime, 0), max(cfg.SignTime, 0)
	if cfg.Workers == 0 {
		cfg.Workers = max(runtime.NumCPU()-1, 1)
	}
	return &World{cfg: cfg, now: cfg.Epoch, byName: map[string]*host{}, byAddr: map[netip.Addr]*host{}, dirs: map[dirKey]direction{},
		profiles: map[string][]*netem.Profile{}}
}

// Record makes the world record every datagram into c (see
// Config.Capture).
func (w *World) Record(c *capture.Writer) { w.cfg.Capture = c }

// Now is the virtual time on the processes' wall clock.
func (w *World) Now() time.Time { return w.now }

// Epoch is virtual time 0 on the wall clock.
func (w *World) Epoch() time.Time { return w.cfg.Epoch }

// Mono is the virtual time on the processes' monotonic clock.
func (w *World) Mono() int64 { return w.cfg.MonoBase + w.now.Sub(w.cfg.Epoch).Nanoseconds() }

// Stats returns the counters so far.
func (w *World) Stats() Stats { return w.stats }

// AddHost adds a host named name at addr; it returns its capture index.
func (w *World) AddHost(name string, addr netip.Addr) (int, error) {
	if w.byName[name] != nil || w.byAddr[addr] != nil {
		return 0, fmt.Errorf("sim: host %s (%v) added twice", name, addr)
	}
	h := &host{name: name, index: len(w.hosts), addr: addr}
	w.hosts = append(w.hosts, h)
	w.byName[name], w.byAddr[addr] = h, h
	return h.index, nil
}

// SetProfile sets, or changes, the profile of the direction from→to
// between two hosts. The direction's model starts afresh, with the
// direction's seed, when its next datagram comes: the same model as if
// it were built now, as nothing reaches it meanwhile.
func (w *World) SetProfile(from, to netip.Addr, p netem.Profile) error {
	a, b := w.byAddr[from], w.byAddr[to]
	if a == nil || b == nil {
		return fmt.Errorf("sim %v>%v: %w", from, to, ErrNoHost)
	}
	text := p.String()
	var ip *netem.Profile
	for _, c := range w.profiles[text] {
		if reflect.DeepEqual(*c, p) {
			ip = c
		}
	}
	if ip == nil {
		if _, err := userspace.NewQdisc(p, 0); err != nil {
			return fmt.Errorf("sim %v>%v: %w", from, to, err)
		}
		ip = &p
		w.profiles[text] = append(w.profiles[text], ip)
	}
	w.dirs[dirKey{int32(a.index), int32(b.index)}] = direction{p: ip}
	return nil
}

// Running reports whether a process runs on host name.
func (w *World) Running(name string) bool {
	h := w.byName[name]
	return h != nil && h.proc != nil
}

// Start starts p on host name, logging to logPath (appended).
func (w *World) Start(name string, p Process, logPath string) error {
	h := w.byName[name]
	switch {
	case h == nil:
		return fmt.Errorf("sim: no host %s", name)
	case h.proc != nil:
		return fmt.Errorf("sim: %s is running", name)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Buffered: a write per event was a tenth of the loop's time. Its
	// start record is on disk at once (the runner waits for it there);
	// a crash flushes what the process logged before it, as a real
	// agent's writes would have reached the file.
	h.buf = bufio.NewWriterSize(f, 64<<10)
	h.file, h.log = f, eventlog.NewWriterAt(h.buf, name, w.cfg.MonoBase, w.cfg.Epoch)
	h.proc, h.busy, h.timer = p, w.now, time.Time{}
	h.life++
	if err := w.carry(h, w.now, 0, p.Start(w.now)); err != nil {
		return err
	}
	return h.buf.Flush()
}

// Crash kills host name's process: its state is lost and it logs nothing
// more (SIGKILL).
func (w *World) Crash(name string) error {
	h := w.byName[name]
	if h == nil || h.proc == nil {
		return fmt.Errorf("sim: %s is not running", name)
	}
	w.end(h, os.Kill)
	return nil
}

// Stop stops host name's process cleanly (SIGTERM): it logs its exit.
func (w *World) Stop(name, reason string) error {
	h := w.byName[name]
	if h == nil || h.proc == nil {
		return fmt.Errorf("sim: %s is not running", name)
	}
	at := later(w.now, h.busy)
	if err := w.carry(h, at, 0, h.proc.Stop(at, reason)); err != nil {
		return err
	}
	w.end(h, nil)
	return nil
}

// Signaled is a Process that handles a signal other than SIGKILL and
// SIGTERM, as the real process would (an agent: SIGUSR1, lose the next
// token passed).
type Signaled interface {
	Signal(now time.Time, sig os.Signal) Output
}

// Signal delivers sig to host name's process now; a process that is not
// Signaled refuses it.
func (w *World) Signal(name string, sig os.Signal) error {
	h := w.byName[name]
	if h == nil || h.proc == nil {
		return fmt.Errorf("sim: %s is not running", name)
	}
	p, ok := h.proc.(Signaled)
	if !ok {
		return fmt.Errorf("sim: %s does not handle %v", name, sig)
	}
	return w.carry(h, w.now, 0, p.Signal(w.now, sig))
}

func (w *World) end(h *host, sig os.Signal) {
	h.proc = nil
	h.life++
	h.closeLog()
	if w.cfg.OnExit != nil {
		w.cfg.OnExit(h.name, sig)
	}
}

// Close stops nothing: it closes the logs of processes still running,
// and ends the Ahead workers once their work is done; it returns the
// first error of that work (the run is void).
func (w *World) Close() error {
	if w.work != nil {
		close(w.work)
		w.work = nil
		w.workers.Wait()
	}
	for _, h := range w.hosts {
		h.closeLog()
	}
	return w.err()
}

// err is the first error of the Ahead work so far.
func (w *World) err() error {
	if p := w.aheadErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (w *World) fail(err error) {
	if err != nil {
		w.aheadErr.CompareAndSwap(nil, &err)
	}
}

func (h *host) closeLog() {
	if h.file == nil {
		return
	}
	h.buf.Flush()
	h.file.Close()
	h.file, h.log, h.buf = nil, nil, nil
}

// RunUntil handles every event up to t, in order, and leaves the clock
// at t.
func (w *World) RunUntil(t time.Time) error {
	for len(w.q) > 0 && !w.q[0].at.After(t) {
		ev := heap.Pop(&w.q).(*event)
		w.now = ev.at
		w.stats.Events++
		if err := w.handle(ev); err != nil {
			return err
		}
	}
	if t.After(w.now) {
		w.now = t
	}
	return w.err()
}

type kind uint8

const (
	evTimer   kind = iota
	evDepart       // a datagram leaves its sender (after the sender's work)
	evArrive       // a datagram reaches the receiver's interface
	evReceive      // the receiver, no longer busy, takes it
)

type event struct {
	at   time.Time
	seq  uint64
	kind kind
	h    *host
	life int
	data []byte // an IPv4 packet
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if c := q[i].at.Compare(q[j].at); c != 0 {
		return c < 0
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

func (w *World) push(at time.Time, k kind, h *host, life int, data []byte) {
	w.seq++
	heap.Push(&w.q, &event{at: at, seq: w.seq, kind: k, h: h, life: life, data: data})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (w *World) handle(ev *event) error {
	h := ev.h
	switch ev.kind {
	case evTimer:
		if h.proc == nil || ev.life != h.life {
			return nil
		}
		if ev.at.Equal(h.timer) {
			h.timer = time.Time{}
		}
		d, ok := h.proc.Deadline()
		if !ok {
			return nil
		}
		if d.After(w.now) {
			w.arm(h)
			return nil
		}
		if h.busy.After(w.now) {
			// Busy: the timer fires when the work is done.
			w.push(h.busy, evTimer, h, h.life, nil)
			return nil
		}
		return w.carry(h, w.now, 0, h.proc.Tick(w.now))
	case evDepart:
		if w.cfg.Capture != nil {
			if err := w.cfg.Capture.Packet(h.index, w.now, ev.data); err != nil {
				return err
			}
		}
		w.transmit(h, ev.data)
	case evArrive:
		if w.cfg.Capture != nil {
			if err := w.cfg.Capture.Packet(h.index, w.now, ev.data); err != nil {
				return err
			}
		}
		if !checksumsOK(ev.data) {
			w.stats.Corrupted++
			return nil
		}
		return w.receive(h, ev.data)
	case evReceive:
		if ev.life != h.life {
			// Queued for a process that has crashed since: its socket
			// buffer died with it.
			w.stats.Unreachable++
			return nil
		}
		return w.receive(h, ev.data)
	}
	return nil
}

// transmit puts a packet from h through its direction's model.
func (w *World) transmit(from *host, pkt []byte) {
	dst := dstAddr(pkt)
	to := w.byAddr[dst]
	var k dirKey
	var d direction
	if to != nil {
		k = dirKey{int32(from.index), int32(to.index)}
		d = w.dirs[k]
	}
	if d.p == nil {
		// No route: the real backends' routes exist only toward peers.
		w.stats.Unreachable++
		return
	}
	if d.q == nil {
		// Checked when it was set.
		d.q, _ = userspace.NewQdisc(*d.p, userspace.DirectionSeed(w.cfg.Seed, from.addr, dst))
		w.dirs[k] = d
	}
	o := d.q.Enqueue(w.now, len(pkt))
	if o.Dup != nil {
		dup := append([]byte(nil), pkt...)
		flip(dup, o.DupCorrupt)
		w.push(*o.Dup, evArrive, to, 0, dup)
	}
	if o.Drop {
		w.stats.Lost++
		return
	}
	flip(pkt, o.Corrupt)
	w.push(o.At, evArrive, to, 0, pkt)
}

func flip(b []byte, bit int) {
	if bit >= 0 {
		b[bit/8] ^= 1 << (bit % 8)
	}
}

// receive hands a packet to h's process, or queues it until the process
// is no longer busy (a socket buffer).
func (w *World) receive(h *host, pkt []byte) error {
	if h.proc == nil {
		w.stats.Unreachable++
		return nil
	}
	if h.busy.After(w.now) {
		w.push(h.busy, evReceive, h, h.life, pkt)
		return nil
	}
	from, payload, err := udpPayload(pkt)
	if err != nil {
		return err
	}
	w.stats.Delivered++
	return w.carry(h, w.now, w.cfg.VerifyTime, h.proc.Receive(w.now, from, payload))
}

// carry logs a step's events at t, sends its packets when the work (work,
// plus signing each) is done, and arms the process's timer.
func (w *World) carry(h *host, t time.Time, work time.Duration, out Output) error {
	w.ahead(out.Ahead)
	if out.After != nil {
		out.After()
	}
	if len(out.Events) > 0 {
		if err := h.log.WriteAt(t, out.Events...); err != nil {
			return err
		}
		if w.cfg.OnEvent != nil {
			for _, e := range out.Events {
				w.cfg.OnEvent(h.name, e)
			}
		}
	}
	work += time.Duration(len(out.Packets)) * w.cfg.SignTime
	done := t.Add(work)
	h.busy = later(h.busy, done)
	for _, p := range out.Packets {
		w.stats.Sent++
		w.push(done, evDepart, h, 0, ipv4UDP(netip.AddrPortFrom(h.addr, p.To.Port()), p.To, p.Data))
	}
	if h.proc != nil {
		w.arm(h)
	}
	return nil
}

// ahead hands work to the workers, started at the first, or does it at
// once without workers. When their queue is full the loop does it
// itself: the loop's own work per datagram (a signature) is less than a
// verification, so on two cores the loop and one worker share it.
func (w *World) ahead(fs []func() error) {
	if len(fs) == 0 {
		return
	}
	if w.cfg.Workers < 0 {
		for _, f := range fs {
			w.fail(f())
		}
		return
	}
	if w.work == nil {
		w.work = make(chan func() error, 256)
		w.workers.Add(w.cfg.Workers)
		for range w.cfg.Workers {
			go func(c <-chan func() error) {
				defer w.workers.Done()
				for f := range c {
					w.fail(f())
				}
			}(w.work)
		}
	}
	for _, f := range fs {
		select {
		case w.work <- f:
		default:
			w.fail(f())
		}
	}
}

// arm queues a timer event at the process's deadline unless an earlier
// one is queued; a timer event that finds nothing due re-arms.
func (w *World) arm(h *host) {
	d, ok := h.proc.Deadline()
	if !ok {
		return
	}
	if !h.timer.IsZero() && !d.Before(h.timer) {
		return
	}
	h.timer = d
	w.push(later(d, w.now), evTimer, h, h.life, nil)
}

// ErrNoHost is returned for a name the world does not know.
var ErrNoHost = errors.New("sim: no such host")
