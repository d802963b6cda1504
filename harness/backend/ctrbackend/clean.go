package ctrbackend

import (
	"context"
	"errors"
	"fmt"
	"sort"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"tokenbed/harness/backend"
)

// Object is a Docker object of a run, or the run's cgroup.
type Object struct {
	Kind  string // "container", "cgroup", "network" or "image"
	ID    string
	Name  string // container, network or cgroup name, or image tag
	RunID string
}

func (o Object) String() string { return fmt.Sprintf("%s %s (run %s)", o.Kind, o.Name, o.RunID) }

// Leftovers lists the containers, networks and images labelled with run
// ID runID (every run when empty), and the runs' parent cgroups
// (tokenbed-RUNID, see realtime.go). Only label values and names that are
// valid run IDs count: nothing else is ever listed, or removed by Clean.
//
// Equivalent to: `docker ps -a --filter label=tokenbed.run`, `docker
// network ls --filter label=tokenbed.run`, `docker images --filter
// label=tokenbed.run`, `ls -d /sys/fs/cgroup/*/tokenbed-tb*`.
func Leftovers(ctx context.Context, cli client.APIClient, runID string) ([]Object, error) {
	if runID != "" && !backend.ValidRunID(runID) {
		return nil, fmt.Errorf("ctrbackend: run id %q: want tb and six hex digits", runID)
	}
	f := make(client.Filters).Add("label", LabelRun)
	if runID != "" {
		f = make(client.Filters).Add("label", LabelRun+"="+runID)
	}
	var objs []Object
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: list containers: %w", err)
	}
	for _, c := range cs.Items {
		name := c.ID
		if len(c.Names) > 0 {
			name = trimSlash(c.Names[0])
		}
		objs = append(objs, Object{Kind: "container", ID: c.ID, Name: name, RunID: c.Labels[LabelRun]})
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: list networks: %w", err)
	}
	for _, n := range ns.Items {
		objs = append(objs, Object{Kind: "network", ID: n.ID, Name: n.Name, RunID: n.Labels[LabelRun]})
	}
	is, err := cli.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: list images: %w", err)
	}
	for _, i := range is.Items {
		name := i.ID
		if len(i.RepoTags) > 0 {
			name = i.RepoTags[0]
		}
		objs = append(objs, Object{Kind: "image", ID: i.ID, Name: name, RunID: i.Labels[LabelRun]})
	}
	cgs, err := leftoverCgroups(runID)
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: list cgroups: %w", err)
	}
	objs = append(objs, cgs...)
	kept := objs[:0]
	for _, o := range objs {
		if backend.ValidRunID(o.RunID) && (runID == "" || o.RunID == runID) {
			kept = append(kept, o)
		}
	}
	// Containers first, then the run's cgroup, networks, images: each
	// depends on the next.
	rank := map[string]int{"container": 0, "cgroup": 1, "network": 2, "image": 3}
	sort.SliceStable(kept, func(i, j int) bool { return rank[kept[i].Kind] < rank[kept[j].Kind] })
	return kept, nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// Clean removes the objects of run runID (every run when empty) except
// those of the runs in skip (runs whose harness is alive), and returns
// what it removed. Containers are killed and removed (docker rm -f),
// then networks, then images (with their untagged parent layers).
func Clean(ctx context.Context, cli client.APIClient, runID string, skip map[string]bool) ([]Object, error) {
	objs, err := Leftovers(ctx, cli, runID)
	if err != nil {
		return nil, err
	}
	var removed []Object
	var errs []error
	for _, o := range objs {
		if skip[o.RunID] {
			continue
		}
		if err := remove(ctx, cli, o); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, o)
	}
	return removed, errors.Join(errs...)
}

// clean removes everything of one run.
func clean(ctx context.Context, cli client.APIClient, runID string) ([]Object, error) {
	if runID == "" {
		return nil, nil // Setup failed before the spec was known: nothing made
	}
	return Clean(ctx, cli, runID, nil)
}

// remove removes one object; already gone is not an error.
//
// Equivalent to: `docker rm -f ID`, `docker network rm ID`, `docker rmi -f
// ID`, `rmdir /sys/fs/cgroup/*/tokenbed-RUNID`.
func remove(ctx context.Context, cli client.APIClient, o Object) error {
	var err error
	switch o.Kind {
	case "container":
		_, err = cli.ContainerRemove(ctx, o.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	case "network":
		_, err = cli.NetworkRemove(ctx, o.ID, client.NetworkRemoveOptions{})
	case "image":
		_, err = cli.ImageRemove(ctx, o.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	case "cgroup":
		return removeCgroups(ctx, o.RunID)
	default:
		return fmt.Errorf("ctrbackend: unknown object kind %q", o.Kind)
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("ctrbackend: remove %v: %w", o, err)
	}
	return nil
}
