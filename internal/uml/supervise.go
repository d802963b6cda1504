package uml

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// supervision is what the host learns of a running instance, from the
// job's files and its signals, until linux.uml exits.
type supervision struct {
	r        *instance
	res      *Result
	launched time.Time
	panics   panicScanner // fed by the console's follower
	panicked bool         // a panic was seen and the instance signalled

	// startedAt and statusAt: when the job started and when it ended
	// (its status file appeared), zero until then.
	startedAt, statusAt time.Time
	// stopErr says why the host stopped the instance, if it did.
	stopErr error
	// killC fires killGrace after a SIGTERM (the process group is then
	// killed); stallC fires shutdownGrace after the job's status.
	killC, stallC <-chan time.Time
}

// onEvent notes that the job's file name appeared at at.
func (sv *supervision) onEvent(name string, at time.Time) {
	j, res := sv.r.job, sv.res
	switch name {
	case fileStarted:
		if sv.startedAt.IsZero() {
			sv.startedAt = at
			res.BootDuration = at.Sub(sv.launched)
			j.Logger.Info("uml instance booted", "pid", res.PID, "cpu", cpuAttr(j.CPU), "kernel", sv.r.k.version, "boot", res.BootDuration.Round(time.Millisecond), "dir", sv.r.dir)
		}
	case fileStatus:
		if sv.statusAt.IsZero() {
			sv.statusAt = at
			sv.stallC = time.After(shutdownGrace)
		}
	}
}

// stop asks the instance to stop for err (the first reason is kept).
func (sv *supervision) stop(err error) {
	if sv.stopErr != nil {
		return
	}
	sv.stopErr = err
	// SIGTERM: UML shuts down at once. Through the pidfd, so a
	// reused PID can never be hit.
	_ = sv.r.cmd.Process.Signal(syscall.SIGTERM)
	sv.killC = time.After(killGrace)
}

// watch follows the instance until linux.uml exits: the job's start and
// end (inotify events, or polling without inotify), its outputs, a guest
// panic, cancellation, the job's timeout, an instance that does not
// finish its shutdown. It returns the exit, after the events queued
// before it.
func (sv *supervision) watch(ctx context.Context, events <-chan dirEvent, exited <-chan exitInfo, outs []*follower) exitInfo {
	r, j, res := sv.r, sv.r.job, sv.res
	cmd := r.cmd
	var timeoutC <-chan time.Time
	if j.Timeout > 0 {
		t := time.NewTimer(j.Timeout - time.Since(sv.launched))
		defer t.Stop()
		timeoutC = t.C
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	done := ctx.Done()
	var ex exitInfo
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			sv.onEvent(ev.name, ev.at)
		case now := <-ticker.C:
			for _, fl := range outs {
				fl.pump()
			}
			if sv.panics.found && !sv.panicked {
				sv.panicked = true
				j.Logger.Warn("uml guest kernel panicked, killing the instance", "pid", res.PID, "dir", r.dir)
				_ = cmd.Process.Signal(syscall.SIGTERM)
				sv.killC = time.After(panicGrace)
			}
			if events == nil { // no inotify: time by polling
				for _, name := range []string{fileStarted, fileStatus} {
					if _, err := os.Stat(filepath.Join(r.dir, name)); err == nil {
						sv.onEvent(name, now)
					}
				}
			}
		case <-done:
			done = nil
			sv.stop(fmt.Errorf("uml: job canceled: %w", ctx.Err()))
		case <-timeoutC:
			sv.stop(fmt.Errorf("%w after %v", ErrTimeout, j.Timeout))
		case <-sv.stallC:
			sv.stallC = nil
			// The job's status is recorded; nothing is lost by killing
			// an instance that does not finish its shutdown.
			j.Logger.Warn("uml instance still running after the job ended; killing it", "pid", res.PID, "after", shutdownGrace, "dir", r.dir)
			if sv.killC == nil {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				sv.killC = time.After(killGrace)
			}
		case <-sv.killC:
			sv.killC = nil
			j.Logger.Warn("uml instance still running after SIGTERM, killing its process group", "pid", res.PID)
			r.killGroup()
		case ex = <-exited:
			break loop
		}
	}
	// Late events, queued before the exit was seen.
	for drained := false; !drained && events != nil; {
		select {
		case ev, ok := <-events:
			if !ok {
				drained = true
				break
			}
			sv.onEvent(ev.name, ev.at)
		default:
			drained = true
		}
	}
	return ex
}
