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
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/msg"
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
  agent ftn client --config FILE [--hold D] [VERB ...]
      VERBs, run in order:  acquire NAME --exclusive|--shared   release NAME
                            set-data NAME DATA   get-data NAME   status
      with no VERB: run the configuration's workload until SIGTERM
      (its tokens live as long as the process: --hold D keeps it D longer)
`

// Main runs "agent ftn ARGS".
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "server" && args[0] != "client") {
		fmt.Fprint(stderr, Usage)
		return exitUsage
	}
	role := args[0]
	fs := flag.NewFlagSet("agent ftn "+role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file")
	hold := fs.Duration("hold", 0, "client: stay this long after the verbs")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
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
	h, err := cfg.Host(time.Now())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCredentials
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
	udp, err := agentdriver.ListenUDP(netip.MustParseAddrPort(cfg.Listen))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	invoke := make(chan client.Op)
	done := make(chan client.Result, 16)
	d := &driver.Driver{H: h, T: udp, Log: log, Invoke: invoke}
	if len(verbs) > 0 {
		d.OnDone = func(r client.Result) { done <- r }
	}
	if len(verbs) == 0 {
		if err := d.Run(ctx); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		return exitOK
	}
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	status := runVerbs(ctx, verbs, invoke, done, stdout)
	select {
	case <-time.After(*hold):
	case <-ctx.Done():
	}
	cancel()
	if err := <-errc; err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	return status
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
func runVerbs(ctx context.Context, vs []verb, invoke chan<- client.Op, done <-chan client.Result, w io.Writer) int {
	holds := map[string]client.Result{}
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
				parts = append(parts, fmt.Sprintf("%s %s fence=%s", n, holds[n].Op.Mode, holds[n].Fence))
			}
			fmt.Fprintf(w, "status: holds [%s]\n", strings.Join(parts, ", "))
			continue
		}
		select {
		case invoke <- v.op:
		case <-ctx.Done():
			return exitFailure
		}
		var r client.Result
		select {
		case r = <-done:
		case <-ctx.Done():
			fmt.Fprintf(w, "%s: unknown (stopped)\n", v.op)
			return exitFailure
		}
		line := fmt.Sprintf("%s: %s", r.Op, r.Status)
		if r.Err != "" {
			line = fmt.Sprintf("%s: %s", r.Op, r.Err)
		}
		if r.OK() {
			switch r.Op.Kind {
			case msg.Acquire:
				holds[r.Op.Name] = r
				line += " fence=" + r.Fence.String()
			case msg.Release:
				delete(holds, r.Op.Name)
			case msg.GetData:
				line += fmt.Sprintf(" data=%q", r.Data)
			}
		} else {
			status = exitFailure
		}
		fmt.Fprintln(w, line)
	}
	return status
}
