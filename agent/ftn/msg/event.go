package msg

import (
	"fmt"
	"net/netip"
	"strings"
)

// Peer is a host as a machine addresses it: its authenticated name and
// its UDP address.
type Peer struct {
	Name string
	Addr netip.AddrPort
}

// Out is a message to send.
type Out struct {
	To  netip.AddrPort
	Msg Msg
}

// Event is something a machine did that its driver logs (the eventlog
// kind is "ftn_" + Kind). Which fields are set depends on Kind.
type Event struct {
	Kind    string
	Name    string // token
	Client  uint64
	Mode    Mode
	Fence   Fence
	Version uint64
	Server  int
	Req     uint64
	Status  Status
	Data    []byte
	Detail  string
}

// serverKinds are the events whose Server field says which server.
var serverKinds = map[string]bool{"declare_down": true, "server_down": true, "follow": true, "transfer_in": true,
	"transfer_out": true, "redirect": true, "late": true}

// ServerKind reports whether an event of kind k names a server in Server.
func ServerKind(k string) bool { return serverKinds[k] }

func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Kind)
	f := func(format string, a ...any) { b.WriteByte(' '); fmt.Fprintf(&b, format, a...) }
	if e.Req != 0 {
		f("req=%d", e.Req)
	}
	if e.Name != "" {
		f("%s", e.Name)
	}
	if e.Client != 0 {
		f("%s", IDString(e.Client))
	}
	if e.Mode != 0 {
		f("%s", e.Mode)
	}
	if !e.Fence.IsZero() {
		f("fence=%s", e.Fence)
	}
	if serverKinds[e.Kind] {
		f("server=%d", e.Server)
	}
	if e.Version != 0 {
		f("v=%s", VersionString(e.Version))
	}
	if e.Status != OK {
		f("%s", e.Status)
	}
	if e.Data != nil {
		f("data=%q", e.Data)
	}
	if e.Detail != "" {
		f("%s", e.Detail)
	}
	return b.String()
}
