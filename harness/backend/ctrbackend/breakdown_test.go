package ctrbackend

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis/pcaptimeline"
	"tokenbed/internal/results"
)

// passStages splits one pass (Move, Ack, Commit, EarlyStop, each sent
// once) into where its time went, summed over its four datagrams:
//
//	send  from the agent's step that sent the datagram (the event's time,
//	      read before the step: it covers checking the datagram that caused
//	      it, signing, logging) to the datagram on the sender's interface
//	net   from the sender's interface to the receiver's: the impairment
//	      (the profile's delay and the engine's relay)
//	wake  from the receiver's interface to the receiving agent's step (the
//	      kernel's delivery, the agent's wake-up and read)
//
// The three add up to the pass latency the sender logs, first Move to
// EarlyStop.
type passStages struct {
	send, net, wake, total time.Duration
}

// dgKey names one datagram: its sender, type and nonce.
type dgKey struct {
	sender, typ string
	nonce       uint64
}

// kindType maps a datagram event to its datagram type and whether it is
// a send.
var kindType = map[eventlog.Kind]struct {
	typ  string
	sent bool
}{
	eventlog.MoveSent: {"Move", true}, eventlog.MoveReceived: {"Move", false},
	eventlog.AckSent: {"Ack", true}, eventlog.AckReceived: {"Ack", false},
	eventlog.CommitSent: {"Commit", true}, eventlog.CommitReceived: {"Commit", false},
	eventlog.EarlyStopSent: {"EarlyStop", true}, eventlog.EarlyStopReceived: {"EarlyStop", false},
}

// baseName is an instance's agent name without its replica suffix
// ("A.r3" → "A").
func baseName(inst string) string {
	if i := strings.Index(inst, ".r"); i > 0 {
		return inst[:i]
	}
	return inst
}

// breakdown reads a run's logs and capture and returns the stages of
// every clean pass (each datagram sent once) in the directions links
// ("A>B", by agent name, pooled over replicas). The stages are read on
// the wall clock (the capture's), the sender's latency on the monotonic
// one: a pass whose stages do not add up to its latency within 10 µs
// spans a step of the wall clock and is left out; more than 1% of them
// is an error (the logs and the capture disagree).
func breakdown(dir string, links ...string) ([]passStages, error) {
	want := map[string]bool{}
	for _, l := range links {
		want[l] = true
	}
	logs, err := filepath.Glob(filepath.Join(dir, results.LogsDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sent := map[dgKey]time.Time{}     // the sender's step
	received := map[dgKey]time.Time{} // the receiver's step
	type session struct {
		token string
		id    uint64
	}
	type pass struct {
		from, to string
		dgs      []dgKey // the sender's view, in order
		sends    int
		latency  time.Duration
		done     bool
	}
	passes := map[session]*pass{}
	for _, path := range logs {
		if filepath.Base(path) == "harness.jsonl" {
			continue
		}
		evs, err := eventlog.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			at := time.Unix(0, ev.WallNS)
			s := session{ev.Token, ev.Session}
			if ev.Kind == eventlog.PassStarted {
				passes[s] = &pass{from: ev.Agent, to: ev.Peer}
				continue
			}
			if kt, ok := kindType[ev.Kind]; ok {
				if kt.sent {
					sent[dgKey{ev.Agent, kt.typ, ev.Nonce}] = at
				} else {
					received[dgKey{ev.Peer, kt.typ, ev.Nonce}] = at
				}
			}
		}
		// The sender's own view of its passes, in log order.
		for _, ev := range evs {
			p := passes[session{ev.Token, ev.Session}]
			if p == nil || p.from != ev.Agent {
				continue
			}
			switch ev.Kind {
			case eventlog.MoveSent, eventlog.CommitSent:
				p.sends++
				p.dgs = append(p.dgs, dgKey{ev.Agent, kindType[ev.Kind].typ, ev.Nonce})
			case eventlog.AckReceived, eventlog.EarlyStopReceived:
				p.dgs = append(p.dgs, dgKey{ev.Peer, kindType[ev.Kind].typ, ev.Nonce})
			case eventlog.PassCompleted:
				p.latency, p.done = time.Duration(ev.LatencyNS), ev.Reason == "earlystop"
			}
		}
	}
	tl, err := pcaptimeline.ReadFile(filepath.Join(dir, results.CaptureFile), pcaptimeline.Options{})
	if err != nil {
		return nil, err
	}
	wire := map[dgKey]time.Time{}   // first sighting: the sender's interface
	arrive := map[dgKey]time.Time{} // its copy: the receiver's interface
	for _, g := range tl.Groups {
		for _, l := range g.Lines {
			o := l.Obs
			if o == nil || o.Datagram == nil {
				continue
			}
			k := dgKey{o.Datagram.Sender, o.Datagram.Type.String(), o.Datagram.Nonce}
			if o.CopyOf == nil {
				wire[k] = o.Time
			} else {
				arrive[k] = o.Time
			}
		}
	}
	var out []passStages
	var bad []string
	for s, p := range passes {
		if !p.done || p.sends != 2 || len(p.dgs) != 4 || !want[baseName(p.from)+">"+baseName(p.to)] {
			continue
		}
		var st passStages
		complete := true
		for _, k := range p.dgs {
			t0, ok0 := sent[k]
			t1, ok1 := wire[k]
			t2, ok2 := arrive[k]
			t3, ok3 := received[k]
			if !ok0 || !ok1 || !ok2 || !ok3 {
				complete = false
				break
			}
			st.send += t1.Sub(t0)
			st.net += t2.Sub(t1)
			st.wake += t3.Sub(t2)
		}
		if !complete {
			continue
		}
		st.total = st.send + st.net + st.wake
		if d := st.total - p.latency; d > 10*time.Microsecond || d < -10*time.Microsecond {
			bad = append(bad, fmt.Sprintf("pass %s/%d %s>%s: stages add up to %v, the sender logged %v", s.token, s.id, p.from, p.to, st.total, p.latency))
			continue
		}
		out = append(out, st)
	}
	if len(out) == 0 || len(bad)*100 > len(out) {
		return nil, fmt.Errorf("%s: %d clean passes in %v, %d whose stages do not add up: %v", dir, len(out), links, len(bad), bad)
	}
	return out, nil
}

// stageSummary is the mean, median and 99th percentile of each stage over
// passes (each stage's percentiles taken on its own).
type stageSummary struct {
	n                        int
	mean, p50, p99           passStages
	sendP50, netP50, wakeP50 time.Duration
	sendP99, netP99, wakeP99 time.Duration
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func summarize(ps []passStages) stageSummary {
	var s stageSummary
	s.n = len(ps)
	col := func(f func(passStages) time.Duration) (mean, p50, p99 time.Duration) {
		var ds []time.Duration
		var sum time.Duration
		for _, p := range ps {
			ds = append(ds, f(p))
			sum += f(p)
		}
		return sum / time.Duration(len(ds)), quantile(ds, 0.5), quantile(ds, 0.99)
	}
	s.mean.send, s.p50.send, s.p99.send = col(func(p passStages) time.Duration { return p.send })
	s.mean.net, s.p50.net, s.p99.net = col(func(p passStages) time.Duration { return p.net })
	s.mean.wake, s.p50.wake, s.p99.wake = col(func(p passStages) time.Duration { return p.wake })
	s.mean.total, s.p50.total, s.p99.total = col(func(p passStages) time.Duration { return p.total })
	return s
}

func (s stageSummary) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }
	return fmt.Sprintf("n=%d total mean/p50/p99 %s/%s/%s ms; send %s/%s/%s; net %s/%s/%s; wake %s/%s/%s",
		s.n, ms(s.mean.total), ms(s.p50.total), ms(s.p99.total),
		ms(s.mean.send), ms(s.p50.send), ms(s.p99.send),
		ms(s.mean.net), ms(s.p50.net), ms(s.p99.net),
		ms(s.mean.wake), ms(s.p50.wake), ms(s.p99.wake))
}
