package capture_test

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// record is one packet block of a pcapng file.
type record struct {
	frame    int // 1-based position in the file, as tshark numbers frames
	iface    int
	ifName   string
	lt       layers.LinkType
	ci       gopacket.CaptureInfo
	data     []byte
	comments []string
}

type capFile struct {
	ifaces  []pcapgo.NgInterface
	records []record
	section pcapgo.NgSectionInfo
}

// readFile reads a whole pcapng file with gopacket's reader, which must
// reach a clean end of file (no partial block). It reads the blocks raw,
// not through the analyses' reader (internal/pcapread), because these
// tests check what the writer put in each block, down to what the
// analyses' reader leaves out: the section's comment, the statistics
// blocks' received counts and end times, the annotations' packet
// comments.
func readFile(t testing.TB, path string) capFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var cf capFile
	cf.section = r.SectionInfo()
	for i := 1; ; i++ {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: record %d: %v (want whole blocks up to a clean end of file)", path, i, err)
		}
		for len(cf.ifaces) < r.NInterfaces() {
			ifc, err := r.Interface(len(cf.ifaces))
			if err != nil {
				t.Fatal(err)
			}
			cf.ifaces = append(cf.ifaces, ifc)
		}
		cf.records = append(cf.records, record{
			frame: i, iface: ci.InterfaceIndex, ifName: cf.ifaces[ci.InterfaceIndex].Name,
			lt: ci.AncillaryData[0].(layers.LinkType), ci: ci, data: data, comments: opts.Comments,
		})
	}
	// Again, for the statistics blocks at the end.
	cf.ifaces = cf.ifaces[:0]
	for i := 0; i < r.NInterfaces(); i++ {
		ifc, err := r.Interface(i)
		if err != nil {
			t.Fatal(err)
		}
		cf.ifaces = append(cf.ifaces, ifc)
	}
	return cf
}

func (cf capFile) ifaceIndex(name string) int {
	for i, ifc := range cf.ifaces {
		if ifc.Name == name {
			return i
		}
	}
	return -1
}
