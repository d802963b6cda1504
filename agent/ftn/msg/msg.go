// Package msg holds the messages of the FTN Token Server Mark II (seed
// 001): the global state the leader broadcasts, the server and client
// messages, token placement and fencing numbers. It is shared by the
// pure state machines (agent/ftn/server, agent/ftn/client), their
// drivers and the checker; it does no I/O.
package msg

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// State is a server's state in the global state (001 "Server states").
type State uint8

const (
	// Down: not responsible for any tokens. The zero value, so that a
	// server the leader never heard of is DOWN.
	Down State = iota
	// Booting: responsible, still initialising (taking transfers and
	// querying clients); it answers no requests yet.
	Booting
	// Ready: serving its tokens.
	Ready
)

func (s State) String() string {
	switch s {
	case Down:
		return "DOWN"
	case Booting:
		return "BOOTING"
	case Ready:
		return "READY"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ServerState is one server's entry in the global state. Inc is the
// incarnation the leader last accepted from it: a server picks a larger
// one every time it (re)initialises, so that messages of a previous life
// are told apart (001 "must guard against late messages").
type ServerState struct {
	State State
	Inc   uint64
}

// ClientEntry is an active client (001 "The Client List"). Name is the
// CommonName of its certificate: only that member may act for ID.
// RegVersion is the global state version that first listed it: a server
// that has seen that version and no longer lists ID answers "ID invalid".
type ClientEntry struct {
	ID         uint64
	Name       string
	Addr       netip.AddrPort
	RegVersion uint64
}

// Global is the global state (001 "Global state"): the leader's
// identity, each server's state and the client list. Version orders
// global states: Term<<32 | sequence within the term, so a new leader's
// states supersede every state of older terms.
type Global struct {
	Term    uint64
	Version uint64
	Leader  int // index in the server list
	Servers []ServerState
	Clients []ClientEntry // sorted by ID
}

// Clone returns a deep copy of g.
func (g Global) Clone() Global {
	g.Servers = slices.Clone(g.Servers)
	g.Clients = slices.Clone(g.Clients)
	return g
}

// Client returns the entry of client id.
func (g *Global) Client(id uint64) (ClientEntry, bool) {
	i, ok := slices.BinarySearchFunc(g.Clients, id, func(c ClientEntry, id uint64) int { return cmp.Compare(c.ID, id) })
	if !ok {
		return ClientEntry{}, false
	}
	return g.Clients[i], true
}

// Check reports whether g fits a configuration of n servers (001
// "Configuration": all servers share one list, so every global state has
// one entry per listed server): one entry per server, each state known,
// a leader among them or none (-1), clients sorted by ID without repeats
// (Client searches them). The error names the first field at fault.
func (g *Global) Check(n int) error {
	if len(g.Servers) != n {
		return fmt.Errorf("servers: %d entries, the server list has %d", len(g.Servers), n)
	}
	if g.Leader < -1 || g.Leader >= n {
		return fmt.Errorf("leader: %d not in -1..%d", g.Leader, n-1)
	}
	for i, s := range g.Servers {
		if s.State > Ready {
			return fmt.Errorf("servers[%d].state: %s", i, s.State)
		}
	}
	for i := 1; i < len(g.Clients); i++ {
		if g.Clients[i].ID <= g.Clients[i-1].ID {
			return fmt.Errorf("clients[%d].id: %s not above clients[%d]'s %s", i, IDString(g.Clients[i].ID), i-1, IDString(g.Clients[i-1].ID))
		}
	}
	return nil
}

// States lists the servers' states.
func (g *Global) States() []State {
	s := make([]State, len(g.Servers))
	for i, e := range g.Servers {
		s[i] = e.State
	}
	return s
}

// Owner is the server responsible for name: 001 "Token distribution".
func (g *Global) Owner(name string) int { return Owner(name, g.States()) }

func (g Global) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "v=%s leader=%d servers=[", VersionString(g.Version), g.Leader)
	for i, s := range g.Servers {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s/%d", s.State, s.Inc)
	}
	b.WriteString("] clients=[")
	for i, c := range g.Clients {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(IDString(c.ID))
	}
	b.WriteByte(']')
	return b.String()
}

// VersionString prints a version as TERM.SEQ.
func VersionString(v uint64) string { return fmt.Sprintf("%d.%d", v>>32, v&0xffffffff) }

// IDString prints a client ID as TERM.N (the leader's term and its count).
func IDString(id uint64) string { return fmt.Sprintf("c%d.%d", id>>32, id&0xffffffff) }

// Mode is how a token is reserved (001 "Tokens").
type Mode uint8

const (
	Exclusive Mode = iota + 1 // read/write, alone
	Shared                    // read-only, with other shared holders
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "x"
	case Shared:
		return "s"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Fence is a fencing number, beyond the seed (001 has none). Epoch is the
// global state version at which the granting server took responsibility
// for the name (created, received by transfer or reclaimed its entry);
// Counter counts the grants of that entry. See the server package for
// the guarantee.
type Fence struct {
	Epoch   uint64
	Counter uint64
}

// Compare orders fences: by Epoch, then Counter.
func (f Fence) Compare(g Fence) int {
	if c := cmp.Compare(f.Epoch, g.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(f.Counter, g.Counter)
}

// IsZero reports whether f is unset.
func (f Fence) IsZero() bool { return f == Fence{} }

func (f Fence) String() string { return fmt.Sprintf("%s#%d", VersionString(f.Epoch), f.Counter) }

// Hold is a token held by a client, as a query reply or a transfer
// reports it.
type Hold struct {
	Client uint64
	Name   string
	Mode   Mode
	Fence  Fence
	Req    uint64 // the acquire that obtained it, to answer its repeats
	Data   []byte // the holder's last known data (query replies only)
}

// ReqMark is the newest request a server has seen from Client for Name
// (a transfer's TokenState.Marks), or a request the client has
// outstanding for Name (a QueryReply's Marks, Done false). Done: the
// server applied it, so a copy of it is answered, not applied again.
// A server refuses any request for Name from Client older than Req
// (001 "must guard against late messages"; "unacknowledged requests
// are repeated", so copies arrive late).
type ReqMark struct {
	Client uint64
	Name   string
	Req    uint64
	Done   bool `json:",omitempty"`
}

// Waiter is a queued acquire.
type Waiter struct {
	Client uint64
	Mode   Mode
	Req    uint64
}

// TokenState is a token's state as transferred to a BOOTING server
// (001 "Receiving global state").
type TokenState struct {
	Name    string
	Fence   Fence // the last one granted
	Data    []byte
	Holders []Hold
	Queue   []Waiter
	Marks   []ReqMark `json:",omitempty"` // per client, its newest request for Name
}
