// Package cpustat reads the host's CPU time from /proc/stat: how much the
// CPUs were busy, idle, and stolen by a hypervisor. A run on real
// processes records it because its latency figures are only as good as the
// host's scheduling: a virtual machine whose hypervisor runs another guest
// on its CPUs ("steal", proc(5)) delays every datagram in flight, and the
// userspace netem relay with it (docs/studies/endurance.md).
package cpustat

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture the harness runs on (proc(5), sysconf(_SC_CLK_TCK)).
const userHZ = 100

// Times is the aggregate "cpu" line of /proc/stat, summed over all CPUs,
// since boot.
type Times struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal time.Duration
}

// Busy is the time the CPUs ran something (guest time is inside User).
func (t Times) Busy() time.Duration {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ
}

// Sub is t − u, field by field: the CPU time between two readings.
func (t Times) Sub(u Times) Times {
	return Times{User: t.User - u.User, Nice: t.Nice - u.Nice, System: t.System - u.System,
		Idle: t.Idle - u.Idle, IOWait: t.IOWait - u.IOWait, IRQ: t.IRQ - u.IRQ,
		SoftIRQ: t.SoftIRQ - u.SoftIRQ, Steal: t.Steal - u.Steal}
}

// StealFraction is the share of the time the CPUs wanted to run that the
// hypervisor gave to someone else: steal / (busy + steal); 0 when they
// wanted none.
func (t Times) StealFraction() float64 {
	want := t.Busy() + t.Steal
	if want <= 0 {
		return 0
	}
	return float64(t.Steal) / float64(want)
}

// Path is where ReadHost takes the times from.
const Path = "/proc/stat"

// ReadHost reads Path.
func ReadHost() (Times, error) {
	f, err := os.Open(Path)
	if err != nil {
		return Times{}, err
	}
	defer f.Close()
	return Parse(f, Path)
}

// Parse reads the aggregate "cpu" line of a /proc/stat text; name is the
// file's name in errors, which give its line and the field.
func Parse(r io.Reader, name string) (Times, error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]:
		// steal came with Linux 2.6.11; a line without it is not one
		// this package can judge.
		names := [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
		if len(f)-1 < len(names) {
			return Times{}, fmt.Errorf("%s:%d: the cpu line has %d fields, want at least %d (… %s)", name, line, len(f)-1, len(names), names[len(names)-1])
		}
		var v [len(names)]time.Duration
		for i, n := range names {
			ticks, err := strconv.ParseUint(f[i+1], 10, 63)
			if err != nil {
				return Times{}, fmt.Errorf("%s:%d: cpu %s %q: not a tick count", name, line, n, f[i+1])
			}
			v[i] = time.Duration(ticks) * (time.Second / userHZ)
		}
		return Times{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
	}
	if err := sc.Err(); err != nil {
		return Times{}, fmt.Errorf("%s: %w", name, err)
	}
	return Times{}, fmt.Errorf("%s: no aggregate cpu line", name)
}

// Report is what a Watch saw: the CPU time between its first and last
// readings, and its worst interval.
type Report struct {
	Wall  time.Duration // between the first and the last reading
	Busy  time.Duration // CPU time run, all CPUs
	Steal time.Duration // CPU time the hypervisor took, all CPUs
	// WorstSteal is the most CPU time stolen between two consecutive
	// readings, and WorstAt when that interval ended: a burst that a
	// run-long fraction averages away.
	WorstSteal time.Duration
	WorstAt    time.Time
	// Err is the first reading that failed (the watch then stops
	// reading): the figures cover up to the reading before.
	Err error
}

// StealFraction is Steal / (Busy + Steal).
func (r Report) StealFraction() float64 { return Times{User: r.Busy, Steal: r.Steal}.StealFraction() }

// Watch reads the CPU times at a fixed interval until Stop.
type Watch struct {
	read  func() (Times, error)
	stop  chan struct{}
	done  chan struct{}
	first Times
	t0    time.Time
	last  Times
	rep   Report
	n     int
}

// Start reads the times now and then every interval, with read (ReadHost
// on the host).
func Start(interval time.Duration, read func() (Times, error)) *Watch {
	w := &Watch{read: read, stop: make(chan struct{}), done: make(chan struct{})}
	w.sample(time.Now())
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case now := <-t.C:
				w.sample(now)
			}
		}
	}()
	return w
}

// Stop takes a last reading and returns the report.
func (w *Watch) Stop() Report {
	close(w.stop)
	<-w.done
	w.sample(time.Now())
	return w.rep
}

// sample takes one reading at now; after a failed one it reads no more.
func (w *Watch) sample(now time.Time) {
	if w.rep.Err != nil {
		return
	}
	t, err := w.read()
	if err != nil {
		w.rep.Err = err
		return
	}
	if w.n == 0 {
		w.first, w.t0 = t, now
	} else if s := t.Steal - w.last.Steal; s > w.rep.WorstSteal {
		w.rep.WorstSteal, w.rep.WorstAt = s, now
	}
	w.n++
	w.last = t
	d := t.Sub(w.first)
	w.rep.Wall, w.rep.Busy, w.rep.Steal = now.Sub(w.t0), d.Busy(), d.Steal
}
