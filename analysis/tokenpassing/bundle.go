package tokenpassing

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
)

// bundleWindow is how much of the history around a violation a failure
// bundle keeps.
const bundleWindow = 3 * time.Second

// bundler writes failure bundles: for one violation, the event timeline
// around it and the slice of the capture, with the commands to open them.
type bundler struct {
	dir  string
	h    *history
	topo results.Topology
	n    int
}

// bundle writes bundles/CHECK-N/ and returns its path relative to the
// results directory. A nil bundler (a literal history) writes none.
func (b *bundler) bundle(check, token string, session uint64, mono int64, what string) string {
	if b == nil {
		return ""
	}
	b.n++
	rel := filepath.Join(results.BundlesDir, fmt.Sprintf("%s-%d", check, b.n))
	out := filepath.Join(b.dir, rel)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return ""
	}
	// Wall time of the violation, from the event nearest to it.
	wall := mono
	best := int64(-1)
	for _, e := range b.h.evs {
		if d := abs64(e.mono - mono); best < 0 || d < best {
			best, wall = d, e.wall+(mono-e.mono)
		}
	}
	from, to := mono-int64(bundleWindow), mono+int64(bundleWindow)
	var lines []string
	for _, a := range b.topo.Agents {
		lines = append(lines, grepLog(filepath.Join(b.dir, a.Log), from, to)...)
	}
	lines = append(lines, grepLog(filepath.Join(b.dir, results.LogsDir, results.HarnessLog), from, to)...)
	sort.Strings(lines) // each line starts with its mono time
	var tl strings.Builder
	fmt.Fprintf(&tl, "%s: %s\ntoken %s, session %d; events from %v before to %v after (mono ns first)\n\n", check, what, token, session, bundleWindow, bundleWindow)
	for _, l := range lines {
		tl.WriteString(l)
		tl.WriteByte('\n')
	}
	os.WriteFile(filepath.Join(out, "timeline.txt"), []byte(tl.String()), 0o644)
	slice := filepath.Join(out, "slice.pcapng")
	n, err := slicePcap(filepath.Join(b.dir, results.CaptureFile), slice, wall-int64(bundleWindow), wall+int64(bundleWindow))
	note := fmt.Sprintf("%d packets", n)
	if err != nil {
		note = "no capture slice: " + err.Error()
	}
	readme := fmt.Sprintf(`%s failed: %s

timeline.txt   the agents' and the harness's events within %v of the violation
slice.pcapng   the capture within %v of it (%s)

Open the decoded timeline of the guilty session:
  harness pcap %s -token %s -session %d
Or in tshark with the dissector:
  tshark -X lua_script:analysis/wireshark/tokenbed.lua -r %s -Y 'tokenbed.token == "%s"'
`, check, what, bundleWindow, bundleWindow, note, filepath.Join(rel, "slice.pcapng"), token, session, filepath.Join(rel, "slice.pcapng"), token)
	os.WriteFile(filepath.Join(out, "README.txt"), []byte(readme), 0o644)
	return rel
}

// latencyBundle bundles the slowest pass of a direction.
func (b *bundler) latencyBundle(link string, xs []float64) string {
	if b == nil {
		return ""
	}
	var worst *ev
	for i := range b.h.evs {
		e := &b.h.evs[i]
		if e.kind == eventlog.PassCompleted && b.h.logical(e.agent)+">"+b.h.logical(e.peer) == link && (worst == nil || e.latency > worst.latency) {
			worst = e
		}
	}
	if worst == nil {
		return ""
	}
	return b.bundle("latency", worst.token, worst.session, worst.mono-worst.latency/2,
		fmt.Sprintf("%s is out of tolerance; its slowest pass (%.3f s) is here", link, float64(worst.latency)/1e9))
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// grepLog returns the lines of a log whose mono time is in [from, to],
// each prefixed with its mono time for sorting.
func grepLog(path string, from, to int64) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var e struct {
			Mono int64 `json:"mono_ns"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Mono < from || e.Mono > to {
			continue
		}
		out = append(out, fmt.Sprintf("%019d %s", e.Mono, sc.Text()))
	}
	return out
}

// slicePcap copies the packets of src with timestamps in [from, to] (wall
// ns) into a new pcapng file with the same interfaces.
func slicePcap(src, dst string, from, to int64) (int, error) {
	return filterPcap(src, dst, func(p *pcapread.Packet) bool {
		ts := p.Time.UnixNano()
		return ts >= from && ts <= to
	})
}

// filterPcap copies the records of src that keep accepts into dst (which
// may be src: it is read whole first), with the same interfaces.
func filterPcap(src, dst string, keep func(*pcapread.Packet) bool) (int, error) {
	return copyPcap(src, dst, keep, nil)
}

// copyPcap copies the records of src that keep accepts into dst, read
// through the one capture reader (internal/pcapread), then lets finish,
// when not nil, write blocks of its own at the end. A capture cut inside
// a record (its writer killed) is copied up to the cut. pcapng declares
// interfaces as it goes, so they are copied as records refer to them.
func copyPcap(src, dst string, keep func(*pcapread.Packet) bool, finish func(*pcapgo.NgWriter) error) (int, error) {
	in, err := os.ReadFile(src)
	if err != nil {
		return 0, err
	}
	r, err := pcapread.NewReader(bytes.NewReader(in))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	var w *pcapgo.NgWriter
	added, n := 0, 0
	for {
		p, err := r.Next()
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return n, err
		}
		if !keep(p) {
			continue
		}
		for ; added <= p.Iface; added++ {
			ifc, err := r.Interface(added)
			if err != nil {
				return n, err
			}
			ng := pcapgo.NgInterface{Name: ifc.Name, Description: ifc.Description, LinkType: ifc.LinkType}
			if w == nil {
				w, err = pcapgo.NewNgWriterInterface(out, ng, pcapgo.NgWriterOptions{})
			} else {
				_, err = w.AddInterface(ng)
			}
			if err != nil {
				return n, err
			}
		}
		// The harness captures whole packets (capturefile.SnapLen): the
		// captured length is the packet's.
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Data), Length: len(p.Data), InterfaceIndex: p.Iface}
		if err := w.WritePacket(ci, p.Data); err != nil {
			return n, err
		}
		n++
	}
	if w == nil {
		return n, nil
	}
	if finish != nil {
		if err := finish(w); err != nil {
			return n, err
		}
	}
	return n, w.Flush()
}
