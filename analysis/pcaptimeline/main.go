package pcaptimeline

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"tokenbed/agent/wire"
	"tokenbed/internal/cli"
)

// Main is the command `harness pcap [flags] FILE`: it prints FILE's
// timeline to stdout. Flags may come before or after FILE. It returns the
// exit status: 0, 1 when the file cannot be read, 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness pcap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts    Options
		port    uint
		session string
		client  string
		from    string
		to      string
	)
	fs.UintVar(&port, "port", 7400, "the agents' UDP `port`")
	fs.StringVar(&opts.Token, "token", "", "token passing: only the token `GEN@ORIGIN`")
	fs.StringVar(&session, "session", "", "token passing: only the session `ID`")
	fs.StringVar(&opts.Name, "name", "", "FTN: only what concerns the token `NAME` (requests and replies naming it, transfers and query replies listing it)")
	fs.StringVar(&client, "client", "", "FTN: only what concerns the client `ID` (c1.7 or 1.7: its requests, the replies to them, transfers listing it)")
	fs.StringVar(&opts.Agent, "agent", "", "only what the agent or FTN member `NAME` sent or received")
	fs.StringVar(&from, "from", "", "start of the time window: an RFC 3339 `time` or an offset from the start of the capture (+1.5s)")
	fs.StringVar(&to, "to", "", "end of the time window: a `time` like -from")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: harness pcap [flags] FILE\n\n"+
			"Prints the timeline of a tokenbed capture (pcapng or pcap): token passing datagrams\n"+
			"by (token, session), then the FTN lock service's datagrams (seed 001) in time order,\n"+
			"one decoded line each, with IPv4 fragments reassembled per interface. Signatures are\n"+
			"not checked (for FTN runs, harness analyze's capture checks verify them with the run's CA).\n\n"+
			"The filters combine: -token and -session select token passing and hide FTN;\n"+
			"-name and -client select FTN and hide token passing; -agent, -from and -to apply to both.\n\nFlags:\n")
		fs.PrintDefaults()
	}

	// Flags before and after the file.
	var files []string
	for {
		if code, stop := cli.Parse(fs, args, stdout); stop {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "harness pcap: "+format+"\n", a...)
		fmt.Fprintln(stderr, "usage: harness pcap [flags] FILE (-h for the flags)")
		return 2
	}
	if len(files) != 1 {
		return usage("want one capture file, got %d", len(files))
	}
	if port == 0 || port > 65535 {
		return usage("-port %d: want 1 to 65535", port)
	}
	opts.Port = uint16(port)
	if opts.Token != "" {
		if _, err := wire.ParseTokenID(opts.Token); err != nil {
			return usage("-token: %v", err)
		}
	}
	if session != "" {
		s, err := strconv.ParseUint(session, 10, 64)
		if err != nil {
			return usage("-session %q: want a decimal session id", session)
		}
		opts.Session, opts.HasSession = s, true
	}
	if client != "" {
		id, err := parseClientID(client)
		if err != nil {
			return usage("-client %v", err)
		}
		opts.Client = id
	}
	var err error
	if from != "" {
		if opts.From, err = ParseBound(from); err != nil {
			return usage("-from %v", err)
		}
	}
	if to != "" {
		if opts.To, err = ParseBound(to); err != nil {
			return usage("-to %v", err)
		}
	}
	tl, err := ReadFile(files[0], opts)
	if err != nil {
		fmt.Fprintf(stderr, "harness pcap: %v\n", err)
		return 1
	}
	if err := tl.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "harness pcap: %v\n", err)
		return 1
	}
	return 0
}

// parseClientID parses an FTN client ID as msg.IDString prints it
// (c1.7: the leader's term and its count), with or without the c.
func parseClientID(s string) (uint64, error) {
	term, n, ok := strings.Cut(strings.TrimPrefix(s, "c"), ".")
	t, err1 := strconv.ParseUint(term, 10, 32)
	c, err2 := strconv.ParseUint(n, 10, 32)
	if !ok || err1 != nil || err2 != nil || t|c == 0 {
		return 0, fmt.Errorf("%q: want a client ID TERM.N (c1.7)", s)
	}
	return t<<32 | c, nil
}
