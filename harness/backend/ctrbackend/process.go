package ctrbackend

// Agent processes: a container in its pod's namespace, started,
// signalled and waited for as a process.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"golang.org/x/sys/unix"

	"tokenbed/harness/backend"
)

// Start implements backend.Backend: a new agent container in the pod's
// namespace runs the image's copy of cmd.Path with cmd.Args. The previous
// container of the instance, if any, must have exited; it is removed
// first (its output was already copied to its Stdout/Stderr).
func (b *Backend) Start(ctx context.Context, instance string, c backend.Cmd) (backend.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := b.pod(instance)
	if err != nil {
		return nil, err
	}
	if err := b.sameAgent(c.Path); err != nil {
		return nil, err
	}
	ctx, cancel := engineOp(ctx)
	defer cancel()
	b.mu.Lock()
	prev, prevID := p.proc, p.ctr
	b.mu.Unlock()
	if prev != nil {
		select {
		case <-prev.done:
		default:
			return nil, fmt.Errorf("ctrbackend: start %s: its agent container %.12s is still running", instance, prevID)
		}
	}
	if prevID != "" {
		if _, err := b.cli.ContainerRemove(ctx, prevID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("ctrbackend: remove the previous container of %s: %w", instance, err)
		}
	}
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var mounts []mount.Mount
	for _, m := range b.spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m, Target: m})
	}
	name := agentName(b.spec.RunID, instance)
	req := testcontainers.ContainerRequest{
		Image:      b.image,
		Name:       name,
		Entrypoint: []string{AgentPath},
		Cmd:        c.Args,
		Env:        env,
		Labels:     b.labels(LabelInstance, instance, LabelRole, "agent"),
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.NetworkMode = container.NetworkMode("container:" + p.holderID)
			hc.Mounts = mounts
			// The agent binds a port above 1024 and reads and writes
			// files it owns: the one capability it needs is for its
			// --rt-priority, as in the netns backend (realtime.go).
			hc.CapDrop = []string{"ALL"}
			hc.CapAdd = []string{"SYS_NICE"}
			hc.ReadonlyRootfs = true
			hc.CgroupParent = b.rt.parent
			hc.CPURealtimeRuntime = b.rt.share
		},
	}
	stdout, err := dupFile(c.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := dupFile(c.Stderr)
	if err != nil {
		closeFile(stdout)
		return nil, err
	}
	ctr, err := b.prov.CreateContainer(ctx, req)
	if ctr != nil {
		b.mu.Lock()
		p.ctr = ctr.GetContainerID()
		b.mu.Unlock()
	}
	if err == nil {
		err = ctr.Start(ctx)
	}
	var st *container.State
	if err == nil {
		st, err = b.inspect(ctx, ctr.GetContainerID())
	}
	if err != nil {
		closeFile(stdout)
		closeFile(stderr)
		return nil, fmt.Errorf("ctrbackend: start %s: %w", name, err)
	}
	pr := &proc{b: b, id: ctr.GetContainerID(), name: name, pid: st.Pid, pidfd: -1, done: make(chan struct{})}
	// A pidfd names this process, never one that reuses its PID later.
	if fd, err := unix.PidfdOpen(st.Pid, 0); err == nil {
		pr.pidfd = fd
	}
	b.mu.Lock()
	p.proc = pr
	b.procs = append(b.procs, pr)
	b.mu.Unlock()
	pr.follow(stdout, stderr)
	return pr, nil
}

// sameAgent checks that path is the binary the image was built from: a
// container can only run what is in its image.
func (b *Backend) sameAgent(path string) error {
	want, err := os.Stat(b.o.AgentBin)
	if err != nil {
		return fmt.Errorf("ctrbackend: agent binary: %w", err)
	}
	got, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("ctrbackend: start %s: %w", path, err)
	}
	if !os.SameFile(want, got) {
		return fmt.Errorf("ctrbackend: start %s: the run's image holds %s, not this program", path, b.o.AgentBin)
	}
	return nil
}

// dupFile returns a descriptor of its own on f (the caller may close f as
// soon as Start returns, while the container's output still flows).
func dupFile(f *os.File) (*os.File, error) {
	if f == nil {
		return nil, nil
	}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: dup %s: %w", f.Name(), err)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// proc is an agent container seen as a process.
type proc struct {
	b     *Backend
	id    string
	name  string
	pid   int
	fdMu  sync.Mutex // pidfd is closed when the container ends
	pidfd int        // -1 if none: signals go through the engine

	done chan struct{}
	code int
	sig  syscall.Signal
	err  error
}

func (p *proc) Pid() int { return p.pid }

// Signal sends s to the agent (PID 1 of its container).
//
// Equivalent to: `docker kill -s SIG RUNID-INSTANCE`. The signal goes
// straight to the container's PID 1 as the host sees it, which is what
// runc does for `docker kill`, without the API round trip (10–20 ms here):
// a schedule's crash of the holder must land while it still holds the
// token, as it does with the netns backend. Docker then sees its
// container exit. Where the harness may not signal it (no CAP_KILL over
// the container's user), the request goes through the engine.
func (p *proc) Signal(s syscall.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	p.fdMu.Lock()
	var err error = unix.EBADF
	if p.pidfd >= 0 {
		err = unix.PidfdSendSignal(p.pidfd, s, nil, 0)
	}
	p.fdMu.Unlock()
	switch err {
	case nil:
		return nil
	case unix.ESRCH:
		return os.ErrProcessDone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.b.cli.ContainerKill(ctx, p.id, client.ContainerKillOptions{Signal: fmt.Sprint(int(s))})
	if err != nil && (cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err)) {
		return os.ErrProcessDone // it ended between the check and the kill
	}
	if err != nil {
		return fmt.Errorf("ctrbackend: kill -s %d %s: %w", int(s), p.name, err)
	}
	return nil
}

func (p *proc) Wait() (int, syscall.Signal, error) {
	<-p.done
	return p.code, p.sig, p.err
}

// follow copies the container's output to stdout and stderr until it
// ends, and waits for its exit status. The engine reports death by signal
// N as exit status 128+N (the runtime's convention); it is returned as
// (-1, N), as the netns backend does.
func (p *proc) follow(stdout, stderr *os.File) {
	ctx := context.Background()
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		rc, err := p.b.cli.ContainerLogs(ctx, p.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
		if err != nil {
			return
		}
		defer rc.Close()
		var out, errw io.Writer = io.Discard, io.Discard
		if stdout != nil {
			out = stdout
		}
		if stderr != nil {
			errw = stderr
		}
		stdcopy.StdCopy(out, errw, rc)
	}()
	go func() {
		defer close(p.done)
		defer func() {
			p.fdMu.Lock()
			if p.pidfd >= 0 {
				unix.Close(p.pidfd)
				p.pidfd = -1
			}
			p.fdMu.Unlock()
		}()
		defer closeFile(stdout)
		defer closeFile(stderr)
		w := p.b.cli.ContainerWait(ctx, p.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case res := <-w.Result:
			code := int(res.StatusCode)
			if res.Error != nil && res.Error.Message != "" {
				p.err = fmt.Errorf("ctrbackend: %s: %s", p.name, res.Error.Message)
			}
			if code > 128 && code < 128+65 {
				p.code, p.sig = -1, syscall.Signal(code-128)
			} else {
				p.code = code
			}
		case err := <-w.Error:
			p.code, p.err = -1, fmt.Errorf("ctrbackend: wait for %s: %w", p.name, err)
		}
		// The log stream ends with the container; bound the wait in case
		// the engine keeps it open.
		select {
		case <-logsDone:
		case <-time.After(5 * time.Second):
		}
	}()
}
