package uml

import (
	"bytes"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirEvent is a file created in the private directory, timed by the host
// clock when the host kernel reported it: the job's start and end are
// timed this way rather than by the guest's clock (a guest process that
// reads the clock costs a 10 ms fork, and perl-base has no sub-second time).
type dirEvent struct {
	name string
	at   time.Time
}

// dirWatch reports files created in a directory (inotify IN_CREATE).
type dirWatch struct {
	f      *os.File
	events chan dirEvent // closed when the watch ends
}

func watchDir(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("inotify_add_watch", err)
	}
	// A non-blocking descriptor joins Go's poller, so Close ends a Read.
	w := &dirWatch{f: os.NewFile(uintptr(fd), "inotify:"+dir), events: make(chan dirEvent, 16)}
	go w.loop()
	return w, nil
}

func (w *dirWatch) loop() {
	defer close(w.events)
	buf := make([]byte, 4096)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		at := time.Now()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := buf[off+unix.SizeofInotifyEvent : end]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			// Only the runner's two markers matter; each appears once,
			// so the buffered channel never fills.
			if s := string(name); s == fileStarted || s == fileStatus {
				w.events <- dirEvent{name: s, at: at}
			}
			off = end
		}
	}
}

func (w *dirWatch) close() { w.f.Close() }
