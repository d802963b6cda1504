package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"tokenbed/internal/uml"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
)

// Spec is one profile to validate: the kernel side applies Kernel, the
// userspace side User (the same text, except to prove the check can fail).
type Spec struct {
	Name   string
	Kernel string
	User   string
	Probe  Probe
	// Replay, if set, are the send times (ns from the start) the
	// userspace side sends at: the kernel trace's SentNS (see RunProbes).
	Replay []int64 `json:",omitempty"`
}

// WithReplay returns specs whose Replay are the send times of the kernel
// traces (specs beyond the traces keep theirs).
func WithReplay(specs []Spec, kernel []*Trace) []Spec {
	out := append([]Spec(nil), specs...)
	for i := range out {
		if i < len(kernel) && len(kernel[i].SentNS) == out[i].Probe.Count {
			out[i].Replay = kernel[i].SentNS
		}
	}
	return out
}

// Config is shared by both sides.
type Config struct {
	RunID string        // tbXXXXXX: names namespaces, veths and the TUN device
	Seed  uint64        // probe padding (per spec) and the engine's random source
	Drain time.Duration // wait after the last probe; 0 means 1 s
	Log   *slog.Logger
}

func (c Config) drain() time.Duration {
	if c.Drain <= 0 {
		return time.Second
	}
	return c.Drain
}

func (c Config) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Log
}

// ProbeSeed is the padding seed of spec i.
func ProbeSeed(seed uint64, i int) uint64 { return seed + uint64(i)*0x9e3779b97f4a7c15 }

// RunKernel probes every spec through sch_netem on the sender's veth. It
// needs a kernel with netem (a UML guest on this project's host).
func RunKernel(cfg Config, specs []Spec) ([]*Trace, error) {
	p, err := newPair(cfg.RunID)
	if err != nil {
		return nil, fmt.Errorf("validate: kernel side: %w", err)
	}
	defer p.close()
	var out []*Trace
	for i, s := range specs {
		prof, err := netem.Parse(s.Kernel)
		if err != nil {
			return out, fmt.Errorf("validate: %s: %w", s.Name, err)
		}
		q, err := netem.Add(netem.Target{NS: p.nsA, Link: p.linkA}, prof)
		if err != nil {
			return out, fmt.Errorf("validate: %s: %w", s.Name, err)
		}
		c0, _ := csumErrors(p.nsB)
		tr, err := RunProbes(p.send, p.recv, netip.AddrPortFrom(AddrB, ProbePort), s.Probe, ProbeSeed(cfg.Seed, i), cfg.drain(), nil)
		derr := q.Delete()
		if err != nil {
			return out, fmt.Errorf("validate: kernel %s: %w", s.Name, err)
		}
		if derr != nil {
			return out, derr
		}
		c1, _ := csumErrors(p.nsB)
		tr.Side, tr.Profile, tr.CsumErrors = "kernel", s.Kernel, c1-c0
		cfg.log().Info("kernel side", "profile", s.Kernel, "sent", len(tr.SentNS), "arrivals", len(tr.Arrivals))
		out = append(out, tr)
	}
	return out, p.close()
}

// RunUserspace probes every spec through the userspace engine (a TUN relay
// in this process) between two namespaces of this host.
func RunUserspace(ctx context.Context, cfg Config, specs []Spec) ([]*Trace, error) {
	p, err := newPair(cfg.RunID)
	if err != nil {
		return nil, fmt.Errorf("validate: userspace side: %w", err)
	}
	defer p.close()
	eng := userspace.New(userspace.Config{RunID: cfg.RunID, Seed: cfg.Seed, Log: cfg.log()})
	defer eng.Close()
	if _, err := eng.Attach(p.nsA, AddrA, []netip.Addr{AddrB}); err != nil {
		return nil, err
	}
	if _, err := eng.Attach(p.nsB, AddrB, []netip.Addr{AddrA}); err != nil {
		return nil, err
	}
	if err := eng.SetProfile(AddrB, AddrA, netem.Profile{}); err != nil {
		return nil, err
	}
	if err := eng.SetProfile(AddrA, AddrB, netem.Profile{}); err != nil {
		return nil, err
	}
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	key := AddrA.String() + ">" + AddrB.String()
	var out []*Trace
	for i, s := range specs {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("validate: userspace side: %w", err)
		}
		prof, err := netem.Parse(s.User)
		if err != nil {
			return out, fmt.Errorf("validate: %s: %w", s.Name, err)
		}
		if err := eng.SetProfile(AddrA, AddrB, prof); err != nil {
			return out, err
		}
		st0 := eng.Stats()
		c0, _ := csumErrors(p.nsB)
		tr, err := RunProbes(p.send, p.recv, netip.AddrPortFrom(AddrB, ProbePort), s.Probe, ProbeSeed(cfg.Seed, i), cfg.drain(), s.Replay)
		if err != nil {
			return out, fmt.Errorf("validate: userspace %s: %w", s.Name, err)
		}
		c1, _ := csumErrors(p.nsB)
		st := eng.Stats()
		d0, d := st0.Directions[key], st.Directions[key]
		tr.Side, tr.Profile, tr.CsumErrors = "userspace", s.User, c1-c0
		tr.Notes = fmt.Sprintf("engine: in %d delivered %d lost %d dup %d corrupt %d late>1ms %d unintended %d bias %v overshoot p50 %v p99 %v realtime %v",
			d.In-d0.In, d.Delivered-d0.Delivered, d.Lost-d0.Lost, d.Duplicated-d0.Duplicated, d.Corrupted-d0.Corrupted, d.Late-d0.Late,
			st.Unintended()-st0.Unintended(), time.Duration(st.BiasNS), time.Duration(st.OvershootP50NS), time.Duration(st.OvershootP99NS), st.Realtime)
		cfg.log().Info("userspace side", "profile", s.User, "sent", len(tr.SentNS), "arrivals", len(tr.Arrivals), "notes", tr.Notes)
		out = append(out, tr)
	}
	if err := eng.Close(); err != nil {
		return out, err
	}
	return out, p.close()
}

// JobEnv names the job file a guest process reads (see GuestMain).
const JobEnv = "TOKENBED_VALIDATE_JOB"

type job struct {
	RunID string
	Seed  uint64
	Drain time.Duration
	Specs []Spec
	Out   string
}

// RunKernelInUML runs the kernel side inside a UML guest with real
// sch_netem: argv is a static program that calls GuestMain when JobEnv is
// set (the validate-netem command itself, or a test binary running a
// helper test). Guest output goes to w.
func RunKernelInUML(ctx context.Context, argv []string, cfg Config, specs []Spec, w io.Writer) ([]*Trace, error) {
	dir, err := os.MkdirTemp("", cfg.RunID+"-validate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	j := job{RunID: cfg.RunID, Seed: cfg.Seed, Drain: cfg.drain(), Specs: specs, Out: filepath.Join(dir, "kernel.json")}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	jp := filepath.Join(dir, "job.json")
	if err := os.WriteFile(jp, b, 0o644); err != nil {
		return nil, err
	}
	timeout := 2 * time.Minute
	for _, s := range specs {
		timeout += 3*time.Duration(s.Probe.Count/s.Probe.Burst)*s.Probe.Interval + cfg.drain() + 2*time.Second
	}
	pool, err := uml.NewPool(1)
	if err != nil {
		return nil, err
	}
	res, err := pool.Run(ctx, uml.Job{
		Argv:    argv,
		Env:     append(os.Environ(), JobEnv+"="+jp),
		Modules: []string{"sch_netem", "veth"},
		Timeout: timeout,
		Stdout:  w,
		Stderr:  w,
		Logger:  cfg.log(),
	})
	if err != nil {
		return nil, fmt.Errorf("validate: UML guest: %w", err)
	}
	if !res.Success() {
		return nil, fmt.Errorf("validate: the kernel side failed inside UML: %s", res)
	}
	b, err = os.ReadFile(j.Out)
	if err != nil {
		return nil, fmt.Errorf("validate: the guest wrote no result: %w", err)
	}
	var traces []*Trace
	if err := json.Unmarshal(b, &traces); err != nil {
		return nil, err
	}
	if len(traces) != len(specs) {
		return nil, fmt.Errorf("validate: the guest returned %d traces for %d profiles", len(traces), len(specs))
	}
	return traces, nil
}

// GuestMain is the kernel side's entry point inside the guest: it reads
// the job named by JobEnv, runs RunKernel and writes the traces.
func GuestMain(log *slog.Logger) error {
	b, err := os.ReadFile(os.Getenv(JobEnv))
	if err != nil {
		return err
	}
	var j job
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	traces, err := RunKernel(Config{RunID: j.RunID, Seed: j.Seed, Drain: j.Drain, Log: log}, j.Specs)
	if err != nil {
		return err
	}
	b, err = json.Marshal(traces)
	if err != nil {
		return err
	}
	return os.WriteFile(j.Out, b, 0o644)
}
