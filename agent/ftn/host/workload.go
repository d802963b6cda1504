package host

import (
	"fmt"
	"math/rand/v2"
	"time"

	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/msg"
)

// Workload is a client's random activity (the workload role of a run):
// operations start at Rate per second (exponential gaps); each acquires
// one of Names names ("t0".."tN-1"), shared with probability Shared,
// holds it for Hold (writing its data first when exclusive and reading
// it when shared, if Data; with SharedWrites, a shared holder writes
// instead of reading one time in two), then releases it.
type Workload struct {
	Names  int
	Shared float64
	Rate   float64 // acquisitions per second
	Hold   time.Duration
	Data   bool
	// SharedWrites: shared holders write too (001 "Token data":
	// updating by shared holders is FCFS).
	SharedWrites bool
}

type wstate uint8

const (
	idle wstate = iota
	acquiring
	holding
	releasing
)

type workload struct {
	w       Workload
	rnd     *rand.Rand
	st      wstate
	name    string
	mode    msg.Mode
	next    time.Time // idle: when to acquire; holding: when to release
	touched bool      // data written or read in this hold
}

func newWorkload(w Workload, rnd *rand.Rand) *workload { return &workload{w: w, rnd: rnd} }

func (l *workload) gap() time.Duration {
	if l.w.Rate <= 0 {
		return time.Duration(1<<62 - 1)
	}
	return time.Duration(l.rnd.ExpFloat64() / l.w.Rate * float64(time.Second))
}

// step returns the operations to start now.
func (l *workload) step(now time.Time, c *client.Client) []client.Op {
	switch l.st {
	case idle:
		if l.next.IsZero() {
			l.next = now.Add(l.gap())
		}
		if now.Before(l.next) {
			return nil
		}
		l.name = fmt.Sprintf("t%d", l.rnd.IntN(max(1, l.w.Names)))
		l.mode = msg.Exclusive
		if l.rnd.Float64() < l.w.Shared {
			l.mode = msg.Shared
		}
		l.st = acquiring
		return []client.Op{{Kind: msg.Acquire, Name: l.name, Mode: l.mode}}
	case holding:
		if l.w.Data && !l.touched && c.Pending() == 0 {
			l.touched = true
			if l.mode == msg.Exclusive || (l.w.SharedWrites && l.rnd.IntN(2) == 0) {
				return []client.Op{{Kind: msg.SetData, Name: l.name, Data: []byte(fmt.Sprintf("%d", now.UnixNano()))}}
			}
			return []client.Op{{Kind: msg.GetData, Name: l.name}}
		}
		if now.Before(l.next) || c.Pending() > 0 {
			return nil
		}
		l.st = releasing
		return []client.Op{{Kind: msg.Release, Name: l.name}}
	}
	return nil
}

// done follows the workload's operations to completion.
func (l *workload) done(now time.Time, r client.Result) {
	switch {
	case l.st == acquiring && r.Op.Kind == msg.Acquire:
		if r.OK() {
			l.st, l.next, l.touched = holding, now.Add(l.w.Hold), false
		} else {
			l.st, l.next = idle, now.Add(l.gap())
		}
	case l.st == releasing && r.Op.Kind == msg.Release:
		l.st, l.next = idle, now.Add(l.gap())
	}
}
