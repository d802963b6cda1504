package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) events(t *testing.T) []eventlog.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []eventlog.Event
	if err := eventlog.Read(bytes.NewReader(s.b.Bytes()), "server", func(e eventlog.Event) error {
		evs = append(evs, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// waitFor polls the server's log until it holds n events (a bound on a
// wait, not a timed assertion: nothing is measured).
func waitFor(t *testing.T, log *syncBuf, n int) []eventlog.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if evs := log.events(t); len(evs) >= n {
			return evs
		}
	}
	t.Fatalf("the server's log never reached %d events: %+v", n, log.events(t))
	return nil
}

func extra(t *testing.T, e eventlog.Event, key string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(e.Extra[key], &v); err != nil {
		t.Fatalf("%s: field %s: %v", e.Kind, key, err)
	}
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

// Two overlapping operations: the server logs each client's connect and
// disconnect with its own count of connected clients (1, 2, 1, 0) and
// the bytes it streamed; Close ends what is still running.
func TestClientsSeenByServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuf{}
	srv := &Server{L: l, Log: eventlog.NewWriter(log, "resource"), Rate: 1 << 20}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error)
	go func() { served <- srv.Serve(ctx) }()

	a, err := New(Config{Kind: KindResource, Server: l.Addr().String()}, Env{Agent: "A"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(Config{Kind: KindResource, Server: l.Addr().String()}, Env{Agent: "B"})
	a.Start("1@A")
	waitFor(t, log, 2)
	b.Start("2@B")
	waitFor(t, log, 3)
	a.Finish("1@A")
	waitFor(t, log, 4)
	b.Close()
	evs := waitFor(t, log, 5)
	a.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	evs = log.events(t)
	var got []string
	for _, e := range evs {
		switch e.Kind {
		case ClientConnect, ClientGone:
			got = append(got, string(e.Kind)+" "+extra(t, e, "client")+" "+extra(t, e, "token")+" "+extra(t, e, "clients"))
		default:
			got = append(got, string(e.Kind))
		}
	}
	want := []string{"resource_started", "resource_connect A 1@A 1", "resource_connect B 2@B 2",
		"resource_disconnect A 1@A 1", "resource_disconnect B 2@B 0", "resource_stopping"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("server log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range evs {
		if e.Kind == ClientGone && extra(t, e, "bytes") == "0" {
			t.Errorf("%s: no bytes streamed", e.Kind)
		}
	}
}

// An unknown kind or a resource operation without a server is a
// configuration error naming the field.
func TestConfigErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Kind: "teleport"}, "kind: unknown operation \"teleport\" (known: hold, resource)"},
		{Config{Kind: KindResource, Server: "server"}, "server:"},
		{Config{Kind: KindHold, Server: "10.0.0.1:1"}, "server:"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the zero configuration (hold): %v", err)
	}
	// An experiment leaves the server to the run; the agent needs it.
	if err := (Config{Kind: KindResource}).Validate(); err != nil {
		t.Errorf("resource without a server, as an experiment writes it: %v", err)
	}
	if _, err := New(Config{Kind: KindResource}, Env{}); err == nil || !strings.Contains(err.Error(), "server:") {
		t.Errorf("an agent started without the server's address: error %v, want one naming server", err)
	}
}
