package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/internal/results"
)

// The run registry: /run/tokenbed/RUNID, one JSON entry per run, created
// exclusively (O_EXCL) before the run writes anything, so that two runs can
// never share an ID, and listing every namespace before it is created, so
// that harness clean removes what a tokenbed run made and nothing else. A
// run that ends removes its entry; a killed run leaves it for harness
// clean. /run is a tmpfs: the registry does not outlive a reboot, and
// neither does anything it lists.
const registryDir = "/run/tokenbed"

// ErrRunIDTaken: the run ID is registered (a live run, or a killed one
// not yet cleaned) or already has results.
var ErrRunIDTaken = errors.New("run ID taken")

// Entry is a run's registry entry.
type Entry struct {
	RunID string `json:"run_id"`
	PID   int    `json:"pid"`
	// PIDStart is the harness's start time (field 22 of /proc/PID/stat):
	// a PID reused by another process has another.
	PIDStart uint64 `json:"pid_start"`
	// Results is the run's results directory (absolute); "" for a run
	// that writes none (harness preflight).
	Results    string   `json:"results,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	// Devices are links the run creates in the harness's own network
	// namespace (an IFB device of a duplicating direction, when the
	// backend's ports are there: containers). A namespace takes its links
	// with it; these would outlive a killed run.
	Devices []string `json:"devices,omitempty"`
	// Dirs are directories the run made outside its results directory
	// (the state, spool and munge key of an in-namespace Slurm cluster):
	// each absolute, its last element holding the run ID.
	Dirs []string `json:"dirs,omitempty"`
}

// Alive reports whether the harness that made the entry still runs.
func (e Entry) Alive() bool {
	if e.PID <= 0 || syscall.Kill(e.PID, 0) != nil {
		return false
	}
	return e.PIDStart == 0 || procStart(e.PID) == e.PIDStart
}

func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// Claim is a run's hold on its ID.
type Claim struct {
	mu       sync.Mutex
	e        Entry
	released bool
}

// ClaimID registers runID for this process. It refuses an ID that is
// registered, live or not, and one whose results directory resultsDir
// ("" for none) exists already: reusing either would mix two runs.
func ClaimID(runID, resultsDir string) (*Claim, error) {
	if !backend.ValidRunID(runID) {
		return nil, fmt.Errorf("run ID %q: want tb and six hex digits", runID)
	}
	if resultsDir != "" {
		abs, err := filepath.Abs(resultsDir)
		if err != nil {
			return nil, err
		}
		resultsDir = abs
	}
	if err := os.MkdirAll(registryDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(registryDir, runID)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		if old, rerr := readEntry(runID); rerr == nil && old.Alive() {
			return nil, fmt.Errorf("%w: run %s is running (harness pid %d)", ErrRunIDTaken, runID, old.PID)
		}
		return nil, fmt.Errorf("%w: run %s was killed and not cleaned up (%s): harness clean --run %s", ErrRunIDTaken, runID, path, runID)
	}
	if err != nil {
		return nil, err
	}
	c := &Claim{e: Entry{RunID: runID, PID: os.Getpid(), PIDStart: procStart(os.Getpid()), Results: resultsDir}}
	// The entry's content goes into the file created exclusively, so a
	// reader never finds it without the PID that makes it live.
	b, _ := json.Marshal(c.e)
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, werr
	}
	if resultsDir != "" {
		if _, err := os.Lstat(resultsDir); err == nil {
			os.Remove(path)
			return nil, fmt.Errorf("%w: %s exists: the results of another run", ErrRunIDTaken, resultsDir)
		}
	}
	return c, nil
}

func (c *Claim) write() error { return results.WriteJSON(registryDir, c.e.RunID, c.e) }

// RunID is the claimed ID.
func (c *Claim) RunID() string { return c.e.RunID }

// AddNamespaces records namespaces the run is about to create.
func (c *Claim) AddNamespaces(names ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.e.Namespaces = append(c.e.Namespaces, names...)
	return c.write()
}

// AddDevices records links the run is about to create in the harness's
// own network namespace.
func (c *Claim) AddDevices(names ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.e.Devices = append(c.e.Devices, names...)
	return c.write()
}

// AddDirs records directories the run is about to create. Each must be
// absolute and name the run in its last element, so that harness clean
// never removes a directory that is not the run's.
func (c *Claim) AddDirs(dirs ...string) error {
	for _, d := range dirs {
		if err := ownDir(c.e.RunID, d); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.e.Dirs = append(c.e.Dirs, dirs...)
	return c.write()
}

func ownDir(runID, d string) error {
	if !filepath.IsAbs(d) || filepath.Clean(d) != d || !strings.Contains(filepath.Base(d), runID) {
		return fmt.Errorf("directory %q: want an absolute, clean path whose last element holds the run ID %s", d, runID)
	}
	return nil
}

// Release removes the entry: the run is over and left nothing. Only the
// claim's owner removes it, once.
func (c *Claim) Release() {
	if c == nil {
		return // a simulated run claims nothing
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.released {
		os.Remove(filepath.Join(registryDir, c.e.RunID))
		c.released = true
	}
}

// claimResults creates the run's results directory, exclusively.
func claimResults(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s exists: the results of another run", ErrRunIDTaken, dir)
		}
		return err
	}
	return nil
}

func readEntry(runID string) (Entry, error) {
	b, err := os.ReadFile(filepath.Join(registryDir, runID))
	if err != nil {
		return Entry{}, err
	}
	e := Entry{RunID: runID}
	if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
		// An entry of an older harness: its PID only, no namespaces.
		e.PID = pid
		return e, nil
	}
	err = json.Unmarshal(b, &e)
	return e, err
}

// Registered returns every run registry entry.
func Registered() []Entry {
	ents, _ := os.ReadDir(registryDir)
	var out []Entry
	for _, d := range ents {
		if !backend.ValidRunID(d.Name()) {
			continue
		}
		e, err := readEntry(d.Name())
		if err != nil {
			e = Entry{RunID: d.Name()} // unreadable: dead, lists nothing
		}
		out = append(out, e)
	}
	return out
}

// Lookup returns runID's registry entry.
func Lookup(runID string) (Entry, bool) {
	if !backend.ValidRunID(runID) {
		return Entry{}, false
	}
	if _, err := os.Stat(filepath.Join(registryDir, runID)); err != nil {
		return Entry{}, false
	}
	e, err := readEntry(runID)
	if err != nil {
		e = Entry{RunID: runID}
	}
	return e, true
}

// LiveRuns returns the run IDs whose harness process is still alive.
func LiveRuns() map[string]bool {
	live := map[string]bool{}
	for _, e := range Registered() {
		if e.Alive() {
			live[e.RunID] = true
		}
	}
	return live
}

// keyDirPattern matches the private key directories of a run.
func keyDirPattern(runID string) string {
	return filepath.Join(os.TempDir(), "tokenbed-"+runID+"-keys-*")
}

// MarkKilled records in dir's run.json that the run ended without its
// harness finishing it, if it still says running.
func MarkKilled(dir, why string) bool { return markEnded(dir, "killed", why) }

// MarkKilledIfDead marks dir's run killed when its run.json still says
// running and no live harness holds its ID.
func MarkKilledIfDead(dir, why string) bool {
	var info results.RunInfo
	if results.ReadJSON(dir, results.RunFile, &info) != nil || info.Status != "running" {
		return false
	}
	if e, ok := Lookup(info.RunID); ok && e.Alive() {
		return false
	}
	return MarkKilled(dir, why)
}

// markEnded sets the status of a run.json that still says running.
func markEnded(dir, status, why string) bool {
	var info results.RunInfo
	if results.ReadJSON(dir, results.RunFile, &info) != nil || info.Status != "running" {
		return false
	}
	info.Status, info.Error, info.Finished = status, why, time.Now().UTC()
	return results.WriteJSON(dir, results.RunFile, info) == nil
}

// CleanDead removes what the dead run e left: the processes in its
// namespaces and the namespaces it registered, its key directory; it
// records the run as killed in its run.json and removes its entry. say
// receives one line per thing removed.
func CleanDead(e Entry, say func(string)) error {
	if e.Alive() {
		return fmt.Errorf("run %s is running (harness pid %d)", e.RunID, e.PID)
	}
	removed, err := nsbackend.RemoveNamespaces(e.Namespaces)
	for _, n := range removed {
		say("removed namespace " + n)
	}
	for _, d := range e.Devices {
		gone, derr := removeIFB(d)
		err = errors.Join(err, derr)
		if gone {
			say("removed device " + d)
		}
	}
	for _, d := range e.Dirs {
		if ownDir(e.RunID, d) != nil {
			continue // an entry edited by hand: not provably the run's
		}
		if _, serr := os.Lstat(d); serr != nil {
			continue
		}
		if rerr := os.RemoveAll(d); rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		say("removed directory " + d)
	}
	dirs, _ := filepath.Glob(keyDirPattern(e.RunID))
	for _, d := range dirs {
		if rerr := os.RemoveAll(d); rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		say("removed key directory " + d)
	}
	if e.Results != "" && MarkKilled(e.Results, fmt.Sprintf("the harness (pid %d) died before finishing the run; found by harness clean", e.PID)) {
		say("marked " + filepath.Join(e.Results, results.RunFile) + " killed")
	}
	if err == nil {
		os.Remove(filepath.Join(registryDir, e.RunID))
		say("removed registry entry " + filepath.Join(registryDir, e.RunID))
	}
	return err
}

// Abandon tidies after a run whose harness could not (its User Mode
// Linux instance died): it removes the run's key directory and marks
// run.json interrupted if it still says running.
func Abandon(resultsRoot, runID, why string) {
	dirs, _ := filepath.Glob(keyDirPattern(runID))
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	markEnded(filepath.Join(resultsRoot, runID), "interrupted", why)
}
