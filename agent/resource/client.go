package resource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"tokenbed/agent/eventlog"
)

// KindResource downloads from the shared resource server for as long as
// the operation runs.
const KindResource = "resource"

// DialTimeout bounds a connection attempt to the server (real time).
const DialTimeout = 2 * time.Second

// Client is the "resource" operation: on Start it connects to the server,
// sends its name and the token, and reads what the server streams until
// Finish closes the connection.
type Client struct {
	server string
	env    Env
	mu     sync.Mutex
	ops    map[string]context.CancelFunc
	wg     sync.WaitGroup
}

var _ Operation = (*Client)(nil)

func init() {
	Register(KindResource, func(c Config, env Env) (Operation, error) {
		if _, err := netip.ParseAddrPort(c.Server); err != nil {
			return nil, fmt.Errorf("server: operation resource needs the server's IP:PORT: %v", err)
		}
		return &Client{server: c.Server, env: env, ops: map[string]context.CancelFunc{}}, nil
	})
}

// Kind implements Operation.
func (c *Client) Kind() string { return KindResource }

// Start implements Operation: the download runs in its own goroutine.
func (c *Client) Start(token string) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if prev := c.ops[token]; prev != nil {
		prev() // a start without its finish (a token acquired again): end the old one
	}
	c.ops[token] = cancel
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.download(ctx, token); err != nil && ctx.Err() == nil {
			c.notice(token, err)
		}
	}()
}

// Finish implements Operation.
func (c *Client) Finish(token string) {
	c.mu.Lock()
	cancel := c.ops[token]
	delete(c.ops, token)
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Close implements Operation.
func (c *Client) Close() {
	c.mu.Lock()
	for t, cancel := range c.ops {
		cancel()
		delete(c.ops, t)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Client) download(ctx context.Context, token string) error {
	d := net.Dialer{Timeout: DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", c.server)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s %s\n", c.env.Agent, token); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, bufio.NewReader(conn))
	if err == nil {
		// The server hung up while the operation was still running.
		return errors.New("the server closed the connection")
	}
	return err
}

func (c *Client) notice(token string, err error) {
	if c.env.Log == nil {
		return
	}
	c.env.Log.Write(eventlog.Event{Kind: eventlog.AgentNotice, Reason: "operation_error", Token: token, Addr: c.server, Detail: err.Error()})
}
