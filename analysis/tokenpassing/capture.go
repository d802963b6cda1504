package tokenpassing

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/ca"
	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
)

// commitKey names a Commit: token, session, sender, receiver (instances).
type commitKey struct {
	token   string
	session uint64
	from    string
	to      string
}

// captureFacts is what analysis takes from the packet capture.
type captureFacts struct {
	present   bool
	truncated string // why the file ended early, if it did
	packets   int
	datagrams int
	malformed int
	// verified Commits seen arriving at their receiver, with a signature
	// that verifies against the member's CA-checked key; badSig those
	// that do not verify.
	verified map[commitKey]bool
	badSig   map[commitKey]bool
	// Network loss: datagrams seen leaving their sender's interface and
	// never arriving at the receiver's.
	sent, arrived int
	lostByLink    map[string]int // "A>C" (logical) → datagrams lost
	sentByLink    map[string]int
	firstWall     int64
	lastWall      int64
	// endWall (wall ns, 0: complete) is where an incomplete capture ends:
	// its last record. The capture writes records up to 100 ms after
	// their time (harness/capture, "Crashes"), so a capture killed with
	// its writer has lost what came after; endWhy says how it is known.
	endWall  int64
	endWhy   string
	complete bool // interface statistics at the end: capture.Stop ran
	keyErrs  []string
	// drops: packets the capture's kernel ring dropped, per agent
	// instance (pcapng interface statistics, isb_drops).
	drops map[string]uint64
}

type obsKey struct {
	sender string
	nonce  uint64
}

// readCapture streams capture.pcapng once.
func readCapture(dir string, topo results.Topology, logical func(string) string) (*captureFacts, error) {
	cf := &captureFacts{verified: map[commitKey]bool{}, badSig: map[commitKey]bool{}, lostByLink: map[string]int{}, sentByLink: map[string]int{}, drops: map[string]uint64{}}
	path := filepath.Join(dir, results.CaptureFile)
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return cf, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cf.present = true
	r, err := pcapread.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	keys, err := memberKeys(dir, topo, cf)
	if err != nil {
		return nil, err
	}
	cr := &captureRead{cf: cf, port: topo.Port, logical: logical, keys: keys,
		byAddr: map[netip.Addr]string{}, ifaceAgent: map[int]string{}, sent: map[obsKey]string{}, sigs: newSigChecker(cf)}
	defer cr.sigs.wait()
	for _, a := range topo.Agents {
		if ap, err := netip.ParseAddrPort(a.Addr); err == nil {
			cr.byAddr[ap.Addr()] = a.Instance
		}
	}
	var lastAny int64
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				cf.truncated = "the capture ends inside a block (the harness was killed)"
				break
			}
			cf.truncated = err.Error()
			break
		}
		if p.Annotation != nil {
			continue // the harness's events, not packets
		}
		lastAny = max(lastAny, p.Time.UnixNano())
		cr.packet(r, p)
	}
	cr.sigs.wait()
	// A Commit missing from the capture may be the capture's loss, not the
	// network's: keep the drop counts the capture wrote at its end.
	st := r.Stats()
	cf.packets, cf.complete = st.Packets(), st.Complete()
	for _, is := range st.Statistics {
		if is.HasDropped {
			inst, _, _ := strings.Cut(is.Name, "/")
			cf.drops[inst] = is.Dropped
		}
	}
	if !cf.complete && lastAny > 0 {
		cf.endWall = lastAny
		cf.endWhy = "no interface statistics at its end, so the capture was not stopped: the records it still held in memory when it died are missing"
	}
	// What was sent in the last moments may still be in flight at the end.
	for _, link := range cr.sent {
		cf.lostByLink[link]++
	}
	return cf, nil
}

// memberKeys are the members' public keys: each certificate in the
// results, checked against the CA. A certificate that does not load or
// verify is listed in cf.keyErrs.
func memberKeys(dir string, topo results.Topology, cf *captureFacts) (map[string]ed25519.PublicKey, error) {
	keys := map[string]ed25519.PublicKey{}
	caCert, err := ca.LoadCert(filepath.Join(dir, results.CADir, ca.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	v := ca.NewVerifier(caCert)
	for _, a := range topo.Agents {
		v := v
		// A run merged from shards run apart: each shard had its own CA.
		if rc, err := ca.LoadCert(filepath.Join(dir, results.CADir, results.ReplicaCACert(a.Replica))); err == nil {
			v = ca.NewVerifier(rc)
		}
		c, err := ca.LoadCert(filepath.Join(dir, results.CADir, ca.CertFile(a.Instance)))
		if err != nil {
			cf.keyErrs = append(cf.keyErrs, err.Error())
			continue
		}
		name, pub, err := v.Verify(c.Raw, c.NotBefore.Add(time.Minute))
		if err != nil || name != a.Instance {
			cf.keyErrs = append(cf.keyErrs, fmt.Sprintf("%s: certificate does not verify against the CA: %v", a.Instance, err))
			continue
		}
		keys[name] = pub
	}
	return keys, nil
}

// captureRead is the state of one pass over the capture.
type captureRead struct {
	cf         *captureFacts
	port       uint16
	logical    func(string) string
	keys       map[string]ed25519.PublicKey
	byAddr     map[netip.Addr]string
	ifaceAgent map[int]string    // interface → agent instance
	sent       map[obsKey]string // → link (logical) of datagrams not yet seen arriving
	sigs       *sigChecker
	tb         wirelayer.Datagram
}

// packet takes one record: a token passing datagram is counted as sent
// on its sender's interface and as arrived on its receiver's, and a
// Commit arriving has its signature checked.
func (cr *captureRead) packet(r *pcapread.Reader, p *pcapread.Packet) {
	cf := cr.cf
	inst, ok := cr.ifaceAgent[p.Iface]
	if !ok {
		if ifc, err := r.Interface(p.Iface); err == nil {
			inst, _, _ = strings.Cut(ifc.Name, "/")
		}
		cr.ifaceAgent[p.Iface] = inst
	}
	udp := p.UDP
	if udp == nil || (udp.DstPort != layers.UDPPort(cr.port) && udp.SrcPort != layers.UDPPort(cr.port)) || len(udp.Payload) == 0 {
		return
	}
	tb := &cr.tb
	if err := tb.DecodeFromBytes(udp.Payload, gopacket.NilDecodeFeedback); err != nil {
		cf.malformed++
		return
	}
	cf.datagrams++
	wall := p.Time.UnixNano()
	if cf.firstWall == 0 {
		cf.firstWall = wall
	}
	cf.lastWall = wall
	src, dst := p.Src.Unmap(), p.Dst.Unmap()
	sender, receiver := cr.byAddr[src], cr.byAddr[dst]
	k := obsKey{tb.Sender, tb.Nonce}
	switch inst {
	case sender:
		if _, dup := cr.sent[k]; !dup {
			link := cr.logical(sender) + ">" + cr.logical(receiver)
			cr.sent[k] = link
			cf.sent++
			cf.sentByLink[link]++
		}
	case receiver:
		if _, ok := cr.sent[k]; ok {
			delete(cr.sent, k)
			cf.arrived++
		}
		if tb.Type != wire.Commit {
			return
		}
		ck := commitKey{tb.Token.String(), tb.Session, tb.Sender, receiver}
		pub := cr.keys[tb.Sender]
		if pub == nil || tb.Sender != sender {
			cf.badSig[ck] = true
			return
		}
		sp := netip.AddrPortFrom(src, uint16(udp.SrcPort))
		dp := netip.AddrPortFrom(dst, uint16(udp.DstPort))
		cr.sigs.add(commitCheck{ck: ck, pub: pub, b: bytes.Clone(tb.Contents), src: sp, dst: dp})
	}
}

// commitCheck is the signature check of a Commit seen arriving.
type commitCheck struct {
	ck       commitKey
	pub      ed25519.PublicKey
	b        []byte
	src, dst netip.AddrPort
}

// sigChecker verifies Commits' signatures on every core while the
// capture is read: a 20-day run has 178,000 Commits, an Ed25519
// verification each (8 of the analysis's 26 CPU s). Each
// result only adds its Commit to verified or badSig, so the order in
// which they come does not matter.
type sigChecker struct {
	cf    *captureFacts
	batch []commitCheck
	jobs  chan []commitCheck
	mu    sync.Mutex // guards cf.verified and cf.badSig while workers run
	wg    sync.WaitGroup
	done  bool
}

const sigBatch = 256

func newSigChecker(cf *captureFacts) *sigChecker {
	s := &sigChecker{cf: cf, jobs: make(chan []commitCheck, 4)}
	n := runtime.GOMAXPROCS(0)
	s.wg.Add(n)
	for range n {
		go func() {
			defer s.wg.Done()
			for b := range s.jobs {
				ok := make([]bool, len(b))
				for i, c := range b {
					ok[i] = wire.Verify(c.b, c.pub, c.src, c.dst)
				}
				s.mu.Lock()
				for i, c := range b {
					if ok[i] {
						s.cf.verified[c.ck] = true
					} else {
						s.cf.badSig[c.ck] = true
					}
				}
				s.mu.Unlock()
			}
		}()
	}
	return s
}

func (s *sigChecker) add(c commitCheck) {
	s.batch = append(s.batch, c)
	if len(s.batch) == sigBatch {
		s.jobs <- s.batch
		s.batch = make([]commitCheck, 0, sigBatch)
	}
}

// wait hands over the last batch and waits for every result; the
// second call does nothing.
func (s *sigChecker) wait() {
	if s.done {
		return
	}
	s.done = true
	if len(s.batch) > 0 {
		s.jobs <- s.batch
	}
	close(s.jobs)
	s.wg.Wait()
}

// lostTotal is every datagram sent and never seen arriving.
func (cf *captureFacts) lostTotal() int {
	n := 0
	for _, v := range cf.lostByLink {
		n += v
	}
	return n
}

// totalDrops is the packets the capture dropped on every interface.
func (cf *captureFacts) totalDrops() uint64 {
	var n uint64
	for _, d := range cf.drops {
		n += d
	}
	return n
}

// dropList names the interfaces that dropped packets, "B1: 12, C0: 3".
func (cf *captureFacts) dropList() string {
	var l []string
	for inst, d := range cf.drops {
		if d > 0 {
			l = append(l, fmt.Sprintf("%s: %d", inst, d))
		}
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}
