package runner

import (
	"net/netip"
	"os"
	"path/filepath"

	"tokenbed/agent/ca"
	"tokenbed/harness/protocol"
	"tokenbed/internal/results"
)

// credentials creates the run's CA and every member's key pair, from src
// (nil: crypto/rand and the wall clock). Keys stay in a private temporary
// directory; certificates go to the results.
func (r *run) credentials(src *ca.Source) error {
	dir, err := os.MkdirTemp("", "tokenbed-"+r.o.RunID+"-keys-")
	if err != nil {
		return err
	}
	r.keyDir = dir
	if err := ca.InitWith(dir, src); err != nil {
		return err
	}
	copyFile(filepath.Join(dir, ca.CACertFile), filepath.Join(r.dir, results.CADir, ca.CACertFile))
	r.certPaths = make(map[string]string, len(r.order))
	for _, inst := range r.order {
		if err := ca.IssueWith(dir, inst, src); err != nil {
			return err
		}
		r.certPaths[inst] = filepath.Join(dir, ca.CertFile(inst))
		copyFile(filepath.Join(dir, ca.CertFile(inst)), filepath.Join(r.dir, results.CADir, ca.CertFile(inst)))
	}
	return nil
}

// writeConfigs writes every agent's configuration file (in the key
// directory: it names the keys). An agent knows every member of its
// replica that runs from the start; a later agent knows nobody until its
// join step (writeJoinConfig).
func (r *run) writeConfigs() error {
	for _, inst := range r.order {
		ar := r.agents[inst]
		var peers []string
		if !ar.spec.Later {
			for _, other := range r.order {
				oa := r.agents[other]
				if other != inst && oa.a.Replica == ar.a.Replica && !oa.spec.Later {
					peers = append(peers, other)
				}
			}
		}
		if err := r.writeConfig(inst, peers); err != nil {
			return err
		}
	}
	return nil
}

// writeJoinConfig gives a joining agent what 002 §3.2 gives it: the
// address of one member, via, and nothing else; it learns the others from
// the directories piggybacked on the passes. Restarted later, it starts
// from the same file.
func (r *run) writeJoinConfig(inst, via string) error { return r.writeConfig(inst, []string{via}) }

// writeConfig gives inst its configuration listing peers, as its
// protocol words it (processes.configure).
func (r *run) writeConfig(inst string, peers []string) error {
	ps := make([]protocol.Process, 0, len(peers))
	for _, other := range peers {
		ps = append(ps, r.process(other))
	}
	files := protocol.Files{CACert: filepath.Join(r.keyDir, ca.CACertFile), Credentials: r.keyDir,
		PeerCert: r.certPath,
		Log:      filepath.Join(r.absDir(), results.LogsDir, inst+".jsonl")}
	return r.procs.configure(r, inst, ps, files, r.e.Seed^hash(inst))
}

// certPath is the file of inst's certificate in the key directory: one
// string per member, which every configuration naming it shares.
func (r *run) certPath(inst string) string {
	if p, ok := r.certPaths[inst]; ok {
		return p
	}
	return filepath.Join(r.keyDir, ca.CertFile(inst))
}

// process is inst as its protocol sees it.
func (r *run) process(inst string) protocol.Process {
	ar := r.agents[inst]
	return protocol.Process{Instance: inst, Name: ar.a.Name, Replica: ar.a.Replica,
		Addr: netip.AddrPortFrom(ar.a.Addr, AgentPort), Spec: ar.spec}
}

func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
