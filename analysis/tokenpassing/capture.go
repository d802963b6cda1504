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
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/ca"
	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
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
	// A Commit missing from the capture may be the capture's loss, not the
	// network's: keep the drop counts the capture wrote at its end.
	var r *pcapgo.NgReader
	var lastAny int64
	opts := pcapgo.DefaultNgReaderOptions
	opts.StatisticsCallback = func(id int, st pcapgo.NgInterfaceStatistics) {
		cf.complete = true
		if ifc, err := r.Interface(id); err == nil && st.PacketsDropped != pcapgo.NgNoValue64 {
			inst, _, _ := strings.Cut(ifc.Name, "/")
			cf.drops[inst] = st.PacketsDropped
		}
	}
	r, err = pcapgo.NewNgReader(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	wirelayer.Register(topo.Port)
	// Member keys: each certificate in the results, checked against the CA.
	keys := map[string]ed25519.PublicKey{}
	caCert, err := ca.LoadCert(filepath.Join(dir, results.CADir, ca.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	v := ca.NewVerifier(caCert)
	byAddr := map[netip.Addr]string{}
	for _, a := range topo.Agents {
		if ap, err := netip.ParseAddrPort(a.Addr); err == nil {
			byAddr[ap.Addr()] = a.Instance
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
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tb  wirelayer.Datagram
		// Agent interfaces are Ethernet (veth) or raw IP (the userspace
		// engine's TUN devices).
		ethParser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &tb)
		rawParser = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &ip4, &udp, &tb)
		dec       []gopacket.LayerType
	)
	ethParser.IgnoreUnsupported = true
	rawParser.IgnoreUnsupported = true
	ifaceAgent := map[int]string{}
	ifaceRaw := map[int]bool{}
	sent := map[obsKey]string{} // → link (logical) of datagrams not yet seen arriving
	sigs := newSigChecker(cf)
	defer sigs.wait()
	for {
		data, ci, err := r.ReadPacketData()
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
		cf.packets++
		lastAny = max(lastAny, ci.Timestamp.UnixNano())
		inst, ok := ifaceAgent[ci.InterfaceIndex]
		if !ok {
			if ifc, err := r.Interface(ci.InterfaceIndex); err == nil {
				inst, _, _ = strings.Cut(ifc.Name, "/")
				ifaceRaw[ci.InterfaceIndex] = ifc.LinkType == layers.LinkTypeRaw || ifc.LinkType == layers.LinkTypeIPv4
			}
			ifaceAgent[ci.InterfaceIndex] = inst
		}
		parser := ethParser
		if ifaceRaw[ci.InterfaceIndex] {
			parser = rawParser
		}
		if err := parser.DecodeLayers(data, &dec); err != nil {
			if len(dec) > 0 && dec[len(dec)-1] == layers.LayerTypeUDP && (udp.DstPort == layers.UDPPort(topo.Port) || udp.SrcPort == layers.UDPPort(topo.Port)) {
				cf.malformed++
			}
			continue
		}
		if len(dec) == 0 || dec[len(dec)-1] != wirelayer.LayerType {
			continue
		}
		cf.datagrams++
		wall := ci.Timestamp.UnixNano()
		if cf.firstWall == 0 {
			cf.firstWall = wall
		}
		cf.lastWall = wall
		src, _ := netip.AddrFromSlice(ip4.SrcIP)
		dst, _ := netip.AddrFromSlice(ip4.DstIP)
		sender, receiver := byAddr[src.Unmap()], byAddr[dst.Unmap()]
		k := obsKey{tb.Sender, tb.Nonce}
		switch inst {
		case sender:
			if _, dup := sent[k]; !dup {
				link := logical(sender) + ">" + logical(receiver)
				sent[k] = link
				cf.sent++
				cf.sentByLink[link]++
			}
		case receiver:
			if _, ok := sent[k]; ok {
				delete(sent, k)
				cf.arrived++
			}
			if tb.Type == wire.Commit {
				ck := commitKey{tb.Token.String(), tb.Session, tb.Sender, receiver}
				pub := keys[tb.Sender]
				if pub == nil || tb.Sender != sender {
					cf.badSig[ck] = true
					break
				}
				sp := netip.AddrPortFrom(src.Unmap(), uint16(udp.SrcPort))
				dp := netip.AddrPortFrom(dst.Unmap(), uint16(udp.DstPort))
				sigs.add(commitCheck{ck: ck, pub: pub, b: bytes.Clone(tb.Contents), src: sp, dst: dp})
			}
		}
	}
	sigs.wait()
	if !cf.complete && lastAny > 0 {
		cf.endWall = lastAny
		cf.endWhy = "no interface statistics at its end, so the capture was not stopped: the records it still held in memory when it died are missing"
	}
	// What was sent in the last moments may still be in flight at the end.
	for k, link := range sent {
		_ = k
		cf.lostByLink[link]++
	}
	return cf, nil
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
// verification each (8 of the analysis's 26 CPU s, issue 13). Each
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
