package capture_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/harness/capture"
	"tokenbed/internal/pcapread"
)

// Cutting a capture anywhere and repairing it gives back exactly the whole
// blocks before the cut, which the capture reader (internal/pcapread)
// reads to a clean end of file.
func TestRepairCutAnywhere(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ends := []int{buf.Len()} // block boundaries after the header
	for i := 0; i < 5; i++ {
		data := bytes.Repeat([]byte{byte(i)}, 60+i*7)
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, int64(i)), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacketWithOptions(ci, data, pcapgo.NgPacketOptions{Comments: []string{strings.Repeat("c", i)}}); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		ends = append(ends, buf.Len())
	}
	whole := buf.Bytes()
	path := filepath.Join(t.TempDir(), "cut.pcapng")
	for cut := ends[0]; cut <= len(whole); cut++ {
		os.WriteFile(path, whole[:cut], 0o644)
		removed, err := capture.Repair(path)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		want := 0
		for _, e := range ends {
			if e <= cut {
				want = e
			}
		}
		if removed != int64(cut-want) {
			t.Fatalf("cut at %d: removed %d bytes, want %d", cut, removed, cut-want)
		}
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, whole[:want]) {
			t.Fatalf("cut at %d: repaired file differs from the first %d bytes", cut, want)
		}
		r, err := pcapread.NewReader(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("cut at %d: after repair: %v", cut, err)
			}
			n++
		}
		if n != indexOf(ends, want) {
			t.Fatalf("cut at %d: %d packets after repair", cut, n)
		}
		if again, err := capture.Repair(path); again != 0 || err != nil {
			t.Fatalf("cut at %d: second repair removed %d (%v)", cut, again, err)
		}
	}
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestRepairRefusesCorruption(t *testing.T) {
	var buf bytes.Buffer
	w, _ := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	data := make([]byte, 60)
	w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 60, Length: 60}, data)
	w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(2, 0), CaptureLength: 60, Length: 60}, data)
	w.Flush()
	b := buf.Bytes()
	b[len(b)-1-92] ^= 0xff // the trailing length of the first packet block
	path := filepath.Join(t.TempDir(), "corrupt.pcapng")
	os.WriteFile(path, b, 0o644)
	if _, err := capture.Repair(path); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Repair of a corrupt file: %v, want an error", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, b) {
		t.Error("Repair modified a corrupt file")
	}
	os.WriteFile(path, []byte("not a capture at all"), 0o644)
	if _, err := capture.Repair(path); err == nil || !strings.Contains(err.Error(), "not a pcapng file") {
		t.Errorf("Repair of a text file: %v", err)
	}
}
