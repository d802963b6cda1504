package etcdbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"tokenbed/agent/ftn/ftnconfig"
)

// Row is one configuration's figures for both systems.
type Row struct {
	Profile   string
	FTN, Etcd Result
}

// Plan is what Suite runs, FTN and then etcd for each part, with one
// Config's settings (System, Profile and Dir set per run).
type Plan struct {
	// Latency: Latency's settings under each profile.
	Latency  Config
	Profiles []string
	// Throughput, unimpaired; skipped when its Duration is 0.
	Throughput Config
	// Failover, unimpaired, with Crash set; skipped when Crash is 0.
	Failover Config
	// EtcdVariants rerun etcd's failover with other settings, each
	// compared with the same FTN run: a client deadline (what an
	// application that gives up and retries sees), FTN's timers (the
	// protocols, not their defaults, compared).
	EtcdVariants []Variant
}

// Variant is etcd's settings for a rerun; 0 keeps Failover's.
type Variant struct {
	Heartbeat, Election, Deadline time.Duration
}

func (v Variant) String() string {
	var parts []string
	if v.Election > 0 {
		parts = append(parts, fmt.Sprintf("heartbeat %v, election %v (FTN's)", v.Heartbeat, v.Election))
	}
	if v.Deadline > 0 {
		parts = append(parts, fmt.Sprintf("a %v client deadline", v.Deadline))
	}
	return strings.Join(parts, ", ")
}

// Suite is the figures of one invocation: every run of both systems in
// the same namespaces' layout on the same machine, one after the other.
type Suite struct {
	Latency              []Row
	Throughput, Failover *Row
	// Variants are etcd's reruns, one per Plan.EtcdVariants.
	Variants []Result
	Plan     Plan
	// DataRoot is where etcd's WAL was fsynced: the data root and its
	// file system (Durability).
	DataRoot string
	// LoadStart and LoadEnd are /proc/loadavg before and after: the
	// machine is shared, so wall-clock figures move with its load.
	LoadStart, LoadEnd string
}

// RunSuite runs p. progress gets a line per run.
func RunSuite(ctx context.Context, p Plan, root string, progress io.Writer) (Suite, error) {
	s := Suite{Plan: p, DataRoot: Durability(p.Latency.DataRoot), LoadStart: loadavg()}
	for _, prof := range p.Profiles {
		c := p.Latency
		c.Profile = prof
		r, err := pair(ctx, c, root, "latency-"+profileSlug(prof), progress)
		if err != nil {
			return s, err
		}
		s.Latency = append(s.Latency, r)
	}
	if p.Throughput.Duration > 0 {
		r, err := pair(ctx, p.Throughput, root, "throughput", progress)
		if err != nil {
			return s, err
		}
		s.Throughput = &r
	}
	if p.Failover.Crash > 0 {
		r, err := pair(ctx, p.Failover, root, "failover", progress)
		if err != nil {
			return s, err
		}
		s.Failover = &r
		for i, v := range p.EtcdVariants {
			c := p.Failover
			c.System = Etcd
			if v.Election > 0 {
				c.EtcdHeartbeat, c.EtcdElection = v.Heartbeat, v.Election
			}
			if v.Deadline > 0 {
				c.EtcdDeadline = v.Deadline
			}
			r, err := one(ctx, c, root, fmt.Sprintf("failover-variant%d", i+1), progress)
			if err != nil {
				return s, err
			}
			s.Variants = append(s.Variants, r)
		}
	}
	s.LoadEnd = loadavg()
	return s, nil
}

// pair runs c for FTN and then for etcd.
func pair(ctx context.Context, c Config, root, name string, progress io.Writer) (Row, error) {
	row := Row{Profile: c.Profile}
	var err error
	c.System = FTN
	if row.FTN, err = one(ctx, c, root, name, progress); err != nil {
		return row, err
	}
	c.System = Etcd
	row.Etcd, err = one(ctx, c, root, name, progress)
	return row, err
}

func one(ctx context.Context, c Config, root, name string, progress io.Writer) (Result, error) {
	c.Dir = fmt.Sprintf("%s/%s-%s", root, name, c.System)
	fmt.Fprintf(progress, "etcdbench: %s %s, profile %q, %d servers, %d clients, %v (logs in %s)\n", name, c.System, c.Profile, c.Servers, c.Clients, c.Duration, c.Dir)
	r, err := Run(ctx, c)
	if err != nil {
		return r, fmt.Errorf("%s %s, profile %q (run %s): %w", name, c.System, c.Profile, r.RunID, err)
	}
	fmt.Fprintf(progress, "etcdbench: %d holds measured, p50 %v, p99 %v, %.1f ops/s (netem: %s)\n", len(r.Samples), r.P50, r.P99, r.OpsPerS, r.Impairment)
	if f := r.Failover; f != nil {
		fmt.Fprintf(progress, "etcdbench: crashed leader %s; %d of %d clients served again, after %v; interruption p50 %v max %v (before: %v, %v)\n",
			f.Leader, f.Served, f.Clients, f.Recovered, f.GapP50, f.GapMax, f.BaseP50, f.BaseMax)
	}
	return r, nil
}

func profileSlug(p string) string {
	if p == "" {
		return "unimpaired"
	}
	return strings.NewReplacer(" ", "", "/", "_").Replace(p)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Durability names dir and the kind of file system it is on, which is
// what an fsync there costs: tmpfs (memory, no disk) or a disk.
func Durability(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return dir + " (file system unknown)"
	}
	fs := map[int64]string{0x01021994: "tmpfs, memory: an fsync reaches no disk", 0xEF53: "ext2/3/4 on disk",
		0x58465342: "xfs on disk", 0x9123683E: "btrfs on disk", 0x794c7630: "overlayfs"}[int64(st.Type)]
	if fs == "" {
		fs = fmt.Sprintf("file system type %#x", st.Type)
	}
	return dir + " (" + fs + ")"
}

// Table is the latency rows as a Markdown table: acquire+release latency
// p50 and p99 of each system, and etcd's over FTN's.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| profile (every direction) | FTN p50 | FTN p99 | etcd p50 | etcd p99 | etcd/FTN p50 | etcd/FTN p99 | holds measured (FTN, etcd) | not ok (FTN, etcd) | netem |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d, %d | %d, %d | %s |\n", profileName(r.Profile),
			ms(r.FTN.P50), ms(r.FTN.P99), ms(r.Etcd.P50), ms(r.Etcd.P99),
			ratio(r.Etcd.P50, r.FTN.P50), ratio(r.Etcd.P99, r.FTN.P99),
			len(r.FTN.Samples), len(r.Etcd.Samples), r.FTN.Counts.NotOK, r.Etcd.Counts.NotOK, r.Etcd.Impairment)
	}
	return b.String()
}

func profileName(p string) string {
	if p == "" {
		return "unimpaired"
	}
	return p
}

// FigureTable is the comparison: one line per performance figure
// (figure | FTN | etcd | etcd/FTN | conditions), the
// durability settings, and the machine's load.
func FigureTable(s Suite) string {
	var b strings.Builder
	b.WriteString("| figure | FTN | etcd | ratio etcd/FTN | conditions |\n|---|---|---|---|---|\n")
	line := func(fig, ftn, etcd, r, cond string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", fig, ftn, etcd, r, cond)
	}
	lc := s.Plan.Latency
	lw := lc.Workload
	if lw == (ftnconfig.Workload{}) {
		lw = DefaultWorkload // Config.defaults
	}
	for _, r := range s.Latency {
		cond := fmt.Sprintf("%d servers, %d clients at %g acquisitions/s, %v holds, %d names; %d, %d holds measured after %v; netem %s; %s",
			lc.Servers, lc.Clients, lw.Rate, lw.Hold, lw.Names, len(r.FTN.Samples), len(r.Etcd.Samples), lc.Warmup, r.Etcd.Impairment, sched(lc))
		line("acquire+release p50, "+profileName(r.Profile), ms(r.FTN.P50), ms(r.Etcd.P50), ratio(r.Etcd.P50, r.FTN.P50), cond)
		line("acquire+release p99, "+profileName(r.Profile), ms(r.FTN.P99), ms(r.Etcd.P99), ratio(r.Etcd.P99, r.FTN.P99), "the same runs")
	}
	if r := s.Throughput; r != nil {
		tc := s.Plan.Throughput
		line("throughput (operations completed ok per second)", fmt.Sprintf("%.0f ops/s", r.FTN.OpsPerS), fmt.Sprintf("%.0f ops/s", r.Etcd.OpsPerS),
			fratio(r.Etcd.OpsPerS, r.FTN.OpsPerS),
			fmt.Sprintf("%d servers, %d closed-loop clients (next acquire after an exponential gap of mean %v, no hold), %d names, unimpaired; acquires and releases counted over %v after %v; %d, %d ops; %s",
				tc.Servers, tc.Clients, time.Duration(float64(time.Second)/tc.Workload.Rate), tc.Workload.Names, tc.Duration-tc.Warmup, tc.Warmup, r.FTN.Ops, r.Etcd.Ops, sched(tc)))
	}
	if r := s.Failover; r != nil {
		fc := s.Plan.Failover
		ff, ef := r.FTN.Failover, r.Etcd.Failover
		elected := "none"
		if r.FTN.Elected >= 0 {
			elected = secs(r.FTN.Elected)
		}
		line("failover after a leader crash: every live client served again", served(ff), served(ef), ratio(ef.Recovered, ff.Recovered),
			fmt.Sprintf("SIGKILL of the leader (FTN %s, etcd %s) %v into a steady workload: %d servers, %d clients at %g acquisitions/s, no hold, %d names, unimpaired; the end of each client's longest gap between completions reaching into the %v after the crash; FTN elected a new leader after %s; etcd at its defaults (heartbeat 100 ms, election 1 s) and a client deadline of %v; %s",
				ff.Leader, ef.Leader, fc.Crash, fc.Servers, fc.Clients, fc.Workload.Rate, fc.Workload.Names, fc.Window, elected, deadline(fc), sched(fc)))
		line("failover: a client's interruption, p50 / max over clients", secs(ff.GapP50)+" / "+secs(ff.GapMax), secs(ef.GapP50)+" / "+secs(ef.GapMax),
			ratio(ef.GapP50, ff.GapP50)+" / "+ratio(ef.GapMax, ff.GapMax), "each client's longest gap between two completions, in the same runs")
		line("the floor: the same before the crash, p50 / max", secs(ff.BaseP50)+" / "+secs(ff.BaseMax), secs(ef.BaseP50)+" / "+secs(ef.BaseMax),
			"", fmt.Sprintf("the workload's own gaps in the %v before the crash, no fault", fc.Window))
		line("operations completed fail or unknown after the crash", fmt.Sprint(ff.NotOK), fmt.Sprint(ef.NotOK), "", fmt.Sprintf("in the %v window", fc.Window))
		for i, t := range s.Variants {
			tf := t.Failover
			line("failover, etcd with "+s.Plan.EtcdVariants[i].String(), served(ff), served(tf), ratio(tf.Recovered, ff.Recovered),
				fmt.Sprintf("etcd rerun against the FTN run above; crashed %s; interruption p50 / max %s / %s; %d fail or unknown",
					tf.Leader, secs(tf.GapP50), secs(tf.GapMax), tf.NotOK))
		}
	}
	line("durability", "state in the servers' memory only; nothing written to disk (a restarted server rebuilds from the clients, 001 \"Server start\")",
		"WAL fsynced before every acknowledged write (etcd 3.4 has no switch to turn it off); data directories under "+s.DataRoot, "",
		"the same for every run above")
	fmt.Fprintf(&b, "\nMeasured on a shared machine (load average %s at the start, %s at the end); every ratio is of two runs of this invocation.\n", s.LoadStart, s.LoadEnd)
	return b.String()
}

func sched(c Config) string {
	if c.Nice != 0 {
		return fmt.Sprintf("every process at nice %d", c.Nice)
	}
	return "every process at nice 0"
}

func deadline(c Config) time.Duration {
	if c.EtcdDeadline == 0 {
		return 10 * time.Second // Config.defaults
	}
	return c.EtcdDeadline
}

// served is a failover's time, or how many clients were not served.
func served(f *Failover) string {
	if f.Served < f.Clients || f.Clients == 0 {
		return fmt.Sprintf("%d of %d clients never served again", f.Clients-f.Served, f.Clients)
	}
	return secs(f.Recovered)
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func ratio(a, b time.Duration) string { return fratio(float64(a), float64(b)) }

func fratio(a, b float64) string {
	if b <= 0 || a <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}
