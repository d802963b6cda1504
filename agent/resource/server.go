package resource

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"tokenbed/agent/eventlog"
)

// The server's event kinds. Each carries, beside the envelope: client
// (the agent's name), token, addr (the client's address) and clients (how
// many clients are connected after the event); a disconnect also carries
// bytes (sent to that client).
const (
	ServerStarted  eventlog.Kind = "resource_started"
	ClientConnect  eventlog.Kind = "resource_connect"
	ClientGone     eventlog.Kind = "resource_disconnect"
	ServerStopping eventlog.Kind = "resource_stopping"
)

// ServerName is the server's name in its log and in a run (instance
// ServerName.rN in replica N > 0, log logs/INSTANCE.jsonl).
const ServerName = "resource-server"

// Server is the shared resource: it streams data to every connected
// client at Rate and logs each client's connect and disconnect.
type Server struct {
	L   net.Listener
	Log *eventlog.Writer
	// Rate is the bytes per second streamed to each client (wall time);
	// 0 means DefaultRate. Blocks of BlockSize bytes.
	Rate int
	// HelloTimeout bounds the wait for a client's first line.
	HelloTimeout time.Duration

	mu      sync.Mutex
	clients int
	wg      sync.WaitGroup
}

// DefaultRate is 650 KB/s, a subscriber's share of the stream in seed
// 003 §1. Only the connections' times matter to the analysis; the rate
// keeps a download cheap on a shared machine.
const DefaultRate = 650_000

// BlockSize is the unit of streaming.
const BlockSize = 4096

// Serve accepts clients until ctx is done.
func (s *Server) Serve(ctx context.Context) error {
	if s.Rate <= 0 {
		s.Rate = DefaultRate
	}
	if s.HelloTimeout <= 0 {
		s.HelloTimeout = 5 * time.Second
	}
	stop := context.AfterFunc(ctx, func() { s.L.Close() })
	defer stop()
	if err := s.Log.Write(s.event(ServerStarted, map[string]any{"addr": s.L.Addr().String(), "rate": s.Rate})); err != nil {
		return err
	}
	var err error
	for {
		var c net.Conn
		c, err = s.L.Accept()
		if err != nil {
			break
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(ctx, c)
		}()
	}
	s.wg.Wait()
	if ctx.Err() != nil {
		err = nil
	}
	reason := "stopped"
	if err != nil {
		reason = err.Error()
	}
	return errors.Join(err, s.Log.Write(s.event(ServerStopping, map[string]any{"reason": reason})))
}

func (s *Server) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(s.HelloTimeout))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return // not a client: nothing connected, nothing to log
	}
	c.SetReadDeadline(time.Time{})
	name, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	s.mu.Lock()
	s.clients++
	s.Log.Write(s.event(ClientConnect, map[string]any{"client": name, "token": token, "addr": c.RemoteAddr().String(), "clients": s.clients}))
	s.mu.Unlock()

	// The client ends the download by closing: the read sees it at once,
	// where a write would only fail at the next block.
	gone := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := r.Read(buf); err != nil {
				close(gone)
				return
			}
		}
	}()
	block := make([]byte, BlockSize)
	every := time.Duration(float64(time.Second) * BlockSize / float64(s.Rate))
	t := time.NewTicker(every)
	defer t.Stop()
	sent := 0
	for done := false; !done; {
		if n, err := c.Write(block); err != nil {
			<-gone
			done = true
		} else {
			sent += n
		}
		select {
		case <-gone:
			done = true
		case <-ctx.Done():
			c.Close()
			<-gone
			done = true
		case <-t.C:
		}
	}
	s.mu.Lock()
	s.clients--
	s.Log.Write(s.event(ClientGone, map[string]any{"client": name, "token": token, "addr": c.RemoteAddr().String(), "clients": s.clients, "bytes": sent}))
	s.mu.Unlock()
}

// event builds a server event with fields beside the envelope.
func (s *Server) event(k eventlog.Kind, fields map[string]any) eventlog.Event {
	ev := eventlog.Event{Kind: k, Extra: map[string]json.RawMessage{}}
	for key, v := range fields {
		b, _ := json.Marshal(v)
		ev.Extra[key] = b
	}
	return ev
}
