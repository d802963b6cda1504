package ftntest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
)

// TestTraces runs the unit traces in testdata (etcd raft's style: a
// command, ----, the trace it prints; go test -rewrite regenerates).
func TestTraces(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Cluster
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "cluster" && c == nil {
				d.Fatalf(t, "no cluster: start with cluster servers=N clients=M")
			}
			out, err := run(t, d, &c)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			return out
		})
	})
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

func strArg(t *testing.T, d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func run(t *testing.T, d *datadriven.TestData, cp **Cluster) (string, error) {
	c := *cp
	if out, ok, err := runNetwork(t, d, c); ok {
		return out, err
	}
	switch d.Cmd {
	case "cluster":
		o := Options{Servers: intArg(t, d, "servers", 3), Clients: intArg(t, d, "clients", 2), Seed: uint64(intArg(t, d, "seed", 1))}
		if d.HasArg("broken") {
			o.Broken = []int{intArg(t, d, "broken", 0)}
		}
		o.Client.RetryTicks = intArg(t, d, "retry", 0) // the clients' (0: the default)
		nc, err := New(o)
		if err != nil {
			return "", err
		}
		if d.HasArg("loss") {
			v, err := strconv.ParseFloat(strArg(t, d, "loss"), 64)
			if err != nil {
				return "", fmt.Errorf("loss: %v", err)
			}
			nc.Loss = v
		}
		*cp = nc
		return "ok", nil
	case "run":
		c.ShowMsgs, c.ShowAll = d.HasArg("msgs"), d.HasArg("all")
		c.Run(intArg(t, d, "n", 1))
		s := c.Trace()
		if d.HasArg("quiet") {
			s = ""
		}
		if d.HasArg("status") {
			if s != "" {
				s += "\n"
			}
			s += c.Status()
		}
		return s, nil
	case "status":
		return c.Status(), nil
	case "acquire", "release", "set-data", "get-data":
		o := client.Op{Name: strArg(t, d, "name")}
		switch d.Cmd {
		case "acquire":
			o.Kind, o.Mode = msg.Acquire, msg.Exclusive
			if d.HasArg("shared") {
				o.Mode = msg.Shared
			}
		case "release":
			o.Kind = msg.Release
		case "set-data":
			o.Kind, o.Data = msg.SetData, []byte(strArg(t, d, "data"))
		case "get-data":
			o.Kind = msg.GetData
		}
		j := c.ClientIndex(strArg(t, d, "c"))
		if j < 0 {
			return "", fmt.Errorf("c: no client %q", strArg(t, d, "c"))
		}
		req := c.Invoke(j, o)
		return strings.TrimSpace(fmt.Sprintf("req=%d\n%s", req, c.Trace())), nil
	case "crash", "restart":
		for _, a := range d.CmdArgs {
			name := a.Key
			if i := c.ServerIndex(name); i >= 0 {
				if d.Cmd == "crash" {
					c.CrashServer(i)
				} else if err := c.RestartServer(i); err != nil {
					return "", err
				}
				continue
			}
			j := c.ClientIndex(name)
			if j < 0 {
				return "", fmt.Errorf("%s: no process %q", d.Cmd, name)
			}
			if d.Cmd == "crash" {
				c.CrashClient(j)
			} else if err := c.RestartClient(j); err != nil {
				return "", err
			}
		}
		return "ok", nil
	case "partition":
		var groups [][]string
		for _, a := range d.CmdArgs {
			groups = append(groups, a.Vals)
		}
		c.Partition(groups...)
		return "ok", nil
	case "cut":
		c.Cut(strArg(t, d, "from"), strArg(t, d, "to"))
		return "ok", nil
	case "heal":
		c.Heal()
		return "ok", nil
	case "replay":
		k, ok := kindByName(strArg(t, d, "kind"))
		if !ok {
			return "", fmt.Errorf("kind: no message kind %q", strArg(t, d, "kind"))
		}
		name := ""
		if d.HasArg("name") {
			name = strArg(t, d, "name")
		}
		if !c.Replay(strArg(t, d, "from"), strArg(t, d, "to"), k, uint64(intArg(t, d, "req", 0)), name, d.HasArg("newest")) {
			return "", fmt.Errorf("replay: no %s sent from %s to %s", k, strArg(t, d, "from"), strArg(t, d, "to"))
		}
		return c.Trace(), nil
	case "reregister":
		j := c.ClientIndex(strArg(t, d, "c"))
		if j < 0 {
			return "", fmt.Errorf("c: no client %q", strArg(t, d, "c"))
		}
		if err := c.Reregister(j); err != nil {
			return "", err
		}
		return "ok", nil
	case "fences":
		return fences(c.Log())
	case "owner":
		name := strArg(t, d, "name")
		return fmt.Sprintf("sequence=%v owner=s%d", msg.Sequence(name, len(c.servers)), c.Owner(name)), nil
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// runNetwork runs the commands that act on the network and on a client's
// closing: close, hold, deliver, drop, inject. ok is false for any other
// command.
func runNetwork(t *testing.T, d *datadriven.TestData, c *Cluster) (out string, ok bool, err error) {
	switch d.Cmd {
	case "close":
		j := c.ClientIndex(strArg(t, d, "c"))
		if j < 0 {
			return "", true, fmt.Errorf("c: no client %q", strArg(t, d, "c"))
		}
		c.ShowMsgs = true // the Close itself
		c.Close(j)
		return c.Trace(), true, nil
	case "hold":
		c.Hold(strArg(t, d, "from"), strArg(t, d, "to"))
		return "ok", true, nil
	case "deliver":
		if c.Deliver(strArg(t, d, "from"), strArg(t, d, "to")) == 0 {
			return "", true, fmt.Errorf("deliver: nothing held from %s to %s", strArg(t, d, "from"), strArg(t, d, "to"))
		}
		return c.Trace(), true, nil
	case "drop":
		k, ok := kindByName(strArg(t, d, "kind"))
		if !ok {
			return "", true, fmt.Errorf("kind: no message kind %q", strArg(t, d, "kind"))
		}
		c.Drop(strArg(t, d, "from"), strArg(t, d, "to"), k, intArg(t, d, "n", 1))
		return "ok", true, nil
	case "inject":
		m, err := foreign(t, d)
		if err != nil {
			return "", true, err
		}
		if err := c.Inject(strArg(t, d, "from"), strArg(t, d, "to"), m); err != nil {
			return "", true, err
		}
		return c.Trace(), true, nil
	}
	return "", false, nil
}

// fences checks the fencing guarantee on the clients' histories:
// per name, every acquire completed ok carries a fence above those of the
// acquires completed before it. It prints "ok" or each pair out of order.
func fences(log []eventlog.Event) (string, error) {
	last := map[string]msg.Fence{}
	var bad []string
	for _, e := range log {
		r, ok, err := ftnlog.Parse(e)
		if err != nil {
			return "", err
		}
		if !ok || e.Kind != ftnlog.Complete || r.Op != ftnlog.OpName(msg.Acquire) || r.Result != ftnlog.OK {
			continue
		}
		f := r.Fence()
		if l, seen := last[r.Name]; seen && f.Compare(l) <= 0 {
			bad = append(bad, fmt.Sprintf("%s: %s %s after %s", r.Name, r.Client, f, l))
		}
		if l := last[r.Name]; f.Compare(l) > 0 {
			last[r.Name] = f
		}
	}
	if len(bad) == 0 {
		return "ok", nil
	}
	return "out of order:\n" + strings.Join(bad, "\n"), nil
}

// foreign builds the message of an inject command: kind=State or
// HeartbeatAck carrying a global state of servers=N servers (all READY,
// leader=L, version term=T<<32|1), as a server with another
// configuration file would send.
func foreign(t *testing.T, d *datadriven.TestData) (msg.Msg, error) {
	k, ok := kindByName(strArg(t, d, "kind"))
	if !ok || (k != msg.StateMsg && k != msg.HeartbeatAck) {
		return msg.Msg{}, fmt.Errorf("kind: inject sends State or HeartbeatAck, not %q", strArg(t, d, "kind"))
	}
	term := uint64(intArg(t, d, "term", 9))
	g := msg.Global{Term: term, Version: term<<32 | 1, Leader: intArg(t, d, "leader", 0)}
	for range intArg(t, d, "servers", 3) {
		g.Servers = append(g.Servers, msg.ServerState{State: msg.Ready, Inc: 1})
	}
	return msg.Msg{Kind: k, Term: term, Version: g.Version, Global: &g}, nil
}

func kindByName(s string) (msg.Kind, bool) {
	for k := msg.Kind(0); k < 64; k++ {
		if k.Valid() && k.String() == s {
			return k, true
		}
	}
	return 0, false
}
