package uml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// follower copies what the guest appends to a file on the shared root to a
// writer, like `tail -f`. hostfs writes through to the host file at once,
// so polling the file is enough.
type follower struct {
	name   string
	f      *os.File
	w      io.Writer    // may be nil
	onData func([]byte) // may be nil; sees every byte, in order
	buf    []byte
	err    error // first write error; copying stops there
}

// newFollower follows path; it returns nil when there is nobody to tell.
func newFollower(name, path string, w io.Writer, onData func([]byte)) (*follower, error) {
	if w == nil && onData == nil {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &follower{name: name, f: f, w: w, onData: onData, buf: make([]byte, 64*1024)}, nil
}

// pump copies everything written since the last call.
func (fl *follower) pump() {
	if fl == nil {
		return
	}
	for {
		n, err := fl.f.Read(fl.buf)
		if n > 0 && fl.onData != nil {
			fl.onData(fl.buf[:n])
		}
		if n > 0 && fl.w != nil && fl.err == nil {
			if _, werr := fl.w.Write(fl.buf[:n]); werr != nil {
				fl.err = fmt.Errorf("uml: copying the job's %s: %w", fl.name, werr)
			}
		}
		if n == 0 || err != nil {
			if err != nil && !errors.Is(err, io.EOF) && fl.err == nil {
				fl.err = fmt.Errorf("uml: reading the job's %s: %w", fl.name, err)
			}
			return
		}
	}
}

func (fl *follower) close() error {
	if fl == nil {
		return nil
	}
	fl.pump()
	fl.f.Close()
	return fl.err
}

// sameWriter reports whether a and b are the same writer, without
// panicking on writers whose dynamic type is not comparable.
func sameWriter(a, b io.Writer) (same bool) {
	if a == nil || b == nil {
		return false
	}
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// panicMarker is what the guest kernel prints when it panics.
const panicMarker = "Kernel panic - not syncing"

// panicScanner looks for panicMarker in a stream, across chunk boundaries.
type panicScanner struct {
	tail  []byte
	found bool
}

func (p *panicScanner) scan(b []byte) {
	if p.found {
		return
	}
	buf := append(p.tail, b...)
	if bytes.Contains(buf, []byte(panicMarker)) {
		p.found = true
		return
	}
	if keep := len(panicMarker) - 1; len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	p.tail = append(p.tail[:0], buf...)
}
