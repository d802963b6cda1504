package msg

import (
	"fmt"
	"strings"
)

// Kind names a message.
type Kind uint8

// Server to server.
const (
	_ Kind = iota
	// VoteReq asks for a vote in Term; Version is the candidate's latest
	// global state, which a voter must not have newer (the new leader
	// inherits the client list and the servers' states).
	VoteReq
	VoteResp // Granted in Term
	// StateMsg is the leader's broadcast of Global, also its heartbeat
	// (001 "Global state").
	StateMsg
	// Heartbeat is a server's heartbeat to the leader, declaring its
	// State and incarnation Inc (001 "Server Initialization").
	Heartbeat
	// Transfer hands the tokens in Tokens to a BOOTING server whose
	// incarnation is Inc, at Version; the sender serves them no more.
	Transfer
	TransferAck // the receiver took Transfer Version
)

// Client to server.
const (
	Register        Kind = iota + 16 // Nonce identifies the attempt; repeats get the same ID
	ClientHeartbeat                  // to the leader
	Close                            // the client closes down
	Acquire                          // Name, Mode
	Release                          // Name
	SetData                          // Name, Data
	GetData                          // Name
	QueryReply                       // Version of the query; Holds; Req: the newest request number issued; Marks: the requests outstanding
)

// Server to client.
const (
	Registered   Kind = iota + 32 // Client, RegVersion, Global
	Redirect                      // Server: the leader as the sender knows it (-1: none)
	HeartbeatAck                  // Global
	Query                         // Global (001 "Server Initialization"); Server, Inc: the querier
	Reply                         // Client, RegVersion, Req: the request answered; Status, Fence, Data
)

var kindNames = map[Kind]string{
	VoteReq: "VoteReq", VoteResp: "VoteResp", StateMsg: "State", Heartbeat: "Heartbeat",
	Transfer: "Transfer", TransferAck: "TransferAck",
	Register: "Register", ClientHeartbeat: "ClientHeartbeat", Close: "Close",
	Acquire: "Acquire", Release: "Release", SetData: "SetData", GetData: "GetData",
	QueryReply: "QueryReply",
	Registered: "Registered", Redirect: "Redirect", HeartbeatAck: "HeartbeatAck",
	Query: "Query", Reply: "Reply",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { _, ok := kindNames[k]; return ok }

// FromServer reports whether only a server may send k.
func (k Kind) FromServer() bool { return k < Register || k >= Registered }

// Status is a reply's outcome.
type Status uint8

const (
	OK Status = iota
	// IDInvalid: the client is not (any more) on the client list
	// (001 "When a Client Crashes").
	IDInvalid
	// NotHolder: set-data or get-data by a client not holding the token.
	NotHolder
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case IDInvalid:
		return "id-invalid"
	case NotHolder:
		return "not-holder"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Msg is one message. Which fields are set depends on Kind. Sender
// identity is not in Msg: the authenticated envelope gives it (Ed25519
// signature under a certificate of the run's CA).
type Msg struct {
	Kind Kind

	Term    uint64 // VoteReq, VoteResp, StateMsg, Heartbeat; HeartbeatAck, ClientHeartbeat: with Beat
	Version uint64 // global state version the sender knows (or of a query, transfer); Heartbeat: the version the server acknowledges holding
	// Commit (StateMsg): the highest version of the leader's term that a
	// majority of servers has acknowledged holding.
	Commit  uint64 `json:",omitempty"`
	Server  int    // Query: the querier; Redirect: the leader (-1: none)
	Inc     uint64 // Heartbeat, Reply, Query: the sending server's incarnation; Transfer: the receiver's
	Granted bool   // VoteResp
	Pre     bool   // VoteReq, VoteResp: a pre-vote (no term changes)
	State   State  // Heartbeat
	Global  *Global

	Client     uint64 // client requests; Registered; Reply: the registration it answers
	RegVersion uint64 // client requests; Registered; Reply: with Client, the registration it answers
	Nonce      uint64 // Register
	Req        uint64 // client requests and their Reply; QueryReply: the client's newest request number
	Name       string
	Mode       Mode
	Data       []byte
	Fence      Fence
	Status     Status

	Tokens []TokenState // Transfer
	Holds  []Hold       // QueryReply
	Marks  []ReqMark    `json:",omitempty"` // QueryReply: the client's outstanding requests

	// Beat proves a client heartbeat fresh. HeartbeatAck: the leader's
	// tick when it acknowledged, with its Term; ClientHeartbeat: the Term
	// and Beat of the newest acknowledgement the client received, so a
	// replayed heartbeat counts from when its client was last heard of,
	// not from when the copy arrives (agent/ftn/server "Roles").
	Beat uint64 `json:",omitempty"`
}

// String prints m compactly for traces.
func (m Msg) String() string {
	var b strings.Builder
	b.WriteString(m.Kind.String())
	f := func(format string, a ...any) { b.WriteByte(' '); fmt.Fprintf(&b, format, a...) }
	switch m.Kind {
	case VoteReq:
		f("term=%d v=%s pre=%v", m.Term, VersionString(m.Version), m.Pre)
	case VoteResp:
		f("term=%d granted=%v pre=%v", m.Term, m.Granted, m.Pre)
	case StateMsg:
		f("%s commit=%s", m.Global, VersionString(m.Commit))
	case HeartbeatAck:
		f("%s", m.Global)
	case Heartbeat:
		f("term=%d %s/%d v=%s", m.Term, m.State, m.Inc, VersionString(m.Version))
	case Transfer:
		f("v=%s inc=%d", VersionString(m.Version), m.Inc)
		for _, t := range m.Tokens {
			f("%s", tokenString(t))
		}
	case TransferAck:
		f("v=%s", VersionString(m.Version))
	case Register:
		f("nonce=%d", m.Nonce)
	case ClientHeartbeat, Close:
		f("%s", IDString(m.Client))
	case Acquire:
		f("%s req=%d %s %s", IDString(m.Client), m.Req, m.Name, m.Mode)
	case Release, GetData:
		f("%s req=%d %s", IDString(m.Client), m.Req, m.Name)
	case SetData:
		f("%s req=%d %s %q", IDString(m.Client), m.Req, m.Name, m.Data)
	case QueryReply:
		f("%s v=%s", IDString(m.Client), VersionString(m.Version))
		if m.Req != 0 {
			f("req=%d", m.Req)
		}
		for _, h := range m.Holds {
			f("%s:%s:%s", h.Name, h.Mode, h.Fence)
		}
		for _, k := range m.Marks {
			f("pending=%s:%d", k.Name, k.Req)
		}
	case Registered:
		f("%s reg=%s", IDString(m.Client), VersionString(m.RegVersion))
	case Redirect:
		f("leader=%d", m.Server)
	case Query:
		f("from=%d/%d %s", m.Server, m.Inc, m.Global)
	case Reply:
		f("req=%d %s %s", m.Req, m.Name, m.Status)
		if !m.Fence.IsZero() {
			f("fence=%s", m.Fence)
		}
		if m.Data != nil {
			f("data=%q", m.Data)
		}
	}
	return b.String()
}

func tokenString(t TokenState) string {
	var b strings.Builder
	b.WriteString(t.Name)
	b.WriteByte('{')
	for i, h := range t.Holders {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", IDString(h.Client), h.Mode)
	}
	if len(t.Queue) > 0 {
		b.WriteString(" |")
		for _, w := range t.Queue {
			fmt.Fprintf(&b, " %s:%s", IDString(w.Client), w.Mode)
		}
	}
	b.WriteByte('}')
	return b.String()
}
