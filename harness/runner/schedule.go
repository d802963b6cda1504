package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// A pending action of the nemesis (an outage's end) at a wall time.
type pending struct {
	at time.Time
	do func()
}

// shardStep is a schedule step placed in the replica whose shard of the
// paper timeline contains it, at an offset into that shard.
type shardStep struct {
	experiments.Step
	replica int
	offset  time.Duration
	// elsewhere marks a step of a replica another shard of the run
	// holds (Options.Shard): not applied here, only counted when due, so
	// that faults are numbered as in the whole run.
	elsewhere bool
}

// faultWeight is how many faults a step of another shard's replica
// counts for in the numbering (apply, crash, cut, loseToken): one for a
// profile change, an outage, a partition, a crash or a lost token, none
// for the rest.
func faultWeight(s experiments.Step) int {
	switch s.Action {
	case experiments.ActProfile, experiments.ActOutage, experiments.ActPartition, experiments.ActCrash, experiments.ActLoseToken:
		return 1
	}
	return 0
}

// schedule runs the paper timeline. With R replicas the timeline is cut
// into R consecutive shards of equal paper length, run side by side: each
// replica replays its shard, and each step happens in the replica whose
// shard contains it. A replica's position in paper time comes from its
// PaperClock (holds stretched back by the time scale, network time at real
// speed), so faults land where they would in paper time whatever the
// network's latency. A replica whose shard is done is stopped; the run
// ends when all are, or on cancellation.
func (r *run) schedule(ctx context.Context) error {
	e := r.e
	R := e.Replicas
	shard := r.o.Duration / time.Duration(R)
	r.shard = shard
	var steps []shardStep
	for _, s := range e.Schedule {
		if s.At > r.o.Duration {
			continue
		}
		rep := min(int(s.At/shard), R-1)
		steps = append(steps, shardStep{Step: s, replica: rep, offset: s.At - time.Duration(rep)*shard, elsewhere: !r.o.holds(rep)})
	}
	done := make([]bool, R)
	for rep := range done {
		done[rep] = !r.o.holds(rep)
	}
	var later []pending
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Time{}
	progressEvery := 10 * time.Second
	if r.o.TTY {
		progressEvery = 250 * time.Millisecond
	}
	wallStart := time.Now()
	for {
		r.followLogs()
		now := r.clock.Now()
		nowNS := now.UnixNano()
		for len(later) > 0 && !later[0].at.After(now) {
			p := later[0]
			later = later[1:]
			p.do()
		}
		// Steps whose replica reached their paper time, in order.
		for i := 0; i < len(steps); {
			st := steps[i]
			if (done[st.replica] && !st.elsewhere) || r.clocks[st.replica].At(nowNS) < st.offset {
				i++
				continue
			}
			steps = append(steps[:i], steps[i+1:]...)
			if st.elsewhere {
				r.faultsElsewhere += faultWeight(st.Step)
				continue
			}
			ps, err := r.apply(ctx, st.Step, st.replica)
			if err != nil {
				return fmt.Errorf("schedule step %d (%s at %v): %w", st.Index, st.Action, st.At, err)
			}
			later = append(later, ps...)
			sort.Slice(later, func(i, j int) bool { return later[i].at.Before(later[j].at) })
		}
		all := true
		for rep := range done {
			if !done[rep] && r.clocks[rep].At(nowNS) >= shard && len(later) == 0 {
				r.finishReplica(rep)
				done[rep] = true
			}
			all = all && done[rep]
		}
		if all {
			r.followLogs()
			r.progress(now, time.Since(wallStart), true)
			return nil
		}
		if wall := time.Now(); wall.Sub(lastProgress) >= progressEvery {
			r.progress(now, wall.Sub(wallStart), false)
			lastProgress = wall
		}
		if err := r.clock.Wait(ctx, tick.C, r.nextDue(steps, later, done)); err != nil {
			return err
		}
	}
}

// nextDue is the earliest wall (or virtual) time at which the schedule
// has something to do, if paper time ran at wall speed: the next pending
// action, the next step, the end of a replica's shard. It is exact when
// the time scale is 1 (the simulator's jumps); zero if nothing is due.
func (r *run) nextDue(steps []shardStep, later []pending, done []bool) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if len(later) > 0 {
		consider(later[0].at)
	}
	for _, st := range steps {
		if !done[st.replica] || st.elsewhere {
			consider(r.start.Add(st.offset))
		}
	}
	for rep := range done {
		if !done[rep] {
			consider(r.start.Add(r.shard))
		}
	}
	return next
}

// finishReplica stops a replica whose shard is done: SIGTERM, so that its
// agents log the end of their run.
func (r *run) finishReplica(rep int) {
	r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "replica_finished", Detail: fmt.Sprintf("replica %d reached the end of its shard", rep)})
	var procs []backend.Process
	r.mu.Lock()
	for _, inst := range r.order {
		ar := r.agents[inst]
		if ar.a.Replica == rep && ar.running {
			procs = append(procs, ar.proc)
		}
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
}

// apply carries out one step now; it returns the actions to do later.
func (r *run) apply(ctx context.Context, s experiments.Step, rep int) ([]pending, error) {
	switch s.Action {
	case experiments.ActProfile:
		for _, d := range r.dirs(s, rep) {
			p := experiments.ScaleNetwork(*s.Profile, r.e.NetworkTimeScale)
			r.planned[d] = p
			if r.outages[d] > 0 {
				// Applied when the outage ends.
				r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Link: d[0] + ">" + d[1], Reason: "profile_deferred", Profile: p.String(), Detail: fmt.Sprintf("schedule step %d: the direction is in an outage", s.Index)})
				continue
			}
			if err := r.setProfile(d[0], d[1], p); err != nil {
				return nil, err
			}
			r.event(eventlog.Event{Kind: eventlog.LinkProfile, Link: d[0] + ">" + d[1], Profile: p.String(), Detail: fmt.Sprintf("schedule step %d", s.Index)})
		}
		r.faults++
	case experiments.ActOutage:
		length := time.Duration(float64(s.For) / r.e.NetworkTimeScale)
		return r.cut(r.dirs(s, rep), length, fmt.Sprintf("schedule step %d, fault %d, %v", s.Index, r.faultNumber(), length))
	case experiments.ActPartition:
		// Every link between two sides, both directions, cut at once and
		// healed at once: one outage per direction, so that analyses see
		// outage_start and outage_end as for an outage step. Target words
		// ("leader") resolve now, among this replica's agents.
		names := make([]string, len(r.e.Agents))
		for i, a := range r.e.Agents {
			names[i] = a.Name
		}
		sides, notes := s.Sides(names, func(word string) (string, bool) {
			if ts := r.targets(word, rep); len(ts) > 0 {
				return r.agents[ts[0]].a.Name, true
			}
			return "", false
		})
		for _, n := range notes {
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "partition_word", Detail: fmt.Sprintf("schedule step %d: %s", s.Index, n)})
		}
		var ds [][2]string
		for _, c := range experiments.Cuts(sides) {
			ds = append(ds, [2]string{results.Instance(c[0], rep), results.Instance(c[1], rep)})
		}
		if len(ds) == 0 {
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "partition_skipped", Detail: fmt.Sprintf("schedule step %d: the groups resolve to fewer than two sides", s.Index)})
			return nil, nil
		}
		length := time.Duration(float64(s.For) / r.e.NetworkTimeScale)
		return r.cut(ds, length, fmt.Sprintf("schedule step %d, fault %d, %v, partition %s", s.Index, r.faultNumber(), length, experiments.SidesText(sides)))
	case experiments.ActCrash:
		if err := r.crash(s, rep); err != nil {
			return nil, err
		}
	case experiments.ActLoseToken:
		if err := r.loseToken(s, rep); err != nil {
			return nil, err
		}
	case experiments.ActLeave:
		for _, inst := range r.targets(s.Agent, rep) {
			ar := r.agents[inst]
			r.event(eventlog.Event{Kind: eventlog.AgentLeave, Peer: inst, Detail: fmt.Sprintf("schedule step %d", s.Index)})
			if ar.proc != nil {
				ar.proc.Signal(syscall.SIGTERM)
				ar.proc.Wait()
			}
		}
	case experiments.ActRestart:
		targets := r.targets(s.Agent, rep)
		if r.isWord(s.Agent) {
			targets = nil
			if inst := r.crashedHolder[rep]; inst != "" {
				targets = []string{inst}
			}
		}
		if len(targets) == 0 {
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "restart_skipped", Detail: fmt.Sprintf("schedule step %d: no holder of replica %d has crashed", s.Index, rep)})
		}
		for _, inst := range targets {
			// Validation rejects what the schedule proves running; what it
			// cannot prove (after a crash of whoever held the token) is
			// skipped here: a run must not abort on it.
			if r.isRunning(inst) {
				r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Peer: inst, Reason: "restart_skipped", Detail: fmt.Sprintf("schedule step %d: %s is running", s.Index, inst)})
				r.o.Log.Info("restart skipped: the agent is running", "step", s.Index, "agent", inst)
				continue
			}
			r.event(eventlog.Event{Kind: eventlog.AgentRestart, Peer: inst, Detail: fmt.Sprintf("schedule step %d (agent: %s)", s.Index, s.Agent)})
			if err := r.startAgent(ctx, inst, ""); err != nil {
				return nil, err
			}
		}
	case experiments.ActJoin:
		for _, inst := range r.targets(s.Agent, rep) {
			via := r.sameReplica(inst, s.Via)
			if r.isRunning(inst) || !r.isRunning(via) {
				r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Peer: inst, Reason: "join_skipped", Detail: fmt.Sprintf("schedule step %d: %s running %v, %s running %v", s.Index, inst, r.isRunning(inst), via, r.isRunning(via))})
				r.o.Log.Info("join skipped", "step", s.Index, "agent", inst, "via", via)
				continue
			}
			// 002 §3.2: the joining agent gets a fresh token and one
			// member's address; it authenticates to that member and passes
			// it the token (agent --join).
			if err := r.writeJoinConfig(inst, via); err != nil {
				return nil, err
			}
			r.event(eventlog.Event{Kind: eventlog.AgentJoin, Peer: inst, Detail: "via " + via})
			if err := r.startAgent(ctx, inst, via); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown action %q", s.Action)
	}
	return nil, nil
}

// crash kills the step's targets (SIGKILL). A crash of "holder" waits
// for one: the paper crashes a holder, not an agent between passes.
func (r *run) crash(s experiments.Step, rep int) error {
	targets := r.targets(s.Agent, rep)
	if r.isWord(s.Agent) && len(targets) == 0 {
		var err error
		if targets, err = r.waitHolder(s, rep, "crash"); err != nil {
			return err
		}
	}
	for _, inst := range targets {
		ar, running := r.running(inst)
		if !running {
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Peer: inst, Reason: "crash_skipped", Detail: "agent not running"})
			continue
		}
		held := r.heldBy(inst)
		// Logged first: the crash event must precede whatever the
		// analysis finds missing after it.
		r.event(eventlog.Event{Kind: eventlog.AgentCrash, Peer: inst, Reason: "SIGKILL", Token: held,
			Detail: fmt.Sprintf("schedule step %d (agent: %s)", s.Index, s.Agent)})
		if err := ar.proc.Signal(syscall.SIGKILL); err != nil {
			return fmt.Errorf("crash %s: %w", inst, err)
		}
		ar.proc.Wait()
		r.clocks[rep].Crash(inst, r.clock.Now().UnixNano())
		if r.isWord(s.Agent) {
			r.crashedHolder[rep] = inst
		}
	}
	r.faults++
	return nil
}

// waitHolder waits up to 5 s for an agent of replica rep to hold a token
// and returns it, logging how long it waited or that none did (reason
// what_waited, what_skipped). The token is between two agents (Move
// sent, Commit not yet received): in compressed time that is most of the
// wall time, since holds shrink and passes do not.
func (r *run) waitHolder(s experiments.Step, rep int, what string) ([]string, error) {
	start := r.clock.Now()
	var targets []string
	for deadline := start.Add(5 * time.Second); len(targets) == 0 && r.clock.Now().Before(deadline); {
		if err := r.clock.Pause(time.Millisecond); err != nil {
			return nil, err
		}
		r.followLogs()
		targets = r.targets("holder", rep)
	}
	if len(targets) == 0 {
		r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: what + "_skipped", Detail: fmt.Sprintf("schedule step %d: no agent of replica %d held a token for 5 s", s.Index, rep)})
	} else {
		r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Peer: targets[0], Reason: what + "_waited", Detail: fmt.Sprintf("schedule step %d: waited %v for a holder", s.Index, r.clock.Now().Sub(start).Round(time.Microsecond))})
	}
	return targets, nil
}

// loseToken makes a holder of a token lose the next token it passes, in
// transit (SIGUSR1: agent/node LoseNextPass). The harness logs
// lose_token with the holder and what it holds; the agent logs
// token_lost when the pass happens.
func (r *run) loseToken(s experiments.Step, rep int) error {
	targets := r.targets("holder", rep)
	if len(targets) == 0 {
		var err error
		if targets, err = r.waitHolder(s, rep, "lose_token"); err != nil || len(targets) == 0 {
			return err
		}
	}
	inst := targets[0]
	ar, running := r.running(inst)
	if !running {
		r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Peer: inst, Reason: "lose_token_skipped", Detail: "agent not running"})
		return nil
	}
	r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Peer: inst, Reason: "lose_token", Token: r.heldBy(inst),
		Detail: fmt.Sprintf("schedule step %d: %s loses the next token it passes", s.Index, inst)})
	if err := ar.proc.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("lose-token %s: %w", inst, err)
	}
	r.faults++
	return nil
}

// faultNumber is the next fault's number in the run: counting, in a
// shard, the faults of the other shards' replicas due before it.
func (r *run) faultNumber() int { return r.faults + r.faultsElsewhere + 1 }

// cut puts 100% loss on the directions ds (instances from>to) for
// length, which is network time: it must outlast the passing retries. It
// returns the heal as a pending action. Each direction ends on the
// profile it has then (a profile step may have come meanwhile), and
// overlapping cuts of one direction end with the last. The whole cut is
// one fault, however many directions it takes.
func (r *run) cut(ds [][2]string, length time.Duration, detail string) ([]pending, error) {
	var restore []func()
	for _, d := range ds {
		base, err := r.plannedProfile(d)
		if err != nil {
			return nil, err
		}
		lossy := base
		lossy.Loss = netem.Loss{Model: netem.LossRandom, Percent: 100}
		if err := r.setProfile(d[0], d[1], lossy); err != nil {
			return nil, err
		}
		r.outages[d]++
		link := d[0] + ">" + d[1]
		r.event(eventlog.Event{Kind: eventlog.OutageStart, Link: link, Reason: "loss", Profile: lossy.String(), Detail: detail})
		restore = append(restore, func() {
			if r.outages[d]--; r.outages[d] > 0 {
				r.event(eventlog.Event{Kind: eventlog.OutageEnd, Link: link, Profile: lossy.String(), Detail: "another outage of this direction goes on"})
				return
			}
			base := r.planned[d]
			if err := r.setProfile(d[0], d[1], base); err != nil {
				r.o.Log.Error("outage end", "link", link, "err", err)
			}
			r.event(eventlog.Event{Kind: eventlog.OutageEnd, Link: link, Profile: base.String()})
		})
	}
	r.faults++
	return []pending{{at: r.clock.Now().Add(length), do: func() {
		for _, f := range restore {
			f()
		}
	}}}, nil
}

// dirs lists the instance directions a link step touches in replica rep.
func (r *run) dirs(s experiments.Step, rep int) [][2]string {
	from, to := results.Instance(s.From, rep), results.Instance(s.To, rep)
	ds := [][2]string{{from, to}}
	if s.Both {
		ds = append(ds, [2]string{to, from})
	}
	return ds
}

func (r *run) sameReplica(inst, name string) string {
	return results.Instance(name, r.agents[inst].a.Replica)
}

// isWord reports whether a schedule target is a word of the protocol's
// (e.g. "holder") rather than an agent of the experiment.
func (r *run) isWord(name string) bool {
	_, agent := r.e.Agent(name)
	return !agent
}

// targets resolves a schedule target to instances of replica rep: an
// agent's instance, or what the protocol's observer resolves a word of
// its to now ("holder": the instance holding a token), if anything.
func (r *run) targets(name string, rep int) []string {
	if !r.isWord(name) {
		return []string{results.Instance(name, rep)}
	}
	var among []string
	for _, inst := range r.order {
		if r.agents[inst].a.Replica == rep {
			among = append(among, inst)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if inst, ok := r.obs.Target(name, among); ok {
		return []string{inst}
	}
	return nil
}

// running returns inst's agent and whether it runs.
func (r *run) running(inst string) (*agentRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar := r.agents[inst]
	return ar, ar.running
}

func (r *run) isRunning(inst string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[inst].running
}

func (r *run) heldBy(inst string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.obs.Holds(inst)
}

// plannedProfile is the profile direction d (instances from>to) has
// outside outages: the experiment's for its agents, scaled to network
// time, until a profile step changes it. A replica's instance is "A.r3"
// while the experiment knows "A": look it up by agent name.
func (r *run) plannedProfile(d [2]string) (netem.Profile, error) {
	if p, ok := r.planned[d]; ok {
		return p, nil
	}
	from, to := r.agents[d[0]], r.agents[d[1]]
	if from == nil || to == nil {
		return netem.Profile{}, fmt.Errorf("direction %s>%s: no such agents", d[0], d[1])
	}
	dir, ok := r.e.Direction(from.a.Name, to.a.Name)
	if !ok {
		return netem.Profile{}, fmt.Errorf("direction %s>%s: the experiment has no profile for %s>%s", d[0], d[1], from.a.Name, to.a.Name)
	}
	p := experiments.ScaleNetwork(dir.Profile, r.e.NetworkTimeScale)
	r.planned[d] = p
	return p, nil
}

// setProfile changes the direction from>to in place.
func (r *run) setProfile(from, to string, p netem.Profile) error {
	return r.links.setProfile(r, from, to, p)
}

// followLogs reads what the agents wrote since the last call.
func (r *run) followLogs() {
	for _, inst := range r.order {
		ar := r.agents[inst]
		if ar.tail == nil {
			continue
		}
		ar.tail.read(func(e eventlog.Event) { r.observe(inst, e) })
	}
	// A crashed agent holds nothing any more.
	r.mu.Lock()
	for _, inst := range r.order {
		if !r.agents[inst].running {
			r.obs.Down(inst)
		}
	}
	r.mu.Unlock()
}

// observe feeds one event of inst's log to its replica's paper clock and
// to the protocol's observer.
func (r *run) observe(inst string, e eventlog.Event) {
	r.clocks[r.agents[inst].a.Replica].Observe(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs.Observe(inst, e)
}

// progress prints the paper time replayed (summed over replicas), passes,
// faults and the ETA at the current paper rate.
func (r *run) progress(now time.Time, elapsed time.Duration, final bool) {
	if r.o.Progress == nil {
		return
	}
	var paper time.Duration
	for _, c := range r.clocks {
		paper += min(c.At(now.UnixNano()), r.shard)
	}
	eta := "?"
	if paper > 0 {
		rate := float64(paper) / float64(elapsed)
		eta = time.Duration(float64(r.o.Duration-paper) / rate).Round(time.Second).String()
	}
	r.mu.Lock()
	passes, what := r.obs.Progress()
	faults := r.faults
	r.mu.Unlock()
	line := fmt.Sprintf("paper time %s / %s (%.1f%%), %d %s, %d faults injected, wall %s, ETA %s",
		fmtPaper(paper), fmtPaper(r.o.Duration), 100*float64(paper)/float64(r.o.Duration), passes, what, faults, elapsed.Round(time.Second), eta)
	if r.o.TTY {
		end := ""
		if final {
			end = "\n"
		}
		fmt.Fprintf(r.o.Progress, "\r\x1b[K%s%s", line, end)
	} else {
		fmt.Fprintln(r.o.Progress, line)
	}
	_ = writeProgress(r.dir, paper, passes, faults, final)
}

func fmtPaper(d time.Duration) string {
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	if days > 0 {
		return fmt.Sprintf("%dd%s", days, d)
	}
	return d.String()
}

// writeProgress keeps progress.json current, for long runs watched from
// outside.
func writeProgress(dir string, paper time.Duration, passes, faults int, final bool) error {
	b, _ := json.Marshal(map[string]any{"paper_seconds": paper.Seconds(), "passes": passes, "faults": faults, "final": final, "at": time.Now().UTC()})
	return os.WriteFile(dir+"/progress.json", append(b, '\n'), 0o644)
}

// tailer reads complete new lines of a growing log file. It keeps the
// file open: under User Mode Linux every system call is expensive.
type tailer struct {
	path    string
	f       *os.File
	pending []byte // an incomplete last line
	buf     []byte
}

func newTailer(path string) *tailer { return &tailer{path: path, buf: make([]byte, 1<<16)} }

func (t *tailer) read(fn func(eventlog.Event)) {
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return
		}
		t.f = f
	}
	for {
		n, err := t.f.Read(t.buf)
		data := t.buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				t.pending = append(t.pending, data...)
				break
			}
			line := data[:i+1]
			if len(t.pending) > 0 {
				line = append(t.pending, line...)
				t.pending = t.pending[:0]
			}
			var e eventlog.Event
			if json.Unmarshal(line, &e) == nil {
				fn(e)
			}
			data = data[i+1:]
		}
		if n < len(t.buf) || err != nil {
			return
		}
	}
}

func (t *tailer) close() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}
