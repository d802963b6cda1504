package tokenpassing

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/internal/pcapread"
)

// A failure bundle's slice of the capture keeps the records in its window,
// on the interfaces they refer to, named and described as in the
// capture; a capture cut inside a record (its writer killed) is sliced up
// to the cut.
func TestSlicePcap(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{Name: "A/eth0", Description: "veth of A", LinkType: layers.LinkTypeEthernet}, pcapgo.NgWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddInterface(pcapgo.NgInterface{Name: "B/eth0", Description: "veth of B", LinkType: layers.LinkTypeEthernet}); err != nil {
		t.Fatal(err)
	}
	for i, iface := range []int{0, 1, 0} {
		data := bytes.Repeat([]byte{byte(i + 1)}, 60)
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(i+1), 0), CaptureLength: len(data), Length: len(data), InterfaceIndex: iface}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "capture.pcapng"), filepath.Join(dir, "slice.pcapng")
	whole := buf.Bytes()
	for _, c := range []struct {
		name  string
		bytes []byte
		want  []byte // the first byte of each record kept
	}{
		{"whole", whole, []byte{2, 3}},
		{"cut in the last record", whole[:len(whole)-10], []byte{2}},
	} {
		if err := os.WriteFile(src, c.bytes, 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := slicePcap(src, dst, int64(1500*time.Millisecond), int64(3*time.Second))
		if err != nil || n != len(c.want) {
			t.Fatalf("%s: %d records, %v; want %d", c.name, n, err, len(c.want))
		}
		out, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcapread.NewReader(bytes.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			p, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: the slice: %v", c.name, err)
			}
			got = append(got, p.Data[0])
			if want := time.Unix(int64(p.Data[0]), 0); !p.Time.Equal(want) || len(p.Data) != 60 {
				t.Errorf("%s: record %d at %v, %d bytes; want %v, 60", c.name, p.Record, p.Time, len(p.Data), want)
			}
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: records % x, want % x", c.name, got, c.want)
		}
		for i, want := range []pcapread.Interface{{Name: "A/eth0", Description: "veth of A", LinkType: layers.LinkTypeEthernet}, {Name: "B/eth0", Description: "veth of B", LinkType: layers.LinkTypeEthernet}} {
			if ifc, err := r.Interface(i); err != nil || ifc != want {
				t.Errorf("%s: interface %d %+v, %v; want %+v", c.name, i, ifc, err, want)
			}
		}
	}
}
