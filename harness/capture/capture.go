package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/internal/capturefile"
)

// ErrStopped is returned by Annotate and Add after Stop.
var ErrStopped = capturefile.ErrStopped

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
	// of them take 16 s. The interfaces keep their order.
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

	annIDB := capturefile.AnnotationInterface(cfg.AnnotationName)
	first := annIDB
	if len(ifaces) > 0 {
		first = ifaces[0].idb(cfg)
	}
	c.ng, err = pcapgo.NewNgWriterInterface(c.sink, first, capturefile.SectionOptions(cfg.Comment))
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
