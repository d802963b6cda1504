package etcdbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
)

// ClientConfig is an etcd workload client: the FTN workload client's
// activity (agent/ftn/host.Workload: acquisitions at Rate per second with
// exponential gaps, a random name of Names, held Hold, then released) on
// etcd's lock API, one concurrency.Session (a lease of TTL, kept alive by
// the client) per process as an FTN client's registration.
type ClientConfig struct {
	Name      string
	Endpoints []string
	Log       string
	Seed      uint64
	Workload  ftnconfig.Workload
	TTL       time.Duration // the session's lease
	OpTimeout time.Duration // a Lock or Unlock not done by then is "unknown"
}

// lockPrefix is the keys' prefix: a name's lock is the etcd Mutex on
// lockPrefix+name.
const lockPrefix = "/tokenbed/lock/"

// RunClient runs c's workload until ctx ends. Its history goes to c.Log
// in the ftnlog schema, so that Samples and the FTN checker read both
// systems alike: ftn_invoke, then ftn_complete with result ok, fail or
// unknown (Jepsen's :info: a Lock that timed out may have taken effect),
// and the lock key's revision as fence_n (etcd's fencing number).
func RunClient(ctx context.Context, c ClientConfig) error {
	w, f, err := eventlog.Create(c.Log, c.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	// The cluster may still be electing: the workload starts once the
	// session's lease is granted (an FTN client's workload likewise waits
	// for its registration).
	var sess *concurrency.Session
	for {
		sess, err = concurrency.NewSession(cli, concurrency.WithTTL(max(1, int(c.TTL/time.Second))), concurrency.WithContext(ctx))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer sess.Close()
	if err := w.Write(eventlog.Event{Kind: eventlog.AgentStarted, Role: "etcd-client", Seed: c.Seed, Version: eventlog.SchemaVersion,
		Detail: "endpoints " + strings.Join(c.Endpoints, ",")}); err != nil {
		return err
	}
	rnd := rand.New(rand.NewPCG(c.Seed, 0x65746364)) // seeded: the same seed, the same names and gaps
	var req uint64
	op := func(kind, name string, do func(context.Context) (int64, error)) bool {
		req++
		inv := ftnlog.Record{Op: kind, Name: name, Req: req, Client: c.Name}
		if kind == "acquire" {
			inv.Mode = "x"
		}
		_ = w.Write(inv.Event(ftnlog.Invoke))
		// An acquire stops with the process; a release goes on after ctx
		// ends, since the hold must end.
		base := ctx
		if kind == "release" {
			base = context.WithoutCancel(ctx)
		}
		octx, cancel := context.WithTimeout(base, c.OpTimeout)
		rev, err := do(octx)
		cancel()
		done := inv
		done.Result = ftnlog.OK
		if err != nil {
			done.Result, done.Status = ftnlog.Unknown, err.Error()
		} else {
			done.N = uint64(rev)
		}
		_ = w.Write(done.Event(ftnlog.Complete))
		return err == nil
	}
	for {
		gap := time.Duration(rnd.ExpFloat64() / c.Workload.Rate * float64(time.Second))
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			return errors.New("etcd session lease expired")
		case <-time.After(gap):
		}
		name := fmt.Sprintf("t%d", rnd.IntN(max(1, c.Workload.Names)))
		m := concurrency.NewMutex(sess, lockPrefix+name)
		if !op("acquire", name, func(ctx context.Context) (int64, error) {
			if err := m.Lock(ctx); err != nil {
				return 0, err
			}
			return m.Header().Revision, nil
		}) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.Workload.Hold):
		}
		op("release", name, func(ctx context.Context) (int64, error) { return 0, m.Unlock(ctx) })
	}
}

// Subcommand runs the processes that Run starts in the namespaces, from
// args after the program's name: "client FLAGS" (ClientMain) or "leader
// FLAGS" (LeaderMain). ok is false for any other args.
func Subcommand(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "client":
		return ClientMain(args[1:], stderr), true
	case "leader":
		return LeaderMain(args[1:], stdout, stderr), true
	}
	return 0, false
}

// LeaderMain runs "leader --endpoints URLS": it prints "leader NAME",
// the member that etcd's maintenance Status API names leader, asking
// each endpoint in turn until one answers (the crashed one may not).
func LeaderMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("etcdbench leader", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("endpoints", "", "etcd client URLs, comma-separated")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *endpoints == "" {
		fmt.Fprintln(stderr, "etcdbench leader: --endpoints is required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	name, err := etcdLeaderName(ctx, strings.Split(*endpoints, ","))
	if err != nil {
		fmt.Fprintln(stderr, "etcdbench leader:", err)
		return 1
	}
	fmt.Fprintln(stdout, "leader", name)
	return 0
}

func etcdLeaderName(ctx context.Context, endpoints []string) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	// Each endpoint gets its share of the time: a Status call to a
	// crashed member waits for a connection until its context ends, and
	// with one shared context that member, when listed first, used up
	// the whole budget (CI: s0 crashed, no leader found at the end).
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(5 * time.Second)
	}
	per := time.Until(dl) / time.Duration(len(endpoints))
	var errs []error
	for _, ep := range endpoints {
		epCtx, cancel := context.WithTimeout(ctx, per)
		st, err := cli.Status(epCtx, ep)
		cancel()
		if err != nil || st.Leader == 0 {
			errs = append(errs, fmt.Errorf("%s: no leader known (%v)", ep, err))
			continue
		}
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return "", err
		}
		for _, m := range ms.Members {
			if m.ID == st.Leader {
				return m.Name, nil
			}
		}
		return "", fmt.Errorf("%s: leader %x is not in the member list", ep, st.Leader)
	}
	return "", errors.Join(errs...)
}

// ClientMain runs "client FLAGS": the workload client process that Run
// starts in a client's namespace, until SIGTERM.
func ClientMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("etcdbench client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c ClientConfig
	endpoints := fs.String("endpoints", "", "etcd client URLs, comma-separated")
	fs.StringVar(&c.Name, "name", "", "client name (the log's agent)")
	fs.StringVar(&c.Log, "log", "", "event log")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fs.IntVar(&c.Workload.Names, "names", DefaultWorkload.Names, "names t0..tN-1")
	fs.Float64Var(&c.Workload.Rate, "rate", DefaultWorkload.Rate, "acquisitions per second")
	fs.DurationVar(&c.Workload.Hold, "hold", DefaultWorkload.Hold, "hold time")
	fs.DurationVar(&c.TTL, "ttl", 5*time.Second, "session lease TTL (whole seconds)")
	fs.DurationVar(&c.OpTimeout, "op-timeout", 10*time.Second, "Lock/Unlock timeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *endpoints == "":
		fmt.Fprintln(stderr, "etcdbench client: --endpoints is required")
		return 2
	case c.Name == "" || c.Log == "":
		fmt.Fprintln(stderr, "etcdbench client: --name and --log are required")
		return 2
	case c.Workload.Rate <= 0 || c.Workload.Names <= 0:
		fmt.Fprintln(stderr, "etcdbench client: --rate and --names must be positive")
		return 2
	}
	c.Endpoints = strings.Split(*endpoints, ",")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := RunClient(ctx, c); err != nil {
		fmt.Fprintln(stderr, "etcdbench client:", err)
		return 1
	}
	return 0
}
