// Package cmd is the agent's "ftn" command: an FTN server or client
// process (seed 001). agent/main.go dispatches "agent ftn ..." here.
package cmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	agentdriver "tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/driver"
	"tokenbed/agent/ftn/ftnclient"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/msg"
	"tokenbed/internal/cli"
)

// Exit statuses, as agent run's.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitCredentials = 3
)

// Usage is the command's help.
const Usage = `usage:
  agent ftn server --config FILE            run an FTN token server
  agent ftn run --config FILE               run the server or client the file's role says
  agent ftn client --config FILE [--hold D] [VERB ...]
      VERBs, run in order:  acquire NAME --exclusive|--shared   release NAME
                            set-data NAME DATA   get-data NAME   status
      with no VERB: run the configuration's workload until SIGTERM
      (its tokens live as long as the process: --hold D keeps it D longer)
`

// Main runs "agent ftn ARGS".
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "server" && args[0] != "client" && args[0] != "run") {
		fmt.Fprint(stderr, Usage)
		return exitUsage
	}
	role := args[0]
	fs := flag.NewFlagSet("agent ftn "+role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file")
	hold := fs.Duration("hold", 0, "client: stay this long after the verbs")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), Usage+"flags:\n")
		fs.PrintDefaults()
	}
	if code, stop := cli.Parse(fs, args[1:], stdout); stop {
		return code
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "agent ftn: --config is required")
		return exitUsage
	}
	cfg, err := ftnconfig.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if role == "run" {
		role = cfg.Role // the harness's form: the file says
	}
	if cfg.Role != role {
		fmt.Fprintf(stderr, "%s: role is %s, not %s\n", *cfgPath, cfg.Role, role)
		return exitUsage
	}
	verbs, err := parseVerbs(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "agent ftn client: %v\n%s", err, Usage)
		return exitUsage
	}
	if role == ftnconfig.RoleServer && len(verbs) > 0 {
		fmt.Fprintln(stderr, "agent ftn server: takes no verbs")
		return exitUsage
	}
	var log *eventlog.Writer
	if cfg.Log == "-" {
		log = eventlog.NewWriter(stdout, cfg.Name)
	} else {
		w, f, err := eventlog.Create(cfg.Log, cfg.Name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		defer f.Close()
		log = w
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if len(verbs) > 0 {
		c, err := ftnclient.StartWith(ctx, cfg, log)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitCredentials
		}
		status := runVerbs(ctx, verbs, c, stdout)
		select {
		case <-time.After(*hold):
		case <-ctx.Done():
		}
		if err := c.Close(); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		return status
	}
	// A server, or a client running its workload, until a signal.
	h, err := cfg.Host(time.Now())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCredentials
	}
	udp, err := agentdriver.ListenUDP(netip.MustParseAddrPort(cfg.Listen))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	d := &driver.Driver{H: h, T: udp, Log: log}
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	return exitOK
}

type verb struct {
	status bool
	op     client.Op
}

func parseVerbs(args []string) ([]verb, error) {
	var vs []verb
	for i := 0; i < len(args); i++ {
		need := func(n int) ([]string, error) {
			if i+n >= len(args) {
				return nil, fmt.Errorf("%s: want %d argument(s)", args[i], n)
			}
			a := args[i+1 : i+1+n]
			i += n
			return a, nil
		}
		switch args[i] {
		case "status":
			vs = append(vs, verb{status: true})
		case "acquire":
			a, err := need(2)
			if err != nil {
				return nil, fmt.Errorf("acquire NAME --exclusive|--shared")
			}
			m := map[string]msg.Mode{"--exclusive": msg.Exclusive, "--shared": msg.Shared}[a[1]]
			if m == 0 {
				return nil, fmt.Errorf("acquire %s: want --exclusive or --shared, not %q", a[0], a[1])
			}
			vs = append(vs, verb{op: client.Op{Kind: msg.Acquire, Name: a[0], Mode: m}})
		case "release", "get-data":
			a, err := need(1)
			if err != nil {
				return nil, err
			}
			k := map[string]msg.Kind{"release": msg.Release, "get-data": msg.GetData}[args[i-1]]
			vs = append(vs, verb{op: client.Op{Kind: k, Name: a[0]}})
		case "set-data":
			a, err := need(2)
			if err != nil {
				return nil, err
			}
			vs = append(vs, verb{op: client.Op{Kind: msg.SetData, Name: a[0], Data: []byte(a[1])}})
		default:
			return nil, fmt.Errorf("unknown verb %q", args[i])
		}
	}
	return vs, nil
}

// runVerbs runs the verbs in order and prints each result; it returns 1
// if one failed.
func runVerbs(ctx context.Context, vs []verb, c *ftnclient.Client, w io.Writer) int {
	type held struct {
		mode  msg.Mode
		fence msg.Fence
	}
	holds := map[string]held{}
	status := exitOK
	for _, v := range vs {
		if v.status {
			names := make([]string, 0, len(holds))
			for n := range holds {
				names = append(names, n)
			}
			sort.Strings(names)
			var parts []string
			for _, n := range names {
				parts = append(parts, fmt.Sprintf("%s %s fence=%s", n, holds[n].mode, holds[n].fence))
			}
			fmt.Fprintf(w, "status: holds [%s]\n", strings.Join(parts, ", "))
			continue
		}
		o := v.op
		var err error
		line := ""
		switch o.Kind {
		case msg.Acquire:
			var f msg.Fence
			if f, err = c.Acquire(ctx, o.Name, o.Mode); err == nil {
				holds[o.Name] = held{o.Mode, f}
				line = " fence=" + f.String()
			}
		case msg.Release:
			if err = c.Release(ctx, o.Name); err == nil {
				delete(holds, o.Name)
			}
		case msg.SetData:
			err = c.SetData(ctx, o.Name, o.Data)
		case msg.GetData:
			var d []byte
			if d, err = c.GetData(ctx, o.Name); err == nil {
				line = fmt.Sprintf(" data=%q", d)
			}
		}
		if err != nil {
			status = exitFailure
			fmt.Fprintf(w, "%s: %v\n", o, err)
			continue
		}
		fmt.Fprintf(w, "%s: ok%s\n", o, line)
	}
	return status
}
