package ctrbackend

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Dockerfile is the run image's recipe: the top-level Dockerfile's (make
// image) files plus the pod holder, in one COPY. FROM scratch needs no
// registry; the agent is static (CGO_ENABLED=0), so it needs nothing
// else. No ENTRYPOINT: every container names its own (/agent or /pause),
// and with the legacy builder each instruction other than COPY costs a
// container commit (about 0.7 s here); the run label, given as a build
// option, is the one more step.
const Dockerfile = `# tokenbed agent image for one run (built by the harness, removed after it)
FROM scratch
COPY agent pause /
`

// buildImage builds tokenbed-agent:RUNID, labelled with the run ID, from a
// temporary context holding the Dockerfile, the agent binary and the pod
// holder program, through testcontainers-go's FromDockerfile.
//
// Equivalent to: `docker build -t tokenbed-agent:RUNID --label
// tokenbed.run=RUNID CONTEXT`.
func (b *Backend) buildImage(ctx context.Context) error {
	pause, err := PauseProgram("")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tokenbed-"+b.spec.RunID+"-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := copyExecutable(b.o.AgentBin, filepath.Join(dir, "agent")); err != nil {
		return fmt.Errorf("ctrbackend: image context: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pause"), pause, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(Dockerfile), 0o644); err != nil {
		return err
	}
	req := testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		Context:        dir,
		Dockerfile:     "Dockerfile",
		Repo:           ImageRepo,
		Tag:            b.spec.RunID,
		BuildLogWriter: b.o.BuildLog,
		KeepImage:      true, // removed by Teardown, by label, with everything else
		BuildOptionsModifier: func(o *client.ImageBuildOptions) {
			o.Labels = b.labels()
			o.Remove, o.ForceRemove = true, true // no intermediate containers left
		},
	}}
	// Not cancelled mid-way (see engineOp): a build cut off by Ctrl-C
	// leaves an unlabelled intermediate image behind for a moment.
	opCtx, cancel := engineOp(ctx)
	defer cancel()
	tag, err := b.prov.BuildImage(opCtx, &req)
	if err != nil {
		return fmt.Errorf("ctrbackend: build image %s:%s: %w", ImageRepo, b.spec.RunID, err)
	}
	b.image = tag
	return nil
}

// copyExecutable copies an ELF executable, refusing anything else (a
// script or a dynamically linked binary would not run FROM scratch).
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := checkStatic(in, src); err != nil {
		return err
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkStatic refuses a file that is not a statically linked ELF
// executable for this machine: the image has no dynamic loader or libc.
func checkStatic(r io.ReaderAt, name string) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("agent binary %s: not an ELF executable (%v)", name, err)
	}
	defer f.Close()
	if want := hostMachine(); want != elf.EM_NONE && f.Machine != want {
		return fmt.Errorf("agent binary %s: built for %v, this machine is %v", name, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("agent binary %s: dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0 (make build)", name)
		}
	}
	return nil
}

func hostMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}
