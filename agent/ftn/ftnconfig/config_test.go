package ftnconfig

import (
	"strings"
	"testing"
	"time"
)

const serverFile = `name: s0
role: server
listen: 10.0.0.1:7000
ca: ca/ca.crt
credentials: ca
log: s0.jsonl
servers:
  - {name: s0, addr: "10.0.0.1:7000"}
  - {name: s1, addr: "10.0.0.2:7000"}
`

const clientFile = `name: c0
role: client
listen: 10.0.1.1:7000
ca: ca/ca.crt
credentials: ca
log: c0.jsonl
servers:
  - {name: s0, addr: "10.0.0.1:7000"}
workload: {names: 8, shared: 0.3, rate: 2, hold: 200ms, data: true}
`

// A valid file decodes, with the defaults filled in.
func TestDecodeDefaults(t *testing.T) {
	c, err := Decode("s0.yaml", []byte(serverFile))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tick != 50*time.Millisecond || c.TimeScale != 1 || len(c.Servers) != 2 || c.Role != RoleServer {
		t.Errorf("defaults: %+v", c)
	}
	c, err = Decode("c0.yaml", []byte(clientFile))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Workload; w == nil || w.Names != 8 || w.Hold != 200*time.Millisecond || !w.Data {
		t.Errorf("workload: %+v", c.Workload)
	}
}

// Every invalid field is an error naming the file, the line and the
// field, all reported at once; one table row per rule.
func TestEveryErrorNamesFileLineAndField(t *testing.T) {
	for _, c := range []struct {
		name string
		file string // appended to base
		base string
		want []string
	}{
		{"unknown field", "bogus: 1\n", serverFile, []string{"s.yaml:10:1: unknown field \"bogus\""}},
		{"bad tick", "tick: -5ms\n", serverFile, []string{"s.yaml:10:7: tick: must be positive"}},
		{"unparsable tick", "tick: soon\n", serverFile, []string{"s.yaml:10:7: tick:"}},
		{"bad time scale", "time_scale: -1\n", serverFile, []string{"s.yaml:10:13: time_scale: must be positive"}},
		{"negative server ticks", "server: {heartbeat_ticks: -1, election_ticks: -2, client_down_ticks: -3, retry_ticks: -4}\n", serverFile,
			[]string{"s.yaml:10:27: server.heartbeat_ticks: -1 < 0", "s.yaml:10:47: server.election_ticks: -2 < 0",
				"s.yaml:10:70: server.client_down_ticks: -3 < 0", "s.yaml:10:87: server.retry_ticks: -4 < 0"}},
		{"lease not below the DOWN timeout", "server:\n  lease_ticks: 10\n  server_down_ticks: 10\n", serverFile,
			[]string{"s.yaml:11:16: server.lease_ticks: 10 must be below server_down_ticks 10"}},
		{"heartbeat not below the lease", "server:\n  heartbeat_ticks: 6\n", serverFile,
			[]string{"s.yaml:11:20: server.heartbeat_ticks: 6 must be below lease_ticks 6"}},
		{"negative client ticks", "client: {heartbeat_ticks: -1, retry_ticks: -2, leader_silent_ticks: -3}\n", clientFile,
			[]string{"s.yaml:10:27: client.heartbeat_ticks: -1 < 0", "s.yaml:10:44: client.retry_ticks: -2 < 0", "s.yaml:10:69: client.leader_silent_ticks: -3 < 0"}},
		{"workload on a server", "workload: {names: 1, rate: 1}\n", serverFile, []string{"s.yaml:10:11: workload: only a client runs a workload"}},
	} {
		_, err := Decode("s.yaml", []byte(c.base+c.file))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: no %q in:\n%v", c.name, w, err)
			}
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != len(c.want) {
			t.Errorf("%s: %d errors, want %d:\n%v", c.name, n, len(c.want), err)
		}
	}
}

// The required fields and the lists, from a file that gets them all
// wrong: each error at its own line.
func TestAllErrorsAtOnce(t *testing.T) {
	_, err := Decode("bad.yaml", []byte(`name: s9
role: leader
listen: nowhere
servers:
  - {name: "", addr: "10.0.0.1:7000"}
  - {name: s1, addr: "10.0.0.2"}
workload: {names: 0, shared: 2, rate: 0, hold: -1s}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`bad.yaml:2:7: role: "leader": want server or client`,
		"bad.yaml:3:9: listen:",
		"bad.yaml: ca: required",
		"bad.yaml: credentials: required",
		"bad.yaml: log: required",
		"bad.yaml:5:12: servers[0].name: required",
		"bad.yaml:6:22: servers[1].addr:",
		"bad.yaml:7:11: workload: only a client runs a workload",
		"bad.yaml:7:19: workload.names: must be positive",
		"bad.yaml:7:30: workload.shared: 2: want 0..1",
		"bad.yaml:7:39: workload.rate: must be positive",
		"bad.yaml:7:48: workload.hold: must not be negative",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("no %q in:\n%v", w, err)
		}
	}
	// A server must be in the shared list (001 "Configuration").
	_, err = Decode("s.yaml", []byte(strings.Replace(serverFile, "name: s0\n", "name: s7\n", 1)))
	if err == nil || !strings.Contains(err.Error(), "s.yaml:8:3: servers: s7 is not in the list") {
		t.Errorf("a server not in the list: %v", err)
	}
	_, err = Decode("e.yaml", []byte("name: s0\n"))
	if err == nil || !strings.Contains(err.Error(), "e.yaml: servers: required: the shared server list") {
		t.Errorf("no server list: %v", err)
	}
}
