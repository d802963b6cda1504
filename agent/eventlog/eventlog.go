// Package eventlog is the schema of the JSON-lines event log that agents and
// the harness write, and the testbed's source of truth: analysis derives
// every figure from these logs and the packet capture.
//
// One event is one JSON object on one line. A writer appends whole lines
// with a single write(2) per batch, so a log survives SIGKILL of its writer
// up to the last batch written. Every event carries two clocks:
// MonoNS (CLOCK_MONOTONIC, shared by all processes of one kernel, so events
// of different agents order correctly) and WallNS (CLOCK_REALTIME, the clock
// of the packet capture's timestamps).
//
// # One envelope for every protocol
//
// Every line starts with the envelope: agent, seq, mono_ns, wall_ns and
// kind (Envelope). The protocol's own fields sit beside it in the same flat
// object. Token passing and the harness have typed fields here (Token,
// Session, Peer, ...), written by the hand-written encoder AppendJSON on
// the pass latency's path, and read strictly: an unknown field in an event
// of a kind this package lists is an error at its file and line. An event
// of a kind this package does not list belongs to another protocol (a
// plug-in, package protocol): its fields beyond the envelope are kept raw
// in Extra, for that protocol's analysis half to decode.
package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SchemaVersion is written in agent_started and run_started events.
const SchemaVersion = 1

// Kind says what happened.
type Kind string

// Agent events.
const (
	AgentStarted  Kind = "agent_started"  // Role, Addr, Seed, TimeScale, Version
	AgentStopping Kind = "agent_stopping" // Reason: the signal or error

	PassStarted Kind = "pass_started" // sender chose Peer for Token; Session is the new session
	// Datagram events; Attempt counts sends of the same datagram from 1,
	// Cert says a certificate was piggybacked, Nonce matches the capture.
	MoveSent          Kind = "move_sent"
	MoveReceived      Kind = "move_received"
	AckSent           Kind = "ack_sent"
	AckReceived       Kind = "ack_received"
	CommitSent        Kind = "commit_sent"
	CommitReceived    Kind = "commit_received"
	EarlyStopSent     Kind = "earlystop_sent"
	EarlyStopReceived Kind = "earlystop_received"

	// PassSucceeded: the sender received a valid Ack; the token is no longer
	// its own (002 §3). PassCompleted follows when the EarlyStop arrives or
	// the Commit retries run out (Reason "earlystop" or "commit_retries"),
	// with LatencyNS from the first Move to that point (002 §3.1).
	PassSucceeded Kind = "pass_succeeded"
	PassCompleted Kind = "pass_completed"
	// PassFailed: Reason "ack_timeout" on the sender (Move retries
	// exhausted: it keeps the token) or "commit_timeout" on the receiver (Ack
	// retries exhausted: it considers that the sender still holds it).
	PassFailed Kind = "pass_failed"

	TokenAcquired    Kind = "token_acquired"    // Reason "commit", "generated" or "join"; ReturnNS since the last hit
	TokenReleased    Kind = "token_released"    // Reason "passed", "discarded" or "stopping"
	TokenRegenerated Kind = "token_regenerated" // loss detection (002 §3.2): a new token, Detail says why
	TokenDiscarded   Kind = "token_discarded"   // Reason "sandwich": removal of a spurious token (002 §3.2)

	// OpStarted and OpFinished bracket one execution of the protected
	// operation A of the Wandering Token (seed 003 Fig. 1 lines 24 and 31;
	// 004 Fig. 2) or of the uncoordinated baseline (003 §3, 004 §2). Token
	// is the token that enabled it (empty for the baseline); Reason says
	// what enabled it ("token", "generated", "periodic"); on OpFinished,
	// Reason "done" or "stopping" (the agent stopped during it). The
	// driver may hook a real operation to them; analysis measures
	// concurrency and inter-arrival times from them.
	OpStarted  Kind = "op_started"
	OpFinished Kind = "op_finished"

	DatagramRejected Kind = "datagram_rejected" // Reason says why; no reply was sent (002 §3.1)
	// RejectionsSummary: Counts holds, per reason, the rejected datagrams
	// not logged one by one (a flood is logged as a bounded sample) since
	// the previous summary. Every rejection is either a datagram_rejected
	// event or counted in exactly one summary.
	RejectionsSummary Kind = "rejections_summary"
	KeyCached         Kind = "key_cached" // Peer's certificate verified against the CA
	PeerAdded         Kind = "peer_added"
	PeerRemoved       Kind = "peer_removed"
	AgentNotice       Kind = "agent_notice" // an internal error the agent survived; Reason and Detail say what

	// Accepted but unusual: logged like rejections, a bounded sample and
	// exact counts (UnusualSummary), since a certified member can cause
	// them at will.
	//
	// TokenIntroduced: a Move opened a session for a token this agent
	// had never seen (a join, a regeneration elsewhere, 002 §3.2); Peer
	// is its sender.
	TokenIntroduced Kind = "token_introduced"
	// TargetAdded and TargetDropped: Peer became, or stopped being, a
	// pass target (a member that has shown it is alive); Reason says why:
	// "answered", "vouched" (a configured member relayed its entry),
	// "unanswered" (its Moves went unanswered).
	TargetAdded   Kind = "target_added"
	TargetDropped Kind = "target_dropped"
	// UnusualSummary: Counts holds, per "kind:reason", the unusual events
	// not logged one by one since the previous summary.
	UnusualSummary Kind = "unusual_summary"
)

// Harness events, written by the harness on the same clocks.
const (
	RunStarted    Kind = "run_started"  // Detail: experiment name; Seed
	RunFinished   Kind = "run_finished" // Reason: "ok", "error", "interrupted"
	LinkProfile   Kind = "link_profile" // Link, Profile: a profile applied or changed
	OutageStart   Kind = "outage_start" // Link, Reason "loss" or "down"
	OutageEnd     Kind = "outage_end"   // Link
	AgentCrash    Kind = "agent_crash"  // SIGKILL of Agent (the harness writes Agent)
	AgentRestart  Kind = "agent_restart"
	AgentJoin     Kind = "agent_join"
	AgentLeave    Kind = "agent_leave"
	AgentExit     Kind = "agent_exit" // the process ended; Detail holds its exit status
	HarnessNotice Kind = "harness_notice"
)

// Event is one line of an event log. Zero-valued optional fields are omitted.
type Event struct {
	Agent  string `json:"agent"`   // agent name, or "harness"
	Seq    uint64 `json:"seq"`     // per-writer sequence number from 1: a gap is a lost line
	MonoNS int64  `json:"mono_ns"` // CLOCK_MONOTONIC, ns
	WallNS int64  `json:"wall_ns"` // CLOCK_REALTIME, ns since the Unix epoch
	Kind   Kind   `json:"kind"`

	Token   string `json:"token,omitempty"`   // token id, "GEN@ORIGIN"
	Session uint64 `json:"session,omitempty"` // session id of the passing operation
	Peer    string `json:"peer,omitempty"`    // the other member's name
	Addr    string `json:"addr,omitempty"`    // an address: the peer's, or the agent's own in agent_started
	Reason  string `json:"reason,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Cert    bool   `json:"cert,omitempty"`
	Nonce   uint64 `json:"nonce,omitempty"`

	LatencyNS int64 `json:"latency_ns,omitempty"` // pass_completed
	ReturnNS  int64 `json:"return_ns,omitempty"`  // token_acquired
	// LocalNS is the agent's own clock reading (ns since the Unix epoch)
	// at the step that logged the event, when its clock is not the
	// reference (a clock offset or drift, agent/clock): what its rules
	// read, while MonoNS and WallNS stay the reference time. SetLocal.
	LocalNS int64 `json:"local_ns,omitempty"`

	Role      string  `json:"role,omitempty"`
	Seed      uint64  `json:"seed,omitempty"`
	TimeScale float64 `json:"time_scale,omitempty"`
	Version   int     `json:"version,omitempty"`

	Link    string `json:"link,omitempty"`    // "A>B": the direction A to B
	Profile string `json:"profile,omitempty"` // netem profile in tc syntax
	Detail  string `json:"detail,omitempty"`

	Counts map[string]uint64 `json:"counts,omitempty"` // rejections_summary

	// Extra holds the fields of another protocol's event, flat beside the
	// envelope, each a JSON value, written after the typed fields in key
	// order. Keys must not be the typed fields' names.
	Extra map[string]json.RawMessage `json:"-"`
}

// Envelope is what every event of every protocol carries.
type Envelope struct {
	Agent  string
	Seq    uint64
	MonoNS int64
	WallNS int64
	Kind   Kind
}

// Envelope returns e's envelope.
func (e *Event) Envelope() Envelope {
	return Envelope{Agent: e.Agent, Seq: e.Seq, MonoNS: e.MonoNS, WallNS: e.WallNS, Kind: e.Kind}
}

// known lists the kinds whose fields are typed in Event.
var known = map[Kind]bool{}

func init() {
	for _, k := range []Kind{AgentStarted, AgentStopping, PassStarted, MoveSent, MoveReceived, AckSent, AckReceived,
		CommitSent, CommitReceived, EarlyStopSent, EarlyStopReceived, PassSucceeded, PassCompleted, PassFailed,
		TokenAcquired, TokenReleased, TokenRegenerated, TokenDiscarded, OpStarted, OpFinished, DatagramRejected, RejectionsSummary,
		KeyCached, PeerAdded, PeerRemoved, AgentNotice, TokenIntroduced, TargetAdded, TargetDropped, UnusualSummary,
		RunStarted, RunFinished, LinkProfile, OutageStart, OutageEnd, AgentCrash, AgentRestart, AgentJoin,
		AgentLeave, AgentExit, HarnessNotice} {
		known[k] = true
	}
}

// Known reports whether k's fields are typed in Event (token passing and
// the harness); other kinds are other protocols' (Extra).
func Known(k Kind) bool { return known[k] }

// AppendJSON appends e as one JSON object, exactly as encoding/json would
// marshal it (same field order and omissions), without reflection: the
// agent logs several events per datagram, on the pass latency's path.
func (e *Event) AppendJSON(b []byte) []byte {
	str := func(name, v string, omit bool) {
		if omit && v == "" {
			return
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = appendString(b, v)
	}
	i64 := func(name string, v int64, omit bool) {
		if omit && v == 0 {
			return
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, v, 10)
	}
	u64 := func(name string, v uint64) {
		if v == 0 {
			return
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = strconv.AppendUint(b, v, 10)
	}
	b = append(b, `{"agent":`...)
	b = appendString(b, e.Agent)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	i64("mono_ns", e.MonoNS, false)
	i64("wall_ns", e.WallNS, false)
	str("kind", string(e.Kind), false)
	str("token", e.Token, true)
	u64("session", e.Session)
	str("peer", e.Peer, true)
	str("addr", e.Addr, true)
	str("reason", e.Reason, true)
	i64("attempt", int64(e.Attempt), true)
	if e.Cert {
		b = append(b, `,"cert":true`...)
	}
	u64("nonce", e.Nonce)
	i64("latency_ns", e.LatencyNS, true)
	i64("return_ns", e.ReturnNS, true)
	i64("local_ns", e.LocalNS, true)
	str("role", e.Role, true)
	u64("seed", e.Seed)
	if e.TimeScale != 0 {
		b = append(b, `,"time_scale":`...)
		jb, _ := json.Marshal(e.TimeScale)
		b = append(b, jb...)
	}
	i64("version", int64(e.Version), true)
	str("link", e.Link, true)
	str("profile", e.Profile, true)
	str("detail", e.Detail, true)
	if len(e.Counts) > 0 {
		keys := make([]string, 0, len(e.Counts))
		for k := range e.Counts {
			keys = append(keys, k)
		}
		slices.Sort(keys) // as encoding/json orders map keys
		b = append(b, `,"counts":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = strconv.AppendUint(b, e.Counts[k], 10)
		}
		b = append(b, '}')
	}
	if len(e.Extra) > 0 {
		keys := make([]string, 0, len(e.Extra))
		for k := range e.Extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = append(b, ',')
			b = appendString(b, k)
			b = append(b, ':')
			b = append(b, e.Extra[k]...)
		}
	}
	return append(b, '}')
}

// appendString appends s as a JSON string; plain ASCII, the common case,
// is copied, anything else goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Now reads both clocks.
func Now() (mono, wall int64) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano(), time.Now().UnixNano()
}

// Writer appends events to a log. It is safe for concurrent use.
type Writer struct {
	// monoBase and timeBase relate Go's monotonic clock to an absolute
	// CLOCK_MONOTONIC reading (both are CLOCK_MONOTONIC), so WriteAt can
	// stamp events from a time.Time without another clock read.
	monoBase int64
	timeBase time.Time
	mu       sync.Mutex
	w        io.Writer
	agent    string
	seq      uint64
	buf      []byte
}

// NewWriter returns a writer that stamps events with agent's name. Each
// call to Write issues one Write on w, so with an *os.File every batch is
// one write(2) and is in the kernel before Write returns.
func NewWriter(w io.Writer, agent string) *Writer {
	monoBase, timeBase := pairClocks()
	return &Writer{w: w, agent: agent, monoBase: monoBase, timeBase: timeBase}
}

// pairClocks reads time.Now between two CLOCK_MONOTONIC readings and
// takes their midpoint: the pairing is then off by at most half the gap,
// ~100 ns on an idle machine. A process preempted between the readings
// gets a gap of a scheduler's time slice: 150 agents starting at once on
// 2 CPUs were found with their logs' mono_ns 33 ms off their wall_ns, so
// that a token passed on was logged as held by two agents at once (issue
// 16). Hence the narrowest of several tries.
func pairClocks() (monoBase int64, timeBase time.Time) {
	best := int64(-1)
	for i := 0; i < 50 && best != 0 && (best < 0 || best > 2000); i++ {
		m1, _ := Now()
		tb := time.Now()
		m2, _ := Now()
		if gap := m2 - m1; best < 0 || gap < best {
			best, monoBase, timeBase = gap, m1+gap/2, tb
		}
	}
	return monoBase, timeBase
}

// NewWriterAt returns a writer whose WriteAt stamps events on clocks that
// are not the kernel's: time t gets CLOCK_MONOTONIC monoBase +
// (t − timeBase). The simulator (harness/sim) writes its processes' logs
// with it in virtual time; Write, which reads the real clocks, must not be
// used on such a writer.
func NewWriterAt(w io.Writer, agent string, monoBase int64, timeBase time.Time) *Writer {
	return &Writer{w: w, agent: agent, monoBase: monoBase, timeBase: timeBase}
}

// Create opens path for appending (0644) and returns a writer on it.
func Create(path, agent string) (*Writer, *os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return NewWriter(f, agent), f, nil
}

// Write stamps the events that have no timestamp with the current clocks,
// numbers them, and writes them in one call.
func (w *Writer) Write(evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	mono, wall := Now()
	return w.write(mono, wall, evs)
}

// SetLocal records local, the agent's clock reading at a step whose
// reference time is ref, in each of evs, when the two differ: an agent on
// the reference clock logs no local_ns.
func SetLocal(evs []Event, ref, local time.Time) {
	if local.Equal(ref) {
		return
	}
	for i := range evs {
		evs[i].LocalNS = local.UnixNano()
	}
}

// WriteAt is Write with the events stamped at t, a time.Time carrying a
// monotonic reading (from time.Now).
func (w *Writer) WriteAt(t time.Time, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	return w.write(w.monoBase+t.Sub(w.timeBase).Nanoseconds(), t.UnixNano(), evs)
}

func (w *Writer) write(mono, wall int64, evs []Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = w.buf[:0]
	for i := range evs {
		e := &evs[i]
		if e.Agent == "" {
			e.Agent = w.agent
		}
		if e.MonoNS == 0 {
			e.MonoNS, e.WallNS = mono, wall
		}
		w.seq++
		e.Seq = w.seq
		w.buf = e.AppendJSON(w.buf)
		w.buf = append(w.buf, '\n')
	}
	_, err := w.w.Write(w.buf)
	return err
}

// ParseError names the file and line of a malformed event.
type ParseError struct {
	File string
	Line int
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// Read calls fn for every event of r, in order. name is used in errors.
// Unknown fields are errors, so a log that does not match this schema is
// reported at its first bad line. A final line without its newline (a
// writer killed mid-write, which Write avoids but a full disk does not)
// is reported as truncated.
func Read(r io.Reader, name string, fn func(Event) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var long []byte
	for line := 1; ; line++ {
		// The line in the reader's buffer, copied only when longer: the
		// decoders keep nothing of it.
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], b...)
			for err == bufio.ErrBufferFull {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if len(b) > 0 {
			if b[len(b)-1] != '\n' {
				return &ParseError{File: name, Line: line, Err: fmt.Errorf("truncated line %q", b)}
			}
			e, derr := decode(b)
			if derr != nil {
				return &ParseError{File: name, Line: line, Err: derr}
			}
			if e.Kind == "" || e.Agent == "" {
				return &ParseError{File: name, Line: line, Err: fmt.Errorf("event without kind or agent")}
			}
			if ferr := fn(e); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &ParseError{File: name, Line: line, Err: err}
		}
	}
}

// decode decodes one line: strictly for the kinds this package lists,
// with the fields beyond the envelope in Extra for the others.
func decode(b []byte) (Event, error) {
	if e, ok := decodeFast(b); ok {
		return e, nil
	}
	return decodeJSON(b)
}

// decodeJSON is decode through encoding/json: the reference that
// decodeFast must agree with.
func decodeJSON(b []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&e)
	if err == nil || known[e.Kind] {
		return e, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return e, err
	}
	var env struct {
		Agent  string `json:"agent"`
		Seq    uint64 `json:"seq"`
		MonoNS int64  `json:"mono_ns"`
		WallNS int64  `json:"wall_ns"`
		Kind   Kind   `json:"kind"`
	}
	if jerr := json.Unmarshal(b, &env); jerr != nil || known[env.Kind] {
		return e, err
	}
	e = Event{Agent: env.Agent, Seq: env.Seq, MonoNS: env.MonoNS, WallNS: env.WallNS, Kind: env.Kind, Extra: map[string]json.RawMessage{}}
	for k, v := range m {
		switch k {
		case "agent", "seq", "mono_ns", "wall_ns", "kind":
		default:
			e.Extra[k] = v
		}
	}
	return e, nil
}

// ReadFile reads every event of the log at path.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var evs []Event
	err = Read(f, path, func(e Event) error { evs = append(evs, e); return nil })
	return evs, err
}
