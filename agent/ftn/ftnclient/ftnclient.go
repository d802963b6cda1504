// Package ftnclient is the Go API of the FTN lock service (seed 001): a
// client process's machine, host and driver behind blocking calls.
//
//	c, err := ftnclient.Start(ctx, cfg) // cfg: an ftnconfig client file
//	f, err := c.Acquire(ctx, "disk7", msg.Exclusive)
//	... use the resource, presenting fence f ...
//	err = c.Release(ctx, "disk7")
//	c.Close()
//
// Tokens are sticky: they stay held until released, or until the client
// closes or is dropped for silence (then every call fails with
// ErrIDInvalid). Calls wait as long as their context allows; a call whose
// context ends first has an unknown outcome (the request may still be
// granted: the client keeps repeating it, 001 "Communication").
package ftnclient

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	agentdriver "tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/driver"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/msg"
)

// ErrIDInvalid: the client is no longer on the client list (001 "When a
// Client Crashes").
var ErrIDInvalid = errors.New("ftn: client ID invalid")

// Client is a running FTN client.
type Client struct {
	invoke chan client.Op
	cancel context.CancelFunc
	done   chan error
	file   *os.File // the log, when Start opened it

	mu      sync.Mutex
	waiting map[string]chan client.Result // by token name: one operation per name at a time
}

// Start starts a client from its configuration, logging to the file it
// names.
func Start(ctx context.Context, cfg *ftnconfig.Config) (*Client, error) {
	if cfg.Log == "-" {
		return nil, errors.New("ftnclient: log \"-\": use StartWith")
	}
	w, f, err := eventlog.Create(cfg.Log, cfg.Name)
	if err != nil {
		return nil, err
	}
	c, err := StartWith(ctx, cfg, w)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.file = f
	return c, nil
}

// StartWith starts a client logging to log.
func StartWith(ctx context.Context, cfg *ftnconfig.Config, log *eventlog.Writer) (*Client, error) {
	if cfg.Role != ftnconfig.RoleClient {
		return nil, fmt.Errorf("ftnclient: role %q, want client", cfg.Role)
	}
	h, err := cfg.Host(time.Now())
	if err != nil {
		return nil, err
	}
	u, err := agentdriver.ListenUDP(netip.MustParseAddrPort(cfg.Listen))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Client{invoke: make(chan client.Op), cancel: cancel, done: make(chan error, 1), waiting: map[string]chan client.Result{}}
	d := &driver.Driver{H: h, T: u, Log: log, Invoke: c.invoke, OnDone: c.complete}
	go func() { c.done <- d.Run(ctx) }()
	return c, nil
}

func (c *Client) complete(r client.Result) {
	c.mu.Lock()
	ch := c.waiting[r.Op.Name]
	delete(c.waiting, r.Op.Name)
	c.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// do runs one operation and waits for its result.
func (c *Client) do(ctx context.Context, op client.Op) (client.Result, error) {
	ch := make(chan client.Result, 1)
	c.mu.Lock()
	if c.waiting[op.Name] != nil {
		c.mu.Unlock()
		return client.Result{}, fmt.Errorf("ftn: %s: an operation on it is outstanding", op.Name)
	}
	c.waiting[op.Name] = ch
	c.mu.Unlock()
	select {
	case c.invoke <- op:
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.waiting, op.Name)
		c.mu.Unlock()
		return client.Result{}, ctx.Err()
	}
	select {
	case r := <-ch:
		switch {
		case r.Status == msg.IDInvalid:
			return r, ErrIDInvalid
		case r.Err != "":
			return r, fmt.Errorf("ftn: %s: %s", op, r.Err)
		case r.Status != msg.OK:
			return r, fmt.Errorf("ftn: %s: %s", op, r.Status)
		}
		return r, nil
	case <-ctx.Done():
		return client.Result{}, ctx.Err()
	}
}

// Acquire reserves name (exclusively or shared) and returns the grant's
// fencing number (see agent/ftn/server for its guarantee).
func (c *Client) Acquire(ctx context.Context, name string, mode msg.Mode) (msg.Fence, error) {
	r, err := c.do(ctx, client.Op{Kind: msg.Acquire, Name: name, Mode: mode})
	return r.Fence, err
}

// Release releases name.
func (c *Client) Release(ctx context.Context, name string) error {
	_, err := c.do(ctx, client.Op{Kind: msg.Release, Name: name})
	return err
}

// SetData sets the data of a token the client holds.
func (c *Client) SetData(ctx context.Context, name string, data []byte) error {
	_, err := c.do(ctx, client.Op{Kind: msg.SetData, Name: name, Data: data})
	return err
}

// GetData reads the data of a token the client holds.
func (c *Client) GetData(ctx context.Context, name string) ([]byte, error) {
	r, err := c.do(ctx, client.Op{Kind: msg.GetData, Name: name})
	return r.Data, err
}

// Close tells the leader the client closes down (its tokens are freed)
// and stops it.
func (c *Client) Close() error {
	c.cancel()
	err := <-c.done
	if c.file != nil {
		c.file.Close()
	}
	return err
}
