package shard

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/results"
)

// The order of the merged harness log and capture: each shard's records
// keep their order, and the shards' are interleaved by time, then by
// replica (a run's own records before any replica's at its start, after
// them elsewhere), then by shard. The whole run writes its records in
// that order too wherever its replicas tie in time: it starts and stops
// them in replica order, and a simulated run's replicas are independent
// worlds in one event loop (harness/sim) that meet only at such ties.

// rank places a harness event among those at its time.
func rank(ev *eventlog.Event) int {
	if ev.Kind == eventlog.RunStarted {
		return -1
	}
	if rep, ok := replicaOf(ev); ok {
		return rep
	}
	return math.MaxInt
}

var replicaFinished = regexp.MustCompile(`^replica (\d+) `)

// replicaOf is the replica a harness event is about, if any: its peer's,
// its link's sender's, or the replica a replica_finished notice names.
func replicaOf(ev *eventlog.Event) (int, bool) {
	switch {
	case ev.Peer != "":
		_, r := results.ParseInstance(ev.Peer)
		return r, true
	case ev.Link != "":
		from, _, _ := strings.Cut(ev.Link, ">")
		_, r := results.ParseInstance(from)
		return r, true
	case ev.Kind == eventlog.HarnessNotice && ev.Reason == "replica_finished":
		if m := replicaFinished.FindStringSubmatch(ev.Detail); m != nil {
			r, _ := strconv.Atoi(m[1])
			return r, true
		}
	}
	return 0, false
}

// runLevel folds the events that are the run's, not a replica's: one
// run_started (the first shard's: simulated shards log the same one),
// one run_finished at the last shard's end with every shard's counts
// added, and any other such event once when shards logged it alike.
type runLevel struct {
	started  bool
	seen     map[string]bool
	finished *eventlog.Event
	n, f     int
	what     string
	bad      []string
}

var finishedDetail = regexp.MustCompile(`^(\d+) (.*), (\d+) faults injected$`)

// keep reports whether ev goes into the merged log as it is; run_finished
// is held back for finish.
func (l *runLevel) keep(ev *eventlog.Event) bool {
	if _, ok := replicaOf(ev); ok {
		return true
	}
	switch ev.Kind {
	case eventlog.RunStarted:
		if l.started {
			return false
		}
		l.started = true
		return true
	case eventlog.RunFinished:
		m := finishedDetail.FindStringSubmatch(ev.Detail)
		if m == nil {
			l.bad = append(l.bad, ev.Detail)
		} else {
			n, _ := strconv.Atoi(m[1])
			f, _ := strconv.Atoi(m[3])
			l.n, l.f, l.what = l.n+n, l.f+f, m[2]
		}
		if l.finished == nil || ev.WallNS > l.finished.WallNS {
			c := *ev
			l.finished = &c
		}
		return false
	}
	c := *ev
	c.Seq = 0
	key := string(c.AppendJSON(nil))
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return false
	}
	l.seen[key] = true
	return true
}

// finish is the merged run_finished, nil when no shard logged one.
func (l *runLevel) finish() *eventlog.Event {
	if l.finished == nil {
		return nil
	}
	ev := *l.finished
	if len(l.bad) == 0 {
		ev.Detail = fmt.Sprintf("%d %s, %d faults injected", l.n, l.what, l.f)
	} else {
		ev.Detail = fmt.Sprintf("merged from shards; unread details: %s", strings.Join(l.bad, "; "))
	}
	return &ev
}

// stream is one shard's records in its order, with its head's key.
type stream[T any] struct {
	next func() (T, bool, error)
	head T
	ok   bool
}

// mergeStreams calls emit with every record of every stream, interleaved
// by (time, rank, stream); each stream's own order is kept.
func mergeStreams[T any](ss []*stream[T], key func(T) (int64, int), emit func(T) error) error {
	for _, s := range ss {
		var err error
		if s.head, s.ok, err = s.next(); err != nil {
			return err
		}
	}
	for {
		best := -1
		var bt int64
		var br int
		for i, s := range ss {
			if !s.ok {
				continue
			}
			t, r := key(s.head)
			if best < 0 || t < bt || (t == bt && r < br) {
				best, bt, br = i, t, r
			}
		}
		if best < 0 {
			return nil
		}
		s := ss[best]
		if err := emit(s.head); err != nil {
			return err
		}
		var err error
		if s.head, s.ok, err = s.next(); err != nil {
			return err
		}
	}
}

// mergeHarnessLog writes logs/harness.jsonl from the shards', numbered
// afresh.
func mergeHarnessLog(shards []Shard, out string) error {
	var ss []*stream[*eventlog.Event]
	var lv runLevel
	for _, s := range shards {
		path := filepath.Join(s.Dir, results.LogsDir, results.HarnessLog)
		evs, err := eventlog.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Dir, err)
		}
		i := 0
		ss = append(ss, &stream[*eventlog.Event]{next: func() (*eventlog.Event, bool, error) {
			for i < len(evs) {
				ev := &evs[i]
				i++
				if lv.keep(ev) {
					return ev, true, nil
				}
			}
			return nil, false, nil
		}})
	}
	f, err := os.Create(filepath.Join(out, results.LogsDir, results.HarnessLog))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var seq uint64
	var buf []byte
	emit := func(ev *eventlog.Event) error {
		seq++
		ev.Seq = seq
		buf = append(ev.AppendJSON(buf[:0]), '\n')
		_, err := w.Write(buf)
		return err
	}
	key := func(ev *eventlog.Event) (int64, int) { return ev.WallNS, rank(ev) }
	err = mergeStreams(ss, key, emit)
	if fin := lv.finish(); err == nil && fin != nil {
		err = emit(fin)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
