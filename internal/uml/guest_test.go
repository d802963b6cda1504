package uml

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseStatus(t *testing.T) {
	for line, want := range map[string]guestStatus{
		"exit 0\n":                   {kind: "exit", detail: "0"},
		"exit 3\n":                   {kind: "exit", code: 3, detail: "3"},
		"signal 9\n":                 {kind: "signal", signal: syscall.SIGKILL, detail: "9"},
		"signal 11 core\n":           {kind: "signal", signal: syscall.SIGSEGV, core: true, detail: "11 core"},
		"exec-error No such file\n":  {kind: "exec-error", detail: "No such file"},
		"module-error sch_netem\n":   {kind: "module-error", detail: "sch_netem"},
		"setup-error cd /x failed\n": {kind: "setup-error", detail: "cd /x failed"},
	} {
		got, err := parseStatus(line)
		if err != nil || got != want {
			t.Errorf("parseStatus(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "exit", "exit -1", "exit 256", "exit x", "signal", "signal 0", "signal 9 dump", "signal 9 core x", "finished 0"} {
		if _, err := parseStatus(bad); err == nil {
			t.Errorf("parseStatus(%q) accepted a malformed line", bad)
		}
	}
}

// The generated scripts must parse: `sh -n` for the init, `perl -c` for
// the runner. Quoting is exercised with a directory name holding quotes.
func TestGuestScriptsParse(t *testing.T) {
	dir := t.TempDir()
	jobDir := filepath.Join(dir, `it's "quoted" $HOME`)
	g := &guestFiles{dir: dir, jobDir: jobDir, modules: []string{"sch_netem", "tun"}, modulesDir: "/usr/lib/uml/modules/6.1.176", version: "6.1.176"}
	if err := g.write([]string{"sh", "-c", "exit 0"}, []string{"A=1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"sh", "-n", filepath.Join(dir, fileInit)},
		{"sh", "-n", filepath.Join(dir, fileModprobe)},
		{"perl", "-c", filepath.Join(dir, fileRunner)},
	} {
		if _, err := exec.LookPath(c[0]); err != nil {
			t.Skipf("SKIP: %s not installed: %v", c[0], err)
		}
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	init, _ := os.ReadFile(filepath.Join(dir, fileInit))
	if !strings.Contains(string(init), `cd -- '`+strings.ReplaceAll(jobDir, `'`, `'\''`)+`'`) {
		t.Errorf("init does not cd to the quoted job directory:\n%s", init)
	}
	if !strings.Contains(string(init), "modprobe -a -- 'sch_netem' 'tun'") {
		t.Errorf("init does not load the modules:\n%s", init)
	}
	argv, _ := os.ReadFile(filepath.Join(dir, fileArgv))
	if string(argv) != "sh\x00-c\x00exit 0\x00" {
		t.Errorf("argv file %q", argv)
	}
}

// The runner, run on the host, records exact wait statuses and exec errors.
func TestRunnerRecordsWaitStatus(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skipf("SKIP: perl not installed: %v", err)
	}
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"sh", "-c", "exit 7"}, "exit 7\n"},
		{[]string{"sh", "-c", "kill -TERM $$"}, "signal 15\n"},
		{[]string{"sh", "-c", "exit 143"}, "exit 143\n"}, // what a shell would confuse with SIGTERM
		{[]string{"sh", "-c", `test "$X" = "a=b" && test -z "$HOME"`}, "exit 0\n"},
		{[]string{"/nonexistent/prog"}, "exec-error No such file or directory\n"},
	} {
		dir := t.TempDir()
		g := &guestFiles{dir: dir}
		if err := g.write(c.argv, []string{"X=a=b", "PATH=/usr/bin:/bin"}); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("perl", filepath.Join(dir, fileRunner), dir).CombinedOutput(); err != nil {
			t.Fatalf("runner %v: %v\n%s", c.argv, err, out)
		}
		got, _ := os.ReadFile(filepath.Join(dir, fileStatus))
		if string(got) != c.want {
			t.Errorf("runner %v recorded %q, want %q", c.argv, got, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, fileStarted)); err != nil {
			t.Errorf("runner %v did not mark the start: %v", c.argv, err)
		}
	}
}

func TestPanicScannerAcrossChunks(t *testing.T) {
	text := "boot ok\n[ 1.0] Kernel panic - not syncing: Attempted to kill init!\n"
	for split := range len(text) {
		var p panicScanner
		p.scan([]byte(text[:split]))
		p.scan([]byte(text[split:]))
		if !p.found {
			t.Fatalf("panic not found when split at %d", split)
		}
	}
	var p panicScanner
	p.scan([]byte("Kernel pan"))
	p.scan([]byte("ic - not syncin"))
	if p.found {
		t.Error("a partial marker counted as a panic")
	}
}
