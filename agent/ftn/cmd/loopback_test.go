package cmd

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tokenbed/agent/ca"
	agentdriver "tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/driver"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
)

func freePort(t *testing.T) int {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestLoopback runs three servers on loopback sockets and the CLI client
// against them: acquire, set-data, get-data, status, release, each
// answered, and the client's history in the log.
func TestLoopback(t *testing.T) {
	dir := t.TempDir()
	if err := ca.Init(dir); err != nil {
		t.Fatal(err)
	}
	names := []string{"s0", "s1", "s2", "c0"}
	for _, n := range names {
		if err := ca.Issue(dir, n); err != nil {
			t.Fatal(err)
		}
	}
	addr := map[string]string{}
	for _, n := range names {
		addr[n] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	var servers strings.Builder
	for _, n := range names[:3] {
		fmt.Fprintf(&servers, "  - {name: %s, addr: %q}\n", n, addr[n])
	}
	write := func(n, role, extra string) string {
		p := filepath.Join(dir, n+".yaml")
		y := fmt.Sprintf("name: %s\nrole: %s\nlisten: %q\nca: %s\ncredentials: %s\nlog: %s\nseed: 7\ntick: 10ms\nservers:\n%s%s",
			n, role, addr[n], filepath.Join(dir, "ca.crt"), dir, filepath.Join(dir, n+".jsonl"), servers.String(), extra)
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, n := range names[:3] {
		cfg, err := ftnconfig.Load(write(n, "server", ""))
		if err != nil {
			t.Fatal(err)
		}
		h, err := cfg.Host(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		w, f, err := eventlog.Create(cfg.Log, n)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		u, err := agentdriver.ListenUDP(mustAddr(addr[n]))
		if err != nil {
			t.Fatal(err)
		}
		d := &driver.Driver{H: h, T: u, Log: w}
		wg.Add(1)
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	var out, errb bytes.Buffer
	code := Main([]string{"client", "--config", write("c0", "client", ""),
		"acquire", "a", "--exclusive", "set-data", "a", "hello", "get-data", "a", "status", "release", "a", "status"}, &out, &errb)
	if code != 0 {
		t.Fatalf("client exit %d: %s\n%s", code, out.String(), errb.String())
	}
	want := []string{`acquire a x: ok fence=`, `set-data a "hello": ok`, `get-data a: ok data="hello"`, "status: holds [a x fence=", "release a: ok", "status: holds []"}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	evs, err := eventlog.ReadFile(filepath.Join(dir, "c0.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if _, ok, err := ftnlog.Parse(e); ok && err == nil {
			n++
		}
	}
	if n != 8 {
		t.Errorf("client log: %d history records, want 8 (4 invocations, 4 completions)", n)
	}
}

func mustAddr(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
