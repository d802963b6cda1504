// Package ftnlog is the FTN lock service's part of the event log (seed
// 001, agent/eventlog's envelope with the fields below in Event.Extra):
// one definition read by the checker (analysis/ftn) and written by the
// drivers and the in-memory cluster, so both sides agree on it.
//
// Kinds:
//
//	ftn_invoke    a client operation starts: op, name, mode, req, data, client
//	ftn_complete  it ends: op, name, mode, req, result (ok, fail, unknown),
//	              status, fence_epoch, fence_n, data, client
//	ftn_<event>   a machine's event (msg.Event): ftn_granted, ftn_freed,
//	              ftn_leader, ftn_declare_down, ftn_reinit, ...
//
// "unknown" is Jepsen's :info: the operation may or may not have taken
// effect (the client gave up waiting, or stopped first). An invocation
// with no completion in the log (the client crashed) is unknown too.
package ftnlog

import (
	"encoding/json"
	"fmt"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/msg"
)

// Kinds of the client history.
const (
	Invoke   eventlog.Kind = "ftn_invoke"
	Complete eventlog.Kind = "ftn_complete"
	// Prefix of a machine event's kind.
	Prefix = "ftn_"
)

// Results of an operation.
const (
	OK      = "ok"
	Fail    = "fail"
	Unknown = "unknown"
)

// Op names.
var opNames = map[msg.Kind]string{msg.Acquire: "acquire", msg.Release: "release", msg.SetData: "set-data", msg.GetData: "get-data"}

// OpName is the log's name of an operation kind.
func OpName(k msg.Kind) string { return opNames[k] }

// OpKind parses an operation name.
func OpKind(s string) (msg.Kind, bool) {
	for k, n := range opNames {
		if n == s {
			return k, true
		}
	}
	return 0, false
}

// Record is one client history entry: an invocation or a completion.
type Record struct {
	Op     string `json:"op"`
	Name   string `json:"name"`
	Mode   string `json:"mode,omitempty"` // "x" or "s" (acquire)
	Req    uint64 `json:"req"`
	Client string `json:"client,omitempty"` // the client's ID (msg.IDString)
	Result string `json:"result,omitempty"` // completions
	Status string `json:"status,omitempty"` // msg.Status, or the client's own error
	Epoch  uint64 `json:"fence_epoch,omitempty"`
	N      uint64 `json:"fence_n,omitempty"`
	Data   string `json:"data,omitempty"`
}

// Fence is r's fencing number.
func (r Record) Fence() msg.Fence { return msg.Fence{Epoch: r.Epoch, Counter: r.N} }

// Event returns r as an event of kind k.
func (r Record) Event(k eventlog.Kind) eventlog.Event {
	e := eventlog.Event{Kind: k, Extra: map[string]json.RawMessage{}}
	b, _ := json.Marshal(r)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	e.Extra = m
	return e
}

// Parse reads a history record from e (ok is false for other kinds).
func Parse(e eventlog.Event) (r Record, ok bool, err error) {
	if e.Kind != Invoke && e.Kind != Complete {
		return r, false, nil
	}
	b, err := json.Marshal(e.Extra)
	if err != nil {
		return r, true, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, true, fmt.Errorf("%s seq %d: %v", e.Agent, e.Seq, err)
	}
	if _, known := OpKind(r.Op); !known {
		return r, true, fmt.Errorf("%s seq %d: op: unknown %q", e.Agent, e.Seq, r.Op)
	}
	if e.Kind == Complete && r.Result != OK && r.Result != Fail && r.Result != Unknown {
		return r, true, fmt.Errorf("%s seq %d: result: %q, want ok, fail or unknown", e.Agent, e.Seq, r.Result)
	}
	return r, true, nil
}

// Invocation is the record of invoking o as request req by client id.
func Invocation(id, req uint64, kind msg.Kind, name string, mode msg.Mode, data []byte) Record {
	r := Record{Op: OpName(kind), Name: name, Req: req, Data: string(data)}
	if id != 0 {
		r.Client = msg.IDString(id)
	}
	if kind == msg.Acquire {
		r.Mode = mode.String()
	}
	return r
}

// Completion is the record of an operation's end.
func Completion(id, req uint64, kind msg.Kind, name string, mode msg.Mode, result, status string, f msg.Fence, data []byte) Record {
	r := Invocation(id, req, kind, name, mode, nil)
	r.Result, r.Status, r.Epoch, r.N = result, status, f.Epoch, f.Counter
	if kind == msg.GetData || kind == msg.Acquire {
		r.Data = string(data)
	}
	if kind == msg.SetData {
		r.Data = ""
	}
	return r
}

// Machine returns a machine's event as a log event.
func Machine(m msg.Event) eventlog.Event {
	e := eventlog.Event{Kind: eventlog.Kind(Prefix + m.Kind), Extra: map[string]json.RawMessage{}}
	put := func(k string, v any) {
		b, _ := json.Marshal(v)
		e.Extra[k] = b
	}
	if m.Name != "" {
		put("name", m.Name)
	}
	if m.Client != 0 {
		put("client", msg.IDString(m.Client))
	}
	if m.Mode != 0 {
		put("mode", m.Mode.String())
	}
	if !m.Fence.IsZero() {
		put("fence_epoch", m.Fence.Epoch)
		put("fence_n", m.Fence.Counter)
	}
	if m.Version != 0 {
		put("gver", msg.VersionString(m.Version))
	}
	if msg.ServerKind(m.Kind) {
		put("server", m.Server)
	}
	if m.Req != 0 {
		put("req", m.Req)
	}
	if m.Status != msg.OK {
		put("status", m.Status.String())
	}
	if m.Data != nil {
		put("data", string(m.Data))
	}
	if m.Detail != "" {
		put("note", m.Detail)
	}
	return e
}
