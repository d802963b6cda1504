// Command agent is a tokenbed agent: a member of a token-passing
// membership using the secure application-level passing operation of seed
// 002, with a circulation policy (role).
//
// Usage:
//
//	agent run --config FILE [flags]     run an agent
//	agent ca init --dir DIR             create a Certification Authority
//	agent ca issue --dir DIR NAME...    issue member credentials
//	agent version
//
// Exit status:
//
//	0  stopped by SIGTERM or SIGINT; the event log is complete
//	1  runtime failure (socket, event log)
//	2  usage or configuration error (the message names the field, or the
//	   file and line)
//	3  credentials error (CA, certificate or key)
//
// SIGKILL is a crash: the event log holds every batch written before it.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"tokenbed/agent/ca"
	_ "tokenbed/agent/circulation/policies" // the roles this binary runs
	"tokenbed/agent/config"
	"tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	ftncmd "tokenbed/agent/ftn/cmd"
	"tokenbed/agent/node"
	"tokenbed/agent/resource"
	"tokenbed/internal/cli"
)

// Exit codes.
const (
	exitOK          = 0
	exitRuntime     = 1
	exitUsage       = 2
	exitCredentials = 3
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "ca":
		return cmdCA(args[1:], stdout, stderr)
	case "resource-server":
		return cmdResourceServer(args[1:], stdout, stderr)
	case "ftn":
		// agent ftn -h: there is no role to parse flags for; a role's
		// flags, help included, are parsed by ftncmd.Main.
		if len(args) > 1 && cli.IsHelp(args[1]) {
			fmt.Fprint(stdout, ftncmd.Usage)
			return exitOK
		}
		return ftncmd.Main(args[1:], stdout, stderr)
	case "version":
		fs := flag.NewFlagSet("agent version", flag.ContinueOnError)
		fs.SetOutput(stderr)
		if code, stop := cli.Parse(fs, args[1:], stdout); stop {
			return code
		}
		fmt.Fprintf(stdout, "tokenbed agent, wire format v1, event log schema v%d, roles %s\n", eventlog.SchemaVersion, strings.Join(config.Roles(), " "))
		return exitOK
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "agent: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  agent run --config FILE [flags]     run an agent (agent run -h for flags)
  agent ca init --dir DIR             create a Certification Authority
  agent ca issue --dir DIR NAME...    issue member credentials into DIR
  agent resource-server --listen IP:PORT --log FILE [--name N] [--rate B]
                                      the shared resource of seed 003 (agent/resource)
  agent ftn server|client ...         an FTN token server or client (agent ftn for usage)
  agent version
`)
}

const caUsage = `usage:
  agent ca init --dir DIR             create a Certification Authority
  agent ca issue --dir DIR NAME...    issue member credentials into DIR
`

func cmdCA(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "agent ca: want init or issue")
		return exitUsage
	}
	if cli.IsHelp(args[0]) {
		fmt.Fprint(stdout, caUsage)
		return exitOK
	}
	fs := flag.NewFlagSet("agent ca "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "CA directory")
	if code, stop := cli.Parse(fs, args[1:], stdout); stop {
		return code
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "agent ca: --dir is required")
		return exitUsage
	}
	switch args[0] {
	case "init":
		if err := ca.Init(*dir); err != nil {
			fmt.Fprintln(stderr, "agent ca init:", err)
			return exitCredentials
		}
	case "issue":
		if fs.NArg() == 0 {
			fmt.Fprintln(stderr, "agent ca issue: name at least one member")
			return exitUsage
		}
		for _, n := range fs.Args() {
			if err := ca.Issue(*dir, n); err != nil {
				fmt.Fprintln(stderr, "agent ca issue:", err)
				return exitCredentials
			}
		}
	default:
		fmt.Fprintf(stderr, "agent ca: unknown command %q\n", args[0])
		return exitUsage
	}
	return exitOK
}

// peerFlags collects repeated --peer NAME=ADDR.
type peerFlags []config.Peer

func (p *peerFlags) String() string { return fmt.Sprint(*p) }
func (p *peerFlags) Set(s string) error {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want NAME=IP:PORT, got %q", s)
	}
	*p = append(*p, config.Peer{Name: name, Addr: addr})
	return nil
}

// runFlags are the flags of `agent run`; each given one overrides the
// configuration file.
type runFlags struct {
	cfgPath, name, listen, caCert, creds, logPath, join, fault *string
	rtPrio                                                     *int
	seed                                                       *uint64
	scale, netScale, dropRate                                  *float64
	peers                                                      peerFlags
	generate                                                   *bool
	skew                                                       *time.Duration
}

func defineRunFlags(fs *flag.FlagSet) *runFlags {
	f := &runFlags{}
	f.cfgPath = fs.String("config", "", "configuration file (YAML)")
	f.name = fs.String("name", "", "member name (overrides the file)")
	f.listen = fs.String("listen", "", "UDP address IP:PORT to bind and sign as")
	f.caCert = fs.String("ca", "", "CA certificate file")
	f.creds = fs.String("credentials", "", "directory with NAME.crt and NAME.key")
	f.logPath = fs.String("log", "", "event log file, - for standard output")
	f.rtPrio = fs.Int("rt-priority", 0, "run every thread SCHED_FIFO at this priority (1-99; 0: normal scheduling)")
	f.seed = fs.Uint64("seed", 0, "random seed (0: pick one and log it)")
	f.scale = fs.Float64("time-scale", 0, "divide every duration by this factor (compressed time)")
	f.netScale = fs.Float64("network-time-scale", 0, "divide the passing timeouts by this factor instead (default: time-scale)")
	fs.Var(&f.peers, "peer", "a member NAME=IP:PORT (repeatable; added to the file's)")
	f.join = fs.String("join", "", "join through this peer (002 §3.2)")
	f.generate = fs.Bool("generate", false, "generate a token at start")
	f.skew = fs.Duration("max-clock-skew", 0, fmt.Sprintf("bound on the difference between members' wall clocks, real time even when compressed (default %v)", node.DefaultMaxClockSkew))
	f.dropRate = fs.Float64("drop-rate", 0, "TESTING: drop outgoing datagrams with this probability (seeded)")
	f.fault = fs.String("fault", "", "TESTING: break the protocol on purpose: skip_ack_check or acquire_on_move")
	return f
}

// override sets in c the values the flags gave. An error about a value a
// flag gave then names the flag, not a line of the file.
func (f *runFlags) override(c *config.Config) {
	set := func(dst *string, v, path, flag string) {
		if v != "" {
			*dst = v
			c.SetByFlag(path, flag)
		}
	}
	set(&c.Name, *f.name, "$.name", "name")
	set(&c.Listen, *f.listen, "$.listen", "listen")
	set(&c.CA, *f.caCert, "$.ca", "ca")
	set(&c.Credentials, *f.creds, "$.credentials", "credentials")
	set(&c.Log, *f.logPath, "$.log", "log")
	set(&c.Join, *f.join, "$.join", "join")
	if *f.seed != 0 {
		c.Seed = *f.seed
	}
	if *f.scale != 0 {
		c.TimeScale = *f.scale
		c.SetByFlag("$.time_scale", "time-scale")
	}
	if *f.netScale != 0 {
		c.NetworkTimeScale = *f.netScale
		c.SetByFlag("$.network_time_scale", "network-time-scale")
	}
	if *f.generate {
		c.Generate = true
	}
	set(&c.Fault, *f.fault, "$.fault", "fault")
	if *f.skew != 0 {
		c.MaxClockSkew = *f.skew
		c.SetByFlag("$.max_clock_skew", "max-clock-skew")
	}
	for _, p := range f.peers {
		c.SetByFlag(fmt.Sprintf("$.peers[%d]", len(c.Peers)), "peer")
		c.Peers = append(c.Peers, p)
	}
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := defineRunFlags(fs)
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	var c *config.Config
	if *f.cfgPath != "" {
		var err error
		if c, err = config.Load(*f.cfgPath); err != nil {
			fmt.Fprintln(stderr, "agent:", err)
			return exitUsage
		}
	} else {
		c = &config.Config{}
	}
	f.override(c)
	r, err := c.Validate()
	if err != nil {
		fmt.Fprintln(stderr, "agent: configuration:")
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *f.dropRate < 0 || *f.dropRate >= 1 {
		fmt.Fprintln(stderr, "agent: --drop-rate: must be in [0, 1)")
		return exitUsage
	}
	if *f.dropRate == 0 {
		*f.dropRate = r.DropRate
	}
	cred, err := ca.LoadMember(r.Credentials, r.Name, r.CA)
	if err != nil {
		fmt.Fprintln(stderr, "agent: credentials:", err)
		return exitCredentials
	}
	if r.Seed == 0 {
		var b [8]byte
		crand.Read(b[:])
		r.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}

	var logw io.Writer = stdout
	if r.Log != "-" {
		if err := os.MkdirAll(filepath.Dir(r.Log), 0o755); err != nil {
			fmt.Fprintln(stderr, "agent: log:", err)
			return exitRuntime
		}
		f, err := os.OpenFile(r.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "agent: log:", err)
			return exitRuntime
		}
		defer f.Close()
		logw = f
	}
	log := eventlog.NewWriter(logw, r.Name)

	n, err := r.Node(cred, nil, time.Now()) // a process of its own: it verifies what it loads
	if err != nil {
		fmt.Fprintf(stderr, "agent: %s: %v\n", *f.cfgPath, err)
		return exitUsage
	}
	if *f.rtPrio != 0 {
		if err := realtime(*f.rtPrio); err != nil {
			// Not fatal: the agent is correct at any priority; only its
			// latency under CPU contention suffers.
			fmt.Fprintf(stderr, "agent: --rt-priority %d not granted, running at normal priority: %v\n", *f.rtPrio, err)
		}
	}
	udp, err := driver.ListenUDP(r.Listen)
	if err != nil {
		fmt.Fprintln(stderr, "agent: listen:", err)
		return exitRuntime
	}
	var tr driver.Transport = udp
	if *f.dropRate > 0 {
		tr = driver.NewLossy(udp, *f.dropRate, r.Seed)
	}
	if c.Fault != "" {
		fmt.Fprintf(stderr, "agent: WARNING: running with fault %s: this agent breaks the protocol on purpose\n", c.Fault)
	}
	if err := log.Write(r.Started(c.Fault, *f.dropRate)); err != nil {
		fmt.Fprintln(stderr, "agent: log:", err)
		return exitRuntime
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	op, err := resource.New(r.Operation, resource.Env{Agent: r.Name, Log: log})
	if err != nil {
		fmt.Fprintln(stderr, "agent: operation:", err)
		return exitUsage
	}
	d := &driver.Driver{Node: n, T: tr, Log: log, Op: op, Clock: r.Clock}
	runErr := d.Run(ctx)
	reason := "signal"
	code := exitOK
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		reason, code = runErr.Error(), exitRuntime
		fmt.Fprintln(stderr, "agent:", runErr)
	}
	_ = log.Write(driver.Stopping(reason, n.Rejected()))
	return code
}

// cmdResourceServer runs the shared resource server until SIGTERM or
// SIGINT (exit 0), logging every client's connect and disconnect.
func cmdResourceServer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent resource-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "TCP address IP:PORT to listen on")
	logPath := fs.String("log", "", "event log file, - for standard error")
	name := fs.String("name", resource.ServerName, "name in the event log's agent field")
	rate := fs.Int("rate", resource.DefaultRate, "bytes per second streamed to each client")
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if _, err := netip.ParseAddrPort(*listen); err != nil {
		fmt.Fprintf(stderr, "agent resource-server: --listen %q: want IP:PORT\n", *listen)
		return exitUsage
	}
	if *logPath == "" || *rate <= 0 {
		fmt.Fprintln(stderr, "agent resource-server: --log is required and --rate must be positive")
		return exitUsage
	}
	var logw io.Writer = stderr
	if *logPath != "-" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "agent resource-server: log:", err)
			return exitRuntime
		}
		defer f.Close()
		logw = f
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "agent resource-server: listen:", err)
		return exitRuntime
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := &resource.Server{L: l, Log: eventlog.NewWriter(logw, *name), Rate: *rate}
	if err := s.Serve(ctx); err != nil {
		fmt.Fprintln(stderr, "agent resource-server:", err)
		return exitRuntime
	}
	return exitOK
}
