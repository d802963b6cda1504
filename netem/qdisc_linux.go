package netem

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNoNetem is matched (errors.Is) by every error caused by a kernel
// without the netem qdisc.
var ErrNoNetem = errors.New("the kernel has no netem qdisc (build or load sch_netem: CONFIG_NET_SCH_NETEM)")

// ErrTableStuck is returned by Qdisc.Change when the new profile has no
// distribution table where the qdisc may hold one: sch_netem can replace a
// table in place but never remove it, so `tc qdisc change` would silently
// keep shaping jitter with the old table. Use Qdisc.Replace instead.
var ErrTableStuck = errors.New("a distribution table cannot be removed from a netem qdisc in place; use Replace (delete and add)")

// OpError is a failed kernel operation.
type OpError struct {
	Op   string // "add", "change", "delete", "read", ...
	Link string
	Err  error
}

func (e *OpError) Error() string {
	if errors.Is(e.Err, ErrNoNetem) {
		return fmt.Sprintf("netem %s on %s: %v", e.Op, e.Link, e.Err)
	}
	return fmt.Sprintf("netem %s on %s: %v", e.Op, e.Link, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// noNetemError wraps the kernel's answer (ENOENT, "Specified qdisc kind is
// unknown") so that it matches both ErrNoNetem and the errno.
type noNetemError struct{ errno error }

func (e noNetemError) Error() string {
	return ErrNoNetem.Error() + " (kernel said: " + e.errno.Error() + ")"
}
func (e noNetemError) Unwrap() []error { return []error{ErrNoNetem, e.errno} }

// sharedDuplicateError is the kernel's refusal of a duplicating netem
// beside others (check_netem_in_tree, which answers EINVAL with this
// extended ack); it matches ErrSharedDuplicate and the errno.
type sharedDuplicateError struct{ err error }

func (e sharedDuplicateError) Error() string {
	return e.err.Error() + " (" + ErrSharedDuplicate.Error() + ")"
}
func (e sharedDuplicateError) Unwrap() []error { return []error{ErrSharedDuplicate, e.err} }

// kernelRefusal makes the kernel's answers to a netem request match this
// package's errors.
func kernelRefusal(err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return noNetemError{err}
	case errors.Is(err, syscall.EINVAL) && strings.Contains(err.Error(), "cannot mix duplicating netems"):
		return sharedDuplicateError{err}
	}
	return err
}

// Target says where a netem qdisc lives.
type Target struct {
	// NS is the network namespace; netns.None() (or a closed handle, -1)
	// means the caller's.
	NS netns.NsHandle
	// Link is the interface name inside NS.
	Link string
	// Parent is the qdisc's parent: 0 means the root (TC_H_ROOT), else a
	// class id such as netlink.MakeHandle(1, 10) for an HTB leaf.
	Parent uint32
	// Handle is the qdisc's own handle (major:0); 0 lets the kernel pick.
	Handle uint32
}

func (t Target) parent() uint32 {
	if t.Parent == 0 {
		return netlink.HANDLE_ROOT
	}
	return t.Parent
}

// conn is a netlink route socket in the target namespace plus a
// vishvananda/netlink handle for the operations that library covers.
type conn struct {
	h    *netlink.Handle
	sock *nl.SocketHandle
}

// dial opens sockets inside ns without moving the calling goroutine: the
// library enters ns on a locked thread only for socket(2) and returns.
func dial(ns netns.NsHandle) (*conn, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, err
	}
	// Kernel error strings (extack) make failures self-explanatory.
	_ = s.SetExtAck(true)
	return &conn{h: h, sock: &nl.SocketHandle{Socket: s}}, nil
}

func (c *conn) close() {
	c.sock.Close()
	c.h.Close()
}

func (c *conn) request(typ, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(typ, flags)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: c.sock}
	return req
}

func (c *conn) ifindex(name string) (int, error) {
	l, err := c.h.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("link %q: %w", name, err)
	}
	return l.Attrs().Index, nil
}

// sendQdisc sends RTM_NEWQDISC with p's netem options.
func (c *conn) sendQdisc(t Target, p Profile, flags int) error {
	idx, err := c.ifindex(t.Link)
	if err != nil {
		return err
	}
	opts, err := encodeOptions(p)
	if err != nil {
		return err
	}
	req := c.request(unix.RTM_NEWQDISC, flags|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(idx), Handle: t.Handle, Parent: t.parent()})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("netem")))
	req.AddData(opts)
	_, err = req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

func (c *conn) deleteQdisc(t Target) error {
	idx, err := c.ifindex(t.Link)
	if err != nil {
		return err
	}
	req := c.request(unix.RTM_DELQDISC, unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(idx), Handle: t.Handle, Parent: t.parent()})
	_, err = req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// readQdisc dumps the qdiscs of t.Link and decodes the netem one at
// t.Parent (and t.Handle, if set).
func (c *conn) readQdisc(t Target) (Profile, error) {
	idx, err := c.ifindex(t.Link)
	if err != nil {
		return Profile{}, err
	}
	req := c.request(unix.RTM_GETQDISC, unix.NLM_F_DUMP)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(idx)})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	if err != nil {
		return Profile{}, err
	}
	for _, m := range msgs {
		tcm := nl.DeserializeTcMsg(m)
		if int(tcm.Ifindex) != idx || tcm.Parent != t.parent() || (t.Handle != 0 && tcm.Handle != t.Handle) {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[tcm.Len():])
		if err != nil {
			return Profile{}, err
		}
		var kind string
		var opts []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case nl.TCA_KIND:
				kind = string(a.Value[:len(a.Value)-1])
			case nl.TCA_OPTIONS:
				opts = a.Value
			}
		}
		if kind != "netem" {
			return Profile{}, fmt.Errorf("qdisc %s at parent %s is %q, not netem", netlink.HandleStr(tcm.Handle), netlink.HandleStr(tcm.Parent), kind)
		}
		p, _, _, err := decodeOptions(opts)
		return p, err
	}
	return Profile{}, fmt.Errorf("no qdisc at parent %s: %w", netlink.HandleStr(t.parent()), syscall.ENOENT)
}

func withConn(op string, t Target, f func(*conn) error) error {
	c, err := dial(t.NS)
	if err != nil {
		return &OpError{Op: op, Link: t.Link, Err: err}
	}
	defer c.close()
	if err := f(c); err != nil {
		return &OpError{Op: op, Link: t.Link, Err: err}
	}
	return nil
}

// tables tracks which distribution tables a qdisc may hold.
type tables struct{ delay, slot bool }

func (s tables) after(p Profile) tables {
	return tables{delay: s.delay || !p.Distribution.IsZero(), slot: s.slot || !p.Slot.Distribution.IsZero()}
}

// Qdisc is a netem qdisc this process added (Add) or took over (Attach). It
// remembers which distribution tables it may hold, so that Change can
// refuse what the kernel cannot do instead of doing it wrong.
type Qdisc struct {
	t      Target
	tables tables
}

// Add creates a netem qdisc with profile p.
//
// Equivalent to: `ip netns exec NS tc qdisc add dev LINK root netem P`
// (or "parent CLASSID" for a leaf), with every attribute sent explicitly.
func Add(t Target, p Profile) (*Qdisc, error) {
	err := withConn("add", t, func(c *conn) error {
		return kernelRefusal(c.sendQdisc(t, p, unix.NLM_F_CREATE|unix.NLM_F_EXCL))
	})
	if err != nil {
		return nil, err
	}
	return &Qdisc{t: t, tables: tables{}.after(p)}, nil
}

// Attach returns a Qdisc for an existing netem qdisc at t that this
// process did not add. Its tables are unknown, so Change to a profile with
// uniform jitter (or slot min/max) returns ErrTableStuck; Replace works.
func Attach(t Target) *Qdisc { return &Qdisc{t: t, tables: tables{delay: true, slot: true}} }

// Target returns where q lives.
func (q *Qdisc) Target() Target { return q.t }

// Change sets q to p in place at run time: queued packets stay queued.
// Every field of p is applied (tc's change leaves unspecified options as
// they were; Change does not). It returns an error wrapping ErrTableStuck
// when p would need a distribution table removed (see ErrTableStuck).
//
// Equivalent to: `ip netns exec NS tc qdisc change dev LINK root netem P`.
func (q *Qdisc) Change(p Profile) error {
	if q.tables.delay && p.Jitter != 0 && p.Distribution.IsZero() {
		return &OpError{Op: "change", Link: q.t.Link, Err: fmt.Errorf("uniform jitter requested: %w", ErrTableStuck)}
	}
	if q.tables.slot && p.Slot.Active() && p.Slot.Distribution.IsZero() {
		return &OpError{Op: "change", Link: q.t.Link, Err: fmt.Errorf("slot min/max requested: %w", ErrTableStuck)}
	}
	err := withConn("change", q.t, func(c *conn) error { return kernelRefusal(c.sendQdisc(q.t, p, 0)) })
	if err != nil {
		return err
	}
	q.tables = q.tables.after(p)
	return nil
}

// Replace deletes q and adds it again with p: not in place (queued packets
// are dropped), but it also removes distribution tables.
//
// Equivalent to: `tc qdisc del dev LINK root && tc qdisc add dev LINK root
// netem P`.
func (q *Qdisc) Replace(p Profile) error {
	if err := p.Validate(); err != nil { // before deleting anything
		return &OpError{Op: "replace", Link: q.t.Link, Err: err}
	}
	if err := q.Delete(); err != nil {
		return err
	}
	n, err := Add(q.t, p)
	if err != nil {
		return err
	}
	q.tables = n.tables
	return nil
}

// Delete removes q.
//
// Equivalent to: `ip netns exec NS tc qdisc del dev LINK root`.
func (q *Qdisc) Delete() error {
	return withConn("delete", q.t, func(c *conn) error { return c.deleteQdisc(q.t) })
}

// Read returns q's configuration as the kernel reports it (see Read).
func (q *Qdisc) Read() (Profile, error) { return Read(q.t) }

// Read returns the configuration of the netem qdisc at t as the kernel
// reports it, including the 4-state and Gilbert-Elliott loss models, ECN,
// slots and 64-bit delay, jitter and rate. The kernel does not report
// distribution tables, so the result equals the applied Profile's
// KernelView, not the Profile itself.
//
// Equivalent to: `ip netns exec NS tc qdisc show dev LINK`.
func Read(t Target) (Profile, error) {
	var p Profile
	err := withConn("read", t, func(c *conn) error {
		var err error
		p, err = c.readQdisc(t)
		return err
	})
	return p, err
}
