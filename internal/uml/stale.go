package uml

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RemoveStale removes private directories (tokenbed-uml-*) that a crashed
// caller left in dir ("" means os.TempDir()): a Run removes its own on
// return, and the instance dies with its caller, but the directory stays.
// It leaves alone directories modified within minAge (a Run may be starting
// there), directories kept with Job.KeepDir, and directories a running
// linux.uml still uses. It returns the directories it removed.
//
// Equivalent to: `rm -rf /tmp/tokenbed-uml-*` for the unused ones.
func RemoveStale(dir string, minAge time.Duration) ([]string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	cands, err := filepath.Glob(filepath.Join(dir, dirPrefix+"*"))
	if err != nil {
		return nil, err
	}
	if len(cands) == 0 {
		return nil, nil
	}
	inUse, err := usedPrivateDirs()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, d := range cands {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() || time.Since(st.ModTime()) < minAge || inUse[d] {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, fileKeep)); err == nil {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}

// usedPrivateDirs returns the private directories named (uml_dir=...) on
// the command lines of running processes.
func usedPrivateDirs() (map[string]bool, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("uml: no processes visible in /proc; cannot tell which private directories are in use")
	}
	used := map[string]bool{}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if v, ok := strings.CutPrefix(string(arg), "uml_dir="); ok {
				used[filepath.Clean(v)] = true
			}
		}
	}
	return used, nil
}
