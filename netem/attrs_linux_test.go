package netem

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"

	"tokenbed/netem/dist"
)

// TestEncodeDecodeRoundTrip: what the kernel would store from our request
// decodes to the Profile's KernelView (tables aside, which are checked
// against the dist package).
func TestEncodeDecodeRoundTrip(t *testing.T) {
	const seed = 0x6e6c // recorded
	r := rand.New(rand.NewPCG(seed, 2))
	for i := 0; i < 5000; i++ {
		p := randomProfile(r)
		opts, err := encodeOptions(p)
		if err != nil {
			t.Fatalf("seed %#x case %d: encode %q: %v", seed, i, p, err)
		}
		b := opts.Serialize()[4:] // strip the TCA_OPTIONS header
		got, dt, st, err := decodeOptions(b)
		if err != nil {
			t.Fatalf("seed %#x case %d: decode: %v", seed, i, err)
		}
		want := p.KernelView()
		// Percentages travel as u32: compare after the same quantisation.
		if !quantised(got).Equal(quantised(want)) {
			t.Fatalf("seed %#x case %d: %q\n got %+v\nwant %+v", seed, i, p, got, want)
		}
		wantDT, _ := p.Distribution.Values()
		wantST, _ := p.Slot.Distribution.Values()
		if !slices.Equal(dt, wantDT) || !slices.Equal(st, wantST) {
			t.Fatalf("seed %#x case %d: tables differ", seed, i)
		}
	}
}

// quantised maps every percentage through the kernel's u32 and back.
func quantised(p Profile) Profile {
	q := func(v *Percent) { *v = u32ToPct(pctToU32(*v)) }
	for _, v := range []*Percent{&p.DelayCorrelation, &p.Loss.Percent, &p.Loss.Correlation, &p.Loss.P13, &p.Loss.P31,
		&p.Loss.P32, &p.Loss.P23, &p.Loss.P14, &p.Loss.P, &p.Loss.R, &p.Loss.OneMinusH, &p.Loss.OneMinusK,
		&p.Duplicate, &p.DuplicateCorrelation, &p.Reorder, &p.ReorderCorrelation, &p.Corrupt, &p.CorruptCorrelation} {
		q(v)
	}
	return p
}

func TestPercentQuantisation(t *testing.T) {
	for _, v := range []Percent{0, 1, 0.1, 25, 33.333, 99.9999, 100, 1e-7} {
		if got := u32ToPct(pctToU32(v)); pctToU32(got) != pctToU32(v) {
			t.Errorf("%v%% -> %d -> %v%%", v, pctToU32(v), got)
		}
	}
	if u32ToPct(pctToU32(1)) != 1 || u32ToPct(pctToU32(0.3)) != 0.3 {
		t.Fatal("read-back of 1% / 0.3% is not the short decimal")
	}
	if pctToU32(100) != 0xffffffff {
		t.Fatal("100% is not ~0")
	}
}

// tcRequest runs the installed tc (iproute2) under strace and returns the
// TCA_OPTIONS payload of the RTM_NEWQDISC it sends. The kernel may reject
// the request (this host has no netem): only what tc sends matters.
func tcRequest(t *testing.T, args string) []byte {
	t.Helper()
	for _, tool := range []string{"tc", "strace"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install iproute2 strace): cannot capture tc's netlink request", tool)
		}
	}
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", append([]string{"-o", out, "-e", "trace=sendmsg", "-e", "write=3", "tc", "qdisc", "add", "dev", "lo", "root", "netem"}, strings.Fields(args)...)...)
	cmd.Run() // tc fails where netem is missing; the request was still sent
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msg []byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, " | ") || len(l) < 60 {
			continue
		}
		h := strings.ReplaceAll(l[10:59], " ", "")
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("strace dump line %q: %v", l, err)
		}
		msg = append(msg, b...)
	}
	if len(msg) < 16+20 {
		t.Fatalf("no netlink request captured from tc %s", args)
	}
	attrs, err := nl.ParseRouteAttr(msg[16+20:]) // nlmsghdr + tcmsg
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attrs {
		if a.Attr.Type == nl.TCA_OPTIONS {
			return a.Value
		}
	}
	t.Fatalf("tc %s sent no TCA_OPTIONS", args)
	return nil
}

// TestConformsToIproute2 compares, for tc command lines, the Profile Parse
// makes with what tc 6.1 itself encodes for the kernel (decoded with the
// same decoder Read uses), including the distribution tables tc loads from
// its .dist files. Times are whole multiples of 64 ns so that tc's 32-bit
// tick encoding is exact.
func TestConformsToIproute2(t *testing.T) {
	for _, s := range []string{
		"delay 40ms 5ms 25% distribution normal loss 1%",
		"delay 100ms 10ms distribution pareto",
		"delay 100ms 10ms distribution paretonormal",
		"delay 100ms 10ms distribution experimental",
		"loss random 5% 25%",
		"loss state 1%",
		"loss state 1% 30% 10% 80% 0.5%",
		"loss gemodel 1%",
		"loss gemodel 1% 10% 70% 0.1% ecn",
		"duplicate 1% 50% corrupt 0.1% 5%",
		"delay 10ms reorder 25% 50% gap 5",
		"delay 10ms reorder 25%",
		"rate 5kbit 20 100 5",
		"rate 50gbit",
		"rate 1mbit -14 limit 2k",
		"slot 1ms 2ms packets 4 bytes 1500",
		"slot distribution pareto 2ms 1ms bytes 2k",
		"limit 50 delay 1s",
	} {
		t.Run(s, func(t *testing.T) {
			p, err := Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			got, dt, st, err := decodeOptions(tcRequest(t, s))
			if err != nil {
				t.Fatal(err)
			}
			// tc omits attributes it was not asked for; the kernel then
			// keeps its zero state, which is what the Profile says too.
			if !quantised(got).Equal(quantised(p.KernelView())) {
				t.Fatalf("tc encodes %+v\nParse gives %+v", got, p.KernelView())
			}
			wantDT, _ := p.Distribution.Values()
			wantST, _ := p.Slot.Distribution.Values()
			if !slices.Equal(dt, wantDT) || !slices.Equal(st, wantST) {
				t.Fatalf("distribution tables differ from tc's (tc %d/%d entries, ours %d/%d)", len(dt), len(st), len(wantDT), len(wantST))
			}
			// And our own request decodes to the same thing.
			opts, err := encodeOptions(p)
			if err != nil {
				t.Fatal(err)
			}
			ours, _, _, err := decodeOptions(opts.Serialize()[4:])
			if err != nil || !ours.Equal(got) && !quantised(ours).Equal(quantised(got)) {
				t.Fatalf("our request decodes to %+v, tc's to %+v (%v)", ours, got, err)
			}
		})
	}
}

func TestCustomTableEncoded(t *testing.T) {
	p, err := Parse("delay 10ms 2ms distribution mine")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := encodeOptions(p); err == nil {
		t.Fatal("custom distribution without a table was encoded")
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	tab := []int16{-8192, -1, 0, 1, 8192}
	dist.Format(&buf, "mine", tab, false)
	os.WriteFile(filepath.Join(dir, "mine.dist"), buf.Bytes(), 0o644)
	if err := p.LoadTables(dir); err != nil {
		t.Fatal(err)
	}
	opts, err := encodeOptions(p)
	if err != nil {
		t.Fatal(err)
	}
	_, dt, _, _ := decodeOptions(opts.Serialize()[4:])
	if !slices.Equal(dt, tab) {
		t.Fatalf("sent table %v, want %v", dt, tab)
	}
	var fe *FieldError
	bad := Profile{Delay: 1, Jitter: 1, Distribution: Distribution{Name: "x"}}
	if _, err := encodeOptions(bad); !errors.As(err, &fe) {
		t.Fatalf("invalid profile encoded: %v", err)
	}
}
