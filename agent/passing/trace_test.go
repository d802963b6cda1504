package passing

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/wire"
)

// TestTraces replays testdata/*.txt (datadriven, as etcd raft's: a
// command, ----, the effects it produced; go test -run TestTraces -rewrite
// regenerates them). Endpoints pass the token 1@A over a network that the
// script drives datagram by datagram; each node has its own clock.
//
//	nodes A B C [exchange=X] [skip=D]
//	                          endpoints with DefaultConfig, running
//	                          exchange X (default 4way); skip=D sets the
//	                          move and ack timeouts to D (004's Δskip)
//	hold A                    A holds the token (session 0)
//	pass A B                  A starts passing it to B
//	deliver Move A B [at=D] [keep]
//	                          deliver the first Move in flight from A to B,
//	                          B's clock set to D first (default: unchanged);
//	                          keep: a copy stays in flight (a duplicate)
//	drop Ack B A              lose every Ack in flight from B to A
//	tick B                    B's clock to its next deadline, and Tick
//	receivers B               B's receiver machines
//	holders                   the nodes holding the token
//
// Each effect prints as "NODE kind token/session ...".
func TestTraces(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var tr *tracer
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "nodes" {
				tr = newTracer(t, d)
				return ""
			}
			if tr == nil {
				d.Fatalf(t, "%s before nodes", d.Cmd)
			}
			return tr.run(t, d)
		})
	})
}

type tracer struct {
	eps   map[string]*Endpoint
	clk   map[string]time.Time
	net   []Msg
	order []string
}

func newTracer(t *testing.T, d *datadriven.TestData) *tracer {
	tr := &tracer{eps: map[string]*Endpoint{}, clk: map[string]time.Time{}}
	cfg := DefaultConfig()
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "exchange":
			cfg.Exchange = a.Vals[0]
		case "skip":
			skip, err := time.ParseDuration(a.Vals[0])
			if err != nil {
				d.Fatalf(t, "skip: %v", err)
			}
			cfg.MoveTimeout, cfg.AckTimeout = skip, skip
		}
	}
	for _, a := range d.CmdArgs {
		if a.Key == "exchange" || a.Key == "skip" {
			continue
		}
		ep, err := NewEndpoint(cfg, a.Key)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		tr.eps[a.Key], tr.clk[a.Key] = ep, t0
		tr.order = append(tr.order, a.Key)
	}
	return tr
}

// node returns the endpoint named by the command's i-th argument.
func (tr *tracer) node(t *testing.T, d *datadriven.TestData, i int) string {
	if len(d.CmdArgs) <= i {
		d.Fatalf(t, "%s: want a node name as argument %d", d.Cmd, i+1)
	}
	n := d.CmdArgs[i].Key
	if tr.eps[n] == nil {
		d.Fatalf(t, "%s: unknown node %q", d.Cmd, n)
	}
	return n
}

func msgType(t *testing.T, d *datadriven.TestData) wire.Type {
	for _, ty := range []wire.Type{wire.Move, wire.Ack, wire.Commit, wire.EarlyStop} {
		if len(d.CmdArgs) > 0 && d.CmdArgs[0].Key == ty.String() {
			return ty
		}
	}
	d.Fatalf(t, "%s: want Move, Ack, Commit or EarlyStop as argument 1", d.Cmd)
	return 0
}

func (tr *tracer) run(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	switch d.Cmd {
	case "hold":
		n := tr.node(t, d, 0)
		if err := tr.eps[n].Hold(tok, 0); err != nil {
			return "error: " + err.Error() + "\n"
		}
		tr.collect(&b, n)
	case "pass":
		n, p := tr.node(t, d, 0), tr.node(t, d, 1)
		if err := tr.eps[n].Pass(tr.clk[n], tok, p); err != nil {
			return "error: " + err.Error() + "\n"
		}
		tr.collect(&b, n)
	case "deliver", "drop":
		ty, from, to := msgType(t, d), tr.node(t, d, 1), tr.node(t, d, 2)
		match := func(m Msg) bool { return m.Type == ty && m.From == from && m.To == to }
		if d.Cmd == "drop" {
			before := len(tr.net)
			tr.net = slices.DeleteFunc(tr.net, match)
			return fmt.Sprintf("dropped %d\n", before-len(tr.net))
		}
		i := slices.IndexFunc(tr.net, match)
		if i < 0 {
			return fmt.Sprintf("error: no %v %s→%s in flight\n", ty, from, to)
		}
		m := tr.net[i]
		if !d.HasArg("keep") {
			tr.net = slices.Delete(tr.net, i, i+1)
		}
		if d.HasArg("at") {
			var at string
			d.ScanArgs(t, "at", &at)
			dur, err := time.ParseDuration(at)
			if err != nil || t0.Add(dur).Before(tr.clk[to]) {
				d.Fatalf(t, "at=%s: want a duration not before %s's clock (%v)", at, to, tr.clk[to].Sub(t0))
			}
			tr.clk[to] = t0.Add(dur)
		}
		tr.eps[to].Deliver(tr.clk[to], m)
		tr.collect(&b, to)
	case "tick":
		n := tr.node(t, d, 0)
		dl, ok := tr.eps[n].Deadline()
		if !ok {
			return "no deadline\n"
		}
		tr.clk[n] = dl
		fmt.Fprintf(&b, "%s at %v\n", n, dl.Sub(t0))
		tr.eps[n].Tick(dl)
		tr.collect(&b, n)
	case "receivers":
		n := tr.node(t, d, 0)
		ep := tr.eps[n]
		ks := sortedKeys(ep.receivers, key.compare)
		if len(ks) == 0 {
			return "none\n"
		}
		for _, k := range ks {
			fmt.Fprintf(&b, "%v/%d from %s: %s\n", k.token, k.session, k.peer, ep.receivers[k].Status())
		}
	case "holders":
		var h []string
		for _, n := range tr.order {
			if tr.eps[n].Holds(tok) {
				h = append(h, n)
			}
		}
		if len(h) == 0 {
			return "none\n"
		}
		return strings.Join(h, " ") + "\n"
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return b.String()
}

// collect prints node n's effects and puts its datagrams in flight.
func (tr *tracer) collect(b *strings.Builder, n string) {
	for _, f := range tr.eps[n].Effects() {
		fmt.Fprintf(b, "%s %s", n, f.Kind)
		switch f.Kind {
		case SendMsg, Received, Rejected:
			fmt.Fprintf(b, " %v", f.Msg)
		default:
			fmt.Fprintf(b, " %v/%d", f.Token, f.Session)
			if f.Peer != "" {
				fmt.Fprintf(b, " peer=%s", f.Peer)
			}
		}
		if f.Reason != "" {
			fmt.Fprintf(b, " %s", f.Reason)
		}
		if f.Late {
			b.WriteString(" late")
		}
		b.WriteByte('\n')
		if f.Kind == SendMsg {
			tr.net = append(tr.net, f.Msg)
		}
	}
}
