package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/harness/backend"
	"tokenbed/harness/protocol"
	"tokenbed/internal/results"
)

// startAgent starts (or restarts) an agent; join names the member to join
// through (002 §3.2), which its configuration lists (writeJoinConfig).
func (r *run) startAgent(ctx context.Context, inst, join string) error {
	return r.procs.start(ctx, r, inst, join)
}

// startProcess starts inst as a process of the agent binary, tails its
// log for the observer, and logs its exit.
func (r *run) startProcess(ctx context.Context, inst, join string) error {
	ar := r.agents[inst]
	args := r.proto.Args(ar.cfgPath, protocol.Start{Join: join, RTPriority: r.o.RTPriority})
	stderr, err := os.OpenFile(filepath.Join(r.dir, results.LogsDir, inst+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	p, err := r.be.Start(ctx, inst, backend.Cmd{Path: r.o.AgentBin, Args: args, Env: []string{"GOTRACEBACK=crash", "GOMAXPROCS=1"}, Stdout: stderr, Stderr: stderr})
	if err != nil {
		return err
	}
	r.mu.Lock()
	ar.proc, ar.running = p, true
	if ar.tail == nil {
		ar.tail = newTailer(filepath.Join(r.dir, results.LogsDir, inst+".jsonl"))
	}
	r.mu.Unlock()
	go func() {
		code, sig, err := p.Wait()
		r.mu.Lock()
		if ar.proc == p {
			ar.running = false
		}
		r.mu.Unlock()
		detail := fmt.Sprintf("exit status %d", code)
		if sig != 0 {
			detail = fmt.Sprintf("killed by signal %d (%v)", int(sig), sig)
		}
		if err != nil {
			detail = err.Error()
		}
		r.event(eventlog.Event{Kind: eventlog.AgentExit, Peer: inst, Detail: detail})
	}()
	return nil
}

// waitStarted waits until every started agent has logged agent_started,
// and fails with the agent's own words if one exits first.
func (r *run) waitStarted(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	// An agent seen started is not read again: each poll reads only the
	// logs still waiting (re-reading all of them every 10 ms would be
	// 36,000 file reads a second while 360 agents start).
	seen := map[string]bool{}
	for {
		waiting := ""
		for _, inst := range r.order {
			ar := r.agents[inst]
			if ar.proc == nil || seen[inst] {
				continue
			}
			started := false
			f, err := os.Open(filepath.Join(r.dir, results.LogsDir, inst+".jsonl"))
			if err == nil {
				b := make([]byte, 4096)
				n, _ := f.Read(b)
				f.Close()
				started = strings.Contains(string(b[:n]), `"kind":"agent_started"`)
			}
			r.mu.Lock()
			running := ar.running
			r.mu.Unlock()
			if !started && !running {
				msg, _ := os.ReadFile(filepath.Join(r.dir, results.LogsDir, inst+".stderr"))
				return fmt.Errorf("agent %s exited at start: %s", inst, strings.TrimSpace(string(msg)))
			}
			if !started {
				waiting = inst
			} else {
				seen[inst] = true
			}
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent %s did not start within 30 s", waiting)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
