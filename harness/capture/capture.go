package capture

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/vishvananda/netns"
	"golang.org/x/net/bpf"

	"tokenbed/agent/eventlog"
)

// Defaults of Config.
const (
	DefaultSnapLen       = 262144 // libpcap's maximum: whole packets
	DefaultFlushInterval = 100 * time.Millisecond
	// Many small blocks rather than a few big ones: the kernel hands a
	// block over when it is full or blockTimeout after its first packet,
	// so at token-passing rates each block holds a handful of packets and
	// the ring rides out a reader stall of about RingBlocks×blockTimeout
	// (640 ms; 8 blocks, 80 ms, dropped packets on a loaded 2-CPU host).
	DefaultRingBlockSize  = 64 << 10
	DefaultRingBlocks     = 64
	DefaultAnnotationName = "harness"
	DefaultMaxPending     = 64 << 20
)

const (
	// arenaSize is the chunk packet data is copied into while it waits in
	// the reorder buffer.
	arenaSize = 1 << 20
	// pollTimeout bounds how long a reader waits before it checks for
	// Stop; blockTimeout bounds how long the kernel holds packets in a
	// partly filled ring block before handing them over.
	pollTimeout  = 50 * time.Millisecond
	blockTimeout = 10 * time.Millisecond
	// errBackoff paces a reader whose socket reports an error, which the
	// kernel does while its link is down (ENETDOWN, until read): the ring
	// is still drained, so packets sent after the link is up again are
	// captured.
	errBackoff = 10 * time.Millisecond
	// drainLimit bounds the time Stop spends draining the rings when
	// packets keep arriving.
	drainLimit = time.Second
)

// LinkTypeUpperPDU is LINKTYPE_WIRESHARK_UPPER_PDU, the link type of the
// annotation interface: an exported-PDU header naming a Wireshark
// dissector, then the data for that dissector.
const LinkTypeUpperPDU layers.LinkType = 252

// Exported-PDU tags (Wireshark epan/exported_pdu.h).
const (
	expPDUTagEnd       = 0
	expPDUTagProtoName = 12
)

// KindCaptureError is the kind of the annotation written when capture on
// one interface ends early.
const KindCaptureError eventlog.Kind = "capture_error"

// ErrStopped is returned by Annotate and Add after Stop.
var ErrStopped = errors.New("capture: stopped")

// Interface is one interface to capture.
type Interface struct {
	// Name is the pcapng interface name, conventionally "AGENT/LINK" (e.g.
	// "A/eth0"). Default: the namespace's base name and Device joined by
	// "/" when NetNSPath is set, else Device.
	Name string
	// Description is written, with where the interface was captured, into
	// the pcapng if_description.
	Description string
	// Device is the link's name inside its namespace, e.g. "eth0".
	Device string
	// NetNSPath is the network namespace, as a path: /run/netns/NAME,
	// /proc/PID/ns/net. Empty: see NetNS.
	NetNSPath string
	// NetNS is an open namespace handle, used when NetNSPath is empty; the
	// caller keeps ownership. 0 and -1 mean unset: capture in the namespace
	// of the thread that calls Start or Add.
	NetNS netns.NsHandle
}

// Config says what to capture.
type Config struct {
	Interfaces []Interface
	// Filter keeps packets in user space (nil: keep all). The kernel still
	// copies every packet into the ring; see BPF.
	Filter Filter
	// BPF is an optional classic BPF program attached to every socket, run
	// by the kernel before a packet reaches the ring (SO_ATTACH_FILTER).
	// A packet can slip into the ring between the socket's creation and the
	// filter's attachment: combine with Filter when that matters.
	BPF []bpf.RawInstruction
	// SnapLen is the most bytes kept per packet; DefaultSnapLen if zero.
	SnapLen int
	// FlushInterval bounds the time a record waits in memory before it is
	// written to the file (held FlushInterval/2 to be put in time order,
	// written every FlushInterval/4); DefaultFlushInterval if zero.
	FlushInterval time.Duration
	// RingBlockSize and RingBlocks size each socket's TPACKET_V3 ring
	// (RingBlockSize × RingBlocks bytes, RingBlockSize a multiple of the
	// page size); DefaultRingBlockSize and DefaultRingBlocks if zero.
	RingBlockSize int
	RingBlocks    int
	// MaxPending bounds the packet bytes held in memory waiting for the
	// file (DefaultMaxPending if zero). When the file cannot keep up, the
	// readers wait, the kernel rings fill, and the kernel drops and counts
	// packets (InterfaceStats.KernelDrops) instead of memory growing.
	MaxPending int
	// Comment is the pcapng section comment, e.g. the experiment and run ID.
	Comment string
	// AnnotationName names the annotation interface; DefaultAnnotationName
	// if empty.
	AnnotationName string
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.SnapLen == 0 {
		cfg.SnapLen = DefaultSnapLen
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.RingBlockSize == 0 {
		cfg.RingBlockSize = DefaultRingBlockSize
	}
	if cfg.RingBlocks == 0 {
		cfg.RingBlocks = DefaultRingBlocks
	}
	if cfg.AnnotationName == "" {
		cfg.AnnotationName = DefaultAnnotationName
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	switch {
	case cfg.SnapLen < 0:
		return cfg, fmt.Errorf("capture: snap length %d: must be positive", cfg.SnapLen)
	case cfg.FlushInterval < 0:
		return cfg, fmt.Errorf("capture: flush interval %v: must be positive", cfg.FlushInterval)
	case cfg.RingBlockSize <= 0 || cfg.RingBlockSize%os.Getpagesize() != 0:
		return cfg, fmt.Errorf("capture: ring block size %d: must be a positive multiple of the page size %d", cfg.RingBlockSize, os.Getpagesize())
	case cfg.RingBlocks <= 0:
		return cfg, fmt.Errorf("capture: ring blocks %d: must be positive", cfg.RingBlocks)
	case cfg.MaxPending < 0:
		return cfg, fmt.Errorf("capture: max pending %d: must be positive", cfg.MaxPending)
	}
	ifcs := make([]Interface, len(cfg.Interfaces))
	seen := map[string]bool{cfg.AnnotationName: true}
	for i, ifc := range cfg.Interfaces {
		ifc, err := ifc.withDefaults()
		if err != nil {
			return cfg, fmt.Errorf("capture: interfaces[%d]: %w", i, err)
		}
		if seen[ifc.Name] {
			return cfg, fmt.Errorf("capture: interfaces[%d]: name %q used twice (or by the annotation interface)", i, ifc.Name)
		}
		seen[ifc.Name] = true
		ifcs[i] = ifc
	}
	cfg.Interfaces = ifcs
	return cfg, nil
}

func (ifc Interface) withDefaults() (Interface, error) {
	if ifc.Device == "" {
		return ifc, errors.New("device: empty")
	}
	if ifc.NetNSPath != "" && ifc.NetNS > 0 {
		return ifc, errors.New("netns: both NetNSPath and NetNS set")
	}
	if ifc.Name == "" {
		ifc.Name = ifc.Device
		if ifc.NetNSPath != "" {
			ifc.Name = filepath.Base(ifc.NetNSPath) + "/" + ifc.Device
		}
	}
	return ifc, nil
}

// InterfaceStats counts the packets of one captured interface.
type InterfaceStats struct {
	Name  string // pcapng interface name
	Index int    // pcapng interface index (the IDB's position)

	Received uint64 // packets read from the kernel ring
	Filtered uint64 // of those, dropped by Config.Filter
	Written  uint64 // packets written to the file

	// From PACKET_STATISTICS: KernelPackets counts every packet the socket
	// accepted, including KernelDrops, the packets lost because the ring
	// was full (the writer did not keep up).
	KernelPackets uint64
	KernelDrops   uint64
	QueueFreezes  uint64

	// PollErrors counts the socket errors reported while waiting, as when
	// the link goes down (ENETDOWN); capture resumes when it is up again.
	PollErrors uint64
	// Err says why capture on this interface ended early, if it did.
	Err error
}

// Stats is a snapshot of a capture's counters.
type Stats struct {
	Interfaces   []InterfaceStats
	Annotations  uint64 // annotation records written
	BytesWritten int64  // bytes written to the file
	Flushes      uint64 // writes to the file
	// OutOfOrder counts records written after a later one: they reached
	// user space more than half a flush interval after their timestamp.
	OutOfOrder uint64
}

// Drops returns the packets the kernel dropped on all interfaces.
func (s Stats) Drops() uint64 {
	var n uint64
	for _, i := range s.Interfaces {
		n += i.KernelDrops
	}
	return n
}

// Capture is a running capture. Its methods are safe for concurrent use.
type Capture struct {
	cfg    Config
	out    io.Writer
	closer io.Closer // the file Create opened

	mu          sync.Mutex // guards the fields below
	ng          *pcapgo.NgWriter
	sink        *sink     // encoded blocks not yet written to out
	pending     []pending // records waiting to be put in time order
	arena       []byte    // holds the data of pending records
	pendingLen  int       // bytes of data in pending
	drained     sync.Cond // signalled when flush shrinks pending
	lastTS      int64     // timestamp of the last record encoded
	outOfOrder  uint64
	ifaces      []*iface
	annIndex    int
	annotations uint64
	closing     bool // no more interfaces or readers
	stopped     bool // no more records
	failed      bool // a write to out failed: no more records

	flushMu      sync.Mutex    // serialises writes to out
	spare        *bytes.Buffer // guarded by flushMu
	bytesWritten atomic.Int64
	flushes      atomic.Uint64

	errMu sync.Mutex
	err   error // the first writer error

	ctx     context.Context // readers' context
	cancel  context.CancelFunc
	readers sync.WaitGroup
	stopNS  atomic.Int64 // CLOCK_REALTIME of Stop

	flusherStop, flusherDone chan struct{}

	stopOnce sync.Once
	stopReq  chan struct{}
	done     chan struct{}
	final    Stats
	finalErr error
}

type iface struct {
	cfg   Interface
	index int
	lt    layers.LinkType
	desc  string
	start time.Time

	received, filtered, written, pollErrors atomic.Uint64

	sockMu sync.Mutex // guards tp and the fields below
	tp     *afpacket.TPacket
	kernel afpacket.SocketStatsV3
	err    error
}

// sink is what the pcapng writer writes into: whole blocks accumulate in
// buf until a flush swaps it for an empty one and writes them to the file
// in one write.
type sink struct{ buf *bytes.Buffer }

func (s *sink) Write(p []byte) (int, error) { return s.buf.Write(p) }

// pending is a record in the reorder buffer.
type pending struct {
	ci      gopacket.CaptureInfo
	data    []byte
	comment string
}

// Create creates the file path (it must not exist) and starts capturing
// into it; Stop closes it.
func Create(ctx context.Context, path string, cfg Config) (*Capture, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	c, err := Start(ctx, f, cfg)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	c.closer = f
	return c, nil
}

// openers is how many interfaces Start opens at once.
const openers = 16

// Start opens a socket on every interface, writes the pcapng header (a
// section, one interface block per captured interface, then the annotation
// interface) and captures until ctx is done or Stop is called. Every packet
// sent after Start returns is captured. w receives whole pcapng blocks.
func Start(ctx context.Context, w io.Writer, cfg Config) (*Capture, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The sockets open in parallel (openers at a time): each open
	// waits in the kernel more than it computes, and one at a time 360
	// of them took 16 s (issue 16). The interfaces keep their order.
	ifaces := make([]*iface, len(cfg.Interfaces))
	errs := make([]error, len(cfg.Interfaces))
	sem := make(chan struct{}, openers)
	var wg sync.WaitGroup
	for i, ic := range cfg.Interfaces {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ifaces[i], errs[i] = open(ic, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, o := range ifaces {
			if o != nil {
				o.tp.Close()
			}
		}
		return nil, err
	}

	c := &Capture{
		cfg:     cfg,
		out:     w,
		sink:    &sink{buf: new(bytes.Buffer)},
		spare:   new(bytes.Buffer),
		stopReq: make(chan struct{}),
		done:    make(chan struct{}),

		flusherStop: make(chan struct{}),
		flusherDone: make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.drained.L = &c.mu

	annIDB := annotationIDB(cfg.AnnotationName)
	first := annIDB
	if len(ifaces) > 0 {
		first = ifaces[0].idb(cfg)
	}
	c.ng, err = pcapgo.NewNgWriterInterface(c.sink, first, sectionOptions(cfg.Comment))
	for i := 1; i < len(ifaces) && err == nil; i++ {
		ifaces[i].index, err = c.ng.AddInterface(ifaces[i].idb(cfg))
	}
	if len(ifaces) > 0 && err == nil {
		c.annIndex, err = c.ng.AddInterface(annIDB)
	}
	if err == nil {
		err = c.ng.Flush()
	}
	if err == nil {
		err = c.flush(false)
	}
	if err != nil {
		for _, o := range ifaces {
			o.tp.Close()
		}
		return nil, fmt.Errorf("capture: writing the pcapng header: %w", err)
	}
	c.ifaces = ifaces
	for _, ifc := range ifaces {
		c.readers.Add(1)
		go c.read(ifc)
	}
	go c.flusher()
	go func() {
		select {
		case <-ctx.Done():
		case <-c.stopReq:
		}
		c.finish()
	}()
	return c, nil
}

// annotationIDB is the interface of the harness's annotation records.
func annotationIDB(name string) pcapgo.NgInterface {
	return pcapgo.NgInterface{
		Name:        name,
		Description: "tokenbed harness actions: one record per event, JSON (exported PDU for the json dissector; the same JSON in the comment)",
		LinkType:    LinkTypeUpperPDU,
		OS:          runtime.GOOS,
	}
}

// sectionOptions is the pcapng section header of every tokenbed capture.
func sectionOptions(comment string) pcapgo.NgWriterOptions {
	return pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware:    runtime.GOARCH,
		OS:          runtime.GOOS,
		Application: "tokenbed harness/capture",
		Comment:     comment,
	}}
}

func (ifc *iface) idb(cfg Config) pcapgo.NgInterface {
	comment := "userspace filter: none"
	if cfg.Filter != nil {
		comment = "userspace filter: " + cfg.Filter.String()
	}
	if len(cfg.BPF) > 0 {
		comment += fmt.Sprintf("; kernel BPF filter: %d instructions", len(cfg.BPF))
	}
	return pcapgo.NgInterface{
		Name:        ifc.cfg.Name,
		Description: ifc.desc,
		Comment:     comment,
		LinkType:    ifc.lt,
		OS:          runtime.GOOS,
		SnapLength:  uint32(cfg.SnapLen),
	}
}

// Add starts capturing one more interface, appended to the file as a new
// pcapng interface. It returns the interface's pcapng index.
func (c *Capture) Add(ic Interface) (int, error) {
	ic, err := ic.withDefaults()
	if err != nil {
		return 0, fmt.Errorf("capture: %w", err)
	}
	c.mu.Lock()
	dup := ic.Name == c.cfg.AnnotationName
	for _, o := range c.ifaces {
		dup = dup || o.cfg.Name == ic.Name
	}
	c.mu.Unlock()
	if dup {
		return 0, fmt.Errorf("capture: interface name %q already used", ic.Name)
	}
	ifc, err := open(ic, c.cfg)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if c.closing || c.failed {
		c.mu.Unlock()
		ifc.tp.Close()
		return 0, ErrStopped
	}
	ifc.index, err = c.ng.AddInterface(ifc.idb(c.cfg))
	if err == nil {
		err = c.ng.Flush()
	}
	if err != nil {
		c.mu.Unlock()
		ifc.tp.Close()
		return 0, c.fail(err)
	}
	c.ifaces = append(c.ifaces, ifc)
	c.readers.Add(1)
	c.mu.Unlock()
	go c.read(ifc)
	return ifc.index, c.flush(false)
}

// read copies packets from one interface's ring into the file. When the
// capture stops, it drains the ring first: every packet the kernel
// timestamped before Stop is written (within drainLimit).
func (c *Capture) read(ifc *iface) {
	defer c.readers.Done()
	defer ifc.close()
	snap := c.cfg.SnapLen
	var drainUntil, lastRead time.Time
	for {
		stopping := c.ctx.Err() != nil
		if stopping {
			if drainUntil.IsZero() {
				drainUntil = time.Now().Add(drainLimit)
				lastRead = time.Now()
			}
			if time.Now().After(drainUntil) {
				return
			}
		}
		data, ci, err := ifc.tp.ZeroCopyReadPacketData()
		switch {
		case err == nil:
			lastRead = time.Now()
		case errors.Is(err, afpacket.ErrTimeout):
			// The ring is empty and the kernel has retired every block
			// (pollTimeout > blockTimeout): drained.
			if stopping {
				return
			}
			continue
		case errors.Is(err, afpacket.ErrPoll):
			// The socket has a pending error (ENETDOWN since its link went
			// down, kept until a recv the ring API never makes), so poll
			// cannot wait: sleep instead. Packets still arrive in the ring
			// once the link is up; a partly filled block is handed over
			// within blockTimeout, so a quiet ring after a few of those is
			// drained.
			ifc.pollErrors.Add(1)
			if stopping && time.Since(lastRead) > 3*blockTimeout {
				return
			}
			time.Sleep(errBackoff)
			continue
		default:
			if !stopping {
				c.interfaceFailed(ifc, err)
			}
			return
		}
		if stopping && ci.Timestamp.UnixNano() > c.stopNS.Load() {
			return // everything before Stop is in
		}
		ifc.received.Add(1)
		if c.cfg.Filter != nil && !c.cfg.Filter.Keep(data, ifc.lt) {
			ifc.filtered.Add(1)
			continue
		}
		// The kernel's ifindex is meaningless in the file: pcapng packets
		// name their interface by IDB position.
		ci.InterfaceIndex = ifc.index
		ci.AncillaryData = nil
		if len(data) > snap {
			data = data[:snap]
		}
		ci.CaptureLength = len(data)
		if ci.Length < len(data) {
			ci.Length = len(data)
		}
		if err := c.writeRecord(ci, data, ""); err != nil {
			return
		}
		ifc.written.Add(1)
	}
}

func (ifc *iface) close() {
	ifc.sockMu.Lock()
	defer ifc.sockMu.Unlock()
	if ifc.tp == nil {
		return
	}
	if _, s3, err := ifc.tp.SocketStats(); err == nil {
		ifc.kernel = s3
	}
	ifc.tp.Close()
	ifc.tp = nil
}

// kernelStats returns PACKET_STATISTICS, read now if the socket is open.
func (ifc *iface) kernelStats() (afpacket.SocketStatsV3, error) {
	ifc.sockMu.Lock()
	defer ifc.sockMu.Unlock()
	if ifc.tp != nil {
		if _, s3, err := ifc.tp.SocketStats(); err == nil {
			ifc.kernel = s3
		}
	}
	return ifc.kernel, ifc.err
}

func (c *Capture) interfaceFailed(ifc *iface, err error) {
	err = fmt.Errorf("capture: interface %s: read: %w", ifc.cfg.Name, err)
	ifc.sockMu.Lock()
	ifc.err = err
	ifc.sockMu.Unlock()
	mono, wall := eventlog.Now()
	_ = c.Annotate(eventlog.Event{Agent: "capture", MonoNS: mono, WallNS: wall, Kind: KindCaptureError,
		Link: ifc.cfg.Name, Detail: err.Error()})
}

// writeRecord queues one record: flush writes it in time order.
func (c *Capture) writeRecord(ci gopacket.CaptureInfo, data []byte, comment string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pendingLen >= c.cfg.MaxPending && !c.stopped && !c.failed {
		c.drained.Wait()
	}
	if c.stopped || c.failed {
		return ErrStopped
	}
	c.pendingLen += len(data)
	// data may live in the kernel ring, which the next read reuses.
	if cap(c.arena)-len(c.arena) < len(data) {
		c.arena = make([]byte, 0, max(arenaSize, len(data)))
	}
	at := len(c.arena)
	c.arena = append(c.arena, data...)
	c.pending = append(c.pending, pending{ci: ci, data: c.arena[at:len(c.arena):len(c.arena)], comment: comment})
	return nil
}

// flush encodes the records older than the reorder window (all of them if
// final) in timestamp order, and writes them to the file in one write.
//
// Packets reach user space up to blockTimeout after their kernel
// timestamp, and from several rings: holding records for half the flush
// interval and sorting them makes the file chronological, as readers
// expect (Wireshark shows frames in file order). A record that arrives
// later than that is written anyway, out of order, and counted.
func (c *Capture) flush(final bool) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	if c.failed {
		c.mu.Unlock()
		return c.firstErr()
	}
	n := len(c.pending)
	if !final {
		horizon := time.Now().Add(-c.cfg.FlushInterval / 2).UnixNano()
		slices.SortStableFunc(c.pending, func(a, b pending) int {
			return cmp.Compare(a.ci.Timestamp.UnixNano(), b.ci.Timestamp.UnixNano())
		})
		n, _ = slices.BinarySearchFunc(c.pending, horizon, func(p pending, h int64) int {
			return cmp.Compare(p.ci.Timestamp.UnixNano(), h+1)
		})
	} else {
		slices.SortStableFunc(c.pending, func(a, b pending) int {
			return cmp.Compare(a.ci.Timestamp.UnixNano(), b.ci.Timestamp.UnixNano())
		})
	}
	var err error
	for _, p := range c.pending[:n] {
		c.pendingLen -= len(p.data)
		ts := p.ci.Timestamp.UnixNano()
		if ts < c.lastTS {
			c.outOfOrder++
		}
		c.lastTS = max(c.lastTS, ts)
		if p.comment != "" {
			err = c.ng.WritePacketWithOptions(p.ci, p.data, pcapgo.NgPacketOptions{Comments: []string{p.comment}})
		} else {
			err = c.ng.WritePacket(p.ci, p.data)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		// Out of the writer's bufio: the sink holds whole blocks only.
		err = c.ng.Flush()
	}
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	if rest == 0 {
		// Nothing refers to the arena any more (the writer copied the
		// data): reuse it.
		c.arena = c.arena[:0]
	}
	buf := c.sink.buf
	c.sink.buf = c.spare
	c.drained.Broadcast()
	c.mu.Unlock()
	if err != nil {
		return c.fail(err)
	}
	if buf.Len() == 0 {
		c.spare = buf
		return nil
	}
	wn, err := c.out.Write(buf.Bytes())
	c.bytesWritten.Add(int64(wn))
	c.flushes.Add(1)
	buf.Reset()
	c.spare = buf
	if err != nil {
		return c.fail(err)
	}
	return nil
}

// flusher flushes periodically until finish has drained the readers (they
// may wait for it, see MaxPending).
func (c *Capture) flusher() {
	defer close(c.flusherDone)
	t := time.NewTicker(max(c.cfg.FlushInterval/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.flusherStop:
			return
		case <-t.C:
		}
		if c.flush(false) != nil {
			return
		}
	}
}

// fail records the first writer error and stops the capture: records can
// no longer be written. Done is closed once the capture has wound down.
func (c *Capture) fail(err error) error {
	err = fmt.Errorf("capture: writing: %w", err)
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	c.errMu.Unlock()
	c.mu.Lock()
	c.failed = true
	c.drained.Broadcast()
	c.mu.Unlock()
	c.cancel()
	// Nothing more can be written: stop, so that Done tells the caller.
	c.stopOnce.Do(func() { close(c.stopReq) })
	return err
}

func (c *Capture) firstErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// Annotate writes ev as one record on the annotation interface, at
// ev.WallNS (now if zero). Like packets, it reaches the file in time order
// within Config.FlushInterval.
func (c *Capture) Annotate(ev eventlog.Event) error {
	js, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("capture: annotation: %w", err)
	}
	ts := time.Now()
	if ev.WallNS != 0 {
		ts = time.Unix(0, ev.WallNS)
	}
	rec := annotationRecord(js)
	c.mu.Lock()
	idx := c.annIndex
	c.mu.Unlock()
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(rec), Length: len(rec), InterfaceIndex: idx}
	if err := c.writeRecord(ci, rec, string(js)); err != nil {
		return err
	}
	c.mu.Lock()
	c.annotations++
	c.mu.Unlock()
	return nil
}

// annotationRecord is the exported-PDU header naming the json dissector,
// then the JSON.
func annotationRecord(js []byte) []byte {
	const proto = "json" // 4 bytes: no padding
	rec := make([]byte, 0, 4+len(proto)+4+len(js))
	rec = append(rec, 0, expPDUTagProtoName, 0, byte(len(proto)))
	rec = append(rec, proto...)
	rec = append(rec, 0, expPDUTagEnd, 0, 0)
	return append(rec, js...)
}

// AnnotationIndex returns the pcapng index of the annotation interface.
func (c *Capture) AnnotationIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.annIndex
}

// Stats returns the counters so far, kernel counters included.
func (c *Capture) Stats() Stats {
	select {
	case <-c.done:
		return c.final
	default:
	}
	return c.stats()
}

func (c *Capture) stats() Stats {
	c.mu.Lock()
	ifaces := append([]*iface(nil), c.ifaces...)
	s := Stats{Annotations: c.annotations, OutOfOrder: c.outOfOrder}
	c.mu.Unlock()
	for _, ifc := range ifaces {
		k, err := ifc.kernelStats()
		s.Interfaces = append(s.Interfaces, InterfaceStats{
			Name:          ifc.cfg.Name,
			Index:         ifc.index,
			Received:      ifc.received.Load(),
			Filtered:      ifc.filtered.Load(),
			Written:       ifc.written.Load(),
			KernelPackets: uint64(k.Packets()),
			KernelDrops:   uint64(k.Drops()),
			QueueFreezes:  uint64(k.QueueFreezes()),
			PollErrors:    ifc.pollErrors.Load(),
			Err:           err,
		})
	}
	s.BytesWritten = c.bytesWritten.Load()
	s.Flushes = c.flushes.Load()
	return s
}

// Done is closed when the capture has stopped and its file is complete.
func (c *Capture) Done() <-chan struct{} { return c.done }

// Stop stops capturing, writes the interface statistics, flushes and (for
// Create) closes the file. It returns the final counters and the first
// error: a writer error, or the interfaces whose capture ended early. Stop
// may be called more than once; it is also what cancelling Start's context
// does (then Wait returns the result).
func (c *Capture) Stop() (Stats, error) {
	c.stopOnce.Do(func() { close(c.stopReq) })
	return c.Wait()
}

// Wait waits until the capture has stopped (Stop, or Start's context done)
// and returns what Stop returns.
func (c *Capture) Wait() (Stats, error) {
	<-c.done
	return c.final, c.finalErr
}

func (c *Capture) finish() {
	defer close(c.done)
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.stopNS.Store(time.Now().UnixNano())
	c.cancel()
	c.readers.Wait()
	close(c.flusherStop)
	<-c.flusherDone

	// Every packet, then the statistics blocks.
	c.flush(true)
	end := time.Now()
	s := c.stats()
	c.mu.Lock()
	var errs []error
	if !c.failed {
		for i, ifc := range c.ifaces {
			is := s.Interfaces[i]
			err := c.ng.WriteInterfaceStats(ifc.index, pcapgo.NgInterfaceStatistics{
				LastUpdate:      end,
				StartTime:       ifc.start,
				EndTime:         end,
				PacketsReceived: is.KernelPackets,
				PacketsDropped:  is.KernelDrops,
			})
			if err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	c.stopped = true
	c.mu.Unlock()
	if len(errs) > 0 {
		c.fail(errors.Join(errs...))
	}
	c.flush(true)
	if c.closer != nil {
		if f, ok := c.closer.(*os.File); ok && c.firstErr() == nil {
			if err := f.Sync(); err != nil {
				c.fail(err)
			}
		}
		if err := c.closer.Close(); err != nil {
			c.fail(err)
		}
	}
	s.BytesWritten = c.bytesWritten.Load()
	s.Flushes = c.flushes.Load()
	c.final = s

	if err := c.firstErr(); err != nil {
		errs = []error{err}
	} else {
		errs = nil
	}
	for _, is := range s.Interfaces {
		if is.Err != nil {
			errs = append(errs, is.Err)
		}
	}
	c.finalErr = errors.Join(errs...)
}
