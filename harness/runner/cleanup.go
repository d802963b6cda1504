package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/backend"
	"tokenbed/internal/results"
)

// cleanup stops the agents (SIGTERM, then SIGKILL), the capture, and
// removes everything the run created on the host.
func (r *run) cleanup() error {
	var errs []error
	r.mu.Lock()
	var procs []backend.Process
	for _, inst := range r.order {
		// In start order: a simulated run logs their exits in this order.
		if ar := r.agents[inst]; ar.proc != nil && ar.running {
			procs = append(procs, ar.proc)
		}
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for _, p := range procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-deadline:
			p.Signal(syscall.SIGKILL)
		}
	}
	r.stopResource()
	if r.hlog != nil {
		n, what := r.obs.Progress()
		r.event(eventlog.Event{Kind: eventlog.RunFinished, Detail: fmt.Sprintf("%d %s, %d faults injected", n, what, r.faults)})
	}
	if r.eng != nil {
		st := r.eng.Stats()
		var delivered, late uint64
		for _, d := range st.Directions {
			delivered += d.Delivered
			late += d.Late
		}
		// How faithful the emulator was: analysis reports it beside the
		// latency figures.
		summary := fmt.Sprintf("realtime=%v bias=%v delivered=%d late_over_1ms=%d", st.Realtime, time.Duration(st.BiasNS), delivered, late)
		r.info.Engine = &results.EngineFidelity{Realtime: st.Realtime, BiasNS: st.BiasNS, Delivered: delivered, LateOver1ms: late}
		r.o.Log.Info("userspace engine", "summary", summary)
		r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "engine_summary", Detail: summary})
		if u := st.Unintended(); u > 0 {
			r.o.Log.Warn("userspace engine: drops the profiles did not ask for", "count", u, "stats", fmt.Sprintf("%+v", st))
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "engine_unintended_drops", Detail: fmt.Sprintf("%d: %+v", u, st)})
		}
		if err := r.eng.Close(); err != nil {
			errs = append(errs, fmt.Errorf("userspace engine: %w", err))
		}
		r.eng = nil
	}
	if r.cap != nil {
		st, err := r.cap.Stop()
		if err != nil {
			errs = append(errs, fmt.Errorf("capture: %w", err))
		}
		if d := st.Drops(); d > 0 {
			r.o.Log.Warn("capture dropped packets", "drops", d)
		}
		r.cap = nil
	}
	if r.be != nil {
		if err := r.removeOwnDevices(); err != nil {
			errs = append(errs, err)
		}
		if err := r.be.Teardown(context.Background()); err != nil {
			errs = append(errs, err)
		}
		r.be = nil
	}
	if r.keyDir != "" {
		os.RemoveAll(r.keyDir)
		r.keyDir = ""
	}
	if r.hfile != nil {
		r.hfile.Close()
		r.hfile = nil
	}
	for _, ar := range r.agents {
		if ar.tail != nil {
			ar.tail.close()
		}
	}
	return errors.Join(errs...)
}
