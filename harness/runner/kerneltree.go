package runner

import (
	"errors"
	"fmt"
	"net/netip"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/netem"
)

// kernelTrees are the trees impairKernel applies, one per receiver: every
// other agent of its replica as a sender, with the port its packets enter
// the network by (Via), so that a duplicating sender can get a device of
// its own (netem.SourceTree explains why it must).
func (r *run) kernelTrees() (map[string]netem.SourceTree, map[string]backend.Port, error) {
	trees := map[string]netem.SourceTree{}
	ports := map[string]backend.Port{}
	for _, inst := range r.order {
		port, err := r.be.IngressPort(inst)
		if err != nil {
			return nil, nil, err
		}
		ports[inst] = port
	}
	for i, inst := range r.order {
		ar, port := r.agents[inst], ports[inst]
		// Own devices carry the run ID (the container backend's ports
		// are in the host's namespace, where a killed run leaves them).
		st := netem.SourceTree{Link: port.Link, Host: netip.PrefixFrom(ar.a.Addr, 32), Devices: fmt.Sprintf("%s%x", r.o.RunID, i)}
		for _, other := range r.order {
			oa := r.agents[other]
			if oa.a.Replica != ar.a.Replica || other == inst {
				continue
			}
			d, _ := r.e.Direction(oa.a.Name, ar.a.Name)
			src := netem.Source{Dest: netem.Dest{Prefix: netip.PrefixFrom(oa.a.Addr, 32), Profile: experiments.ScaleNetwork(d.Profile, r.e.NetworkTimeScale)},
				MayDuplicate: laterDuplicates(r.e, oa.a.Name, ar.a.Name)}
			if ports[other].NSPath == port.NSPath {
				src.Via = ports[other].Link
			}
			st.Sources = append(st.Sources, src)
		}
		trees[inst] = st
	}
	return trees, ports, nil
}

// laterDuplicates says whether a profile step of the schedule gives the
// direction from>to (agent names) a duplicating profile.
func laterDuplicates(e *experiments.Experiment, from, to string) bool {
	for _, s := range e.Schedule {
		if s.Action != experiments.ActProfile || s.Profile == nil || s.Profile.Duplicate == 0 {
			continue
		}
		if (s.From == from && s.To == to) || (s.Both && s.From == to && s.To == from) {
			return true
		}
	}
	return false
}

// impairKernel applies every direction's profile with the kernel's netem
// on the queue toward its receiver, keyed by sender. When some direction
// duplicates beside others and this kernel cannot give it a device of its
// own, the whole run takes the userspace engine instead (a run the user
// could have had must not fail), says so in a log line and the event log,
// and records it in run.json (impairment, impairment_reason).
func (r *run) impairKernel() error {
	trees, ports, err := r.kernelTrees()
	if err != nil {
		return err
	}
	byAddr := map[netip.Addr]string{} // instances (replicas have distinct subnets)
	for _, inst := range r.order {
		byAddr[r.agents[inst].a.Addr] = inst
	}
	needOwn := false
	for _, st := range trees {
		for _, p := range st.Plan(nil) {
			needOwn = needOwn || p.Own || p.Err != nil
		}
	}
	if needOwn {
		var cannot []error
		// Listed first, so that harness clean removes it after a kill -9.
		if err := r.o.Claim.AddNamespaces(netem.OwnCheckNS(r.o.RunID)); err != nil {
			return err
		}
		capErr := netem.CheckOwnDevice(r.o.RunID)
		if errors.Is(capErr, netem.ErrNoNetem) {
			// No kernel path at all: the caller chose it wrongly.
			return fmt.Errorf("kernel impairment: %w", capErr)
		}
		for _, inst := range r.order {
			for _, p := range trees[inst].Plan(capErr) {
				if p.Err != nil {
					cannot = append(cannot, fmt.Errorf("direction %s>%s: %w", byAddr[p.Source.Addr()], inst, p.Err))
				}
			}
		}
		if len(cannot) > 0 {
			why := errors.Join(cannot...).Error()
			r.o.Log.Warn("kernel netem cannot take every duplicating direction; using the userspace engine for the run", "why", why)
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "impairment_fallback", Detail: "kernel netem cannot take every duplicating direction, using the userspace engine: " + why})
			r.o.Impair, r.info.Impairment = ImpairUserspace, ImpairUserspace
			r.info.ImpairWhy = r.o.ImpairReason + "; then the userspace engine, because " + why
			return r.impairUserspace()
		}
	}
	if devs := hostDevices(r.order, trees, ports); len(devs) > 0 && r.o.Claim != nil {
		if err := r.o.Claim.AddDevices(devs...); err != nil {
			return err
		}
	}
	for _, inst := range r.order {
		st := trees[inst]
		t, err := st.Apply(ports[inst].NS)
		if err != nil {
			return fmt.Errorf("impairment toward %s: %w", inst, err)
		}
		r.trees[inst] = t
		for _, s := range st.Sources {
			if dev := t.Own(s.Prefix); dev != "" {
				r.o.Log.Info("duplicating direction on a device of its own", "link", byAddr[s.Prefix.Addr()]+">"+inst, "device", dev)
			}
		}
	}
	for _, d := range r.e.Directions {
		r.event(eventlog.Event{Kind: eventlog.LinkProfile, Link: d.Key(), Profile: experiments.ScaleNetwork(d.Profile, r.e.NetworkTimeScale).String(), Detail: "paper: " + d.Text})
	}
	return nil
}

// removeOwnDevices removes the trees that have devices of their own: the
// backend's teardown removes the rest with the ports, but an own device
// in the host's namespace (container backend) would outlive the run.
func (r *run) removeOwnDevices() error {
	var errs []error
	for inst, t := range r.trees {
		if len(t.OwnDevices()) > 0 {
			if err := t.Remove(); err != nil {
				errs = append(errs, fmt.Errorf("impairment toward %s: %w", inst, err))
			}
		}
	}
	return errors.Join(errs...)
}
