package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Repair truncates the pcapng file at path after its last whole block and
// returns the number of bytes removed (0 for an intact file).
//
// A capture killed with SIGKILL normally ends on a block boundary (see the
// package documentation), but not always: when the kill lands while the
// kernel copies a write of several pages into the file, the write stops at
// a page boundary and the file ends inside a block. Readers then report the
// file as cut short (tshark exits with status 2). Repair removes that tail
// and nothing else: a block whose length fields disagree before the end is
// corruption, reported as an error, and the file is left untouched.
// Equivalent to what `pcapfix` does for this one case.
func Repair(path string) (removed int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("capture: repair: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("capture: repair: %w", err)
	}
	end, err := lastWholeBlock(f, fi.Size())
	if err != nil {
		return 0, fmt.Errorf("capture: repair %s: %w", path, err)
	}
	if end == fi.Size() {
		return 0, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, fmt.Errorf("capture: repair %s: %w", path, err)
	}
	return fi.Size() - end, f.Sync()
}

// lastWholeBlock returns the offset just after the last complete block of
// a pcapng stream of the given size.
func lastWholeBlock(r io.ReaderAt, size int64) (int64, error) {
	const shbType = 0x0a0d0d0a
	var hdr [12]byte
	var order binary.ByteOrder = binary.LittleEndian
	var off int64
	for off < size {
		if size-off < 12 {
			break // partial block header
		}
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return 0, err
		}
		if binary.LittleEndian.Uint32(hdr[0:4]) == shbType {
			// A section header sets the byte order of its section.
			switch binary.LittleEndian.Uint32(hdr[8:12]) {
			case 0x1a2b3c4d:
				order = binary.LittleEndian
			case 0x4d3c2b1a:
				order = binary.BigEndian
			default:
				return 0, fmt.Errorf("offset %d: section header with a bad byte-order magic", off)
			}
		} else if off == 0 {
			return 0, errors.New("not a pcapng file (no section header at offset 0)")
		}
		n := int64(order.Uint32(hdr[4:8]))
		if n < 12 || n%4 != 0 {
			return 0, fmt.Errorf("offset %d: block length %d", off, n)
		}
		if off+n > size {
			break // partial block
		}
		var trailer [4]byte
		if _, err := r.ReadAt(trailer[:], off+n-4); err != nil {
			return 0, err
		}
		if int64(order.Uint32(trailer[:])) != n {
			return 0, fmt.Errorf("offset %d: block length %d, trailing length %d: corrupt", off, n, order.Uint32(trailer[:]))
		}
		off += n
	}
	if off == 0 {
		return 0, errors.New("no complete section header")
	}
	return off, nil
}
