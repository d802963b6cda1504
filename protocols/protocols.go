// Package protocols holds what the two halves of a protocol plug-in share,
// one package per protocol beneath it (protocols/tokenpassing,
// protocols/ftn): its name, its say over an experiment file (roles,
// configuration sections, the schedule's target words), the basis of the
// paper clock and its event kinds. Data flows one way, experiment → run →
// logs and capture → analysis → report, so this layer sits under both
// halves: the run half (harness/protocol) and the analysis half
// (analysis) import it, and it imports neither.
//
// Each protocol's declaration registers itself here from its package's
// init (Register), which also hands its Schema to package experiments;
// each half then registers one plug-in value of its own, keyed by the
// same name (harness/protocol.Register, analysis.Register). A link
// package, plugins/NAME, pairs the two halves, and one aggregator file per
// binary links each protocol in by one line.
package protocols

import (
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/registry"
	"tokenbed/internal/results"
)

// Declaration is a protocol as both halves know it.
type Declaration interface {
	// Name is the protocol's name in experiment files (protocol:) and in
	// run.json.
	Name() string
	// Schema validates what of an experiment file is the protocol's: the
	// processes' roles, their configuration sections (kept undecoded by
	// package experiments, decoded here with their file:line) and the
	// schedule's target words ("holder").
	experiments.Schema
	// Basis classifies events for the paper clock: which event begins and
	// which ends an interval of application time (a hold).
	Basis(e eventlog.Event) (results.ClockOp, string)
}

// Default is the protocol of an experiment file or a run that names none.
const Default = experiments.DefaultProtocol

var declarations = registry.New[Declaration]("protocol")

// Register makes a protocol known by its name, and its Schema to package
// experiments, so that an experiment naming it is checked by it when it
// loads. Declarations call it from init; registering a name twice panics.
func Register(d Declaration) {
	declarations.Register(d.Name(), d)
	experiments.RegisterSchema(d.Name(), d)
}

// Names lists the registered protocols, sorted.
func Names() []string { return declarations.Names() }

// Lookup returns the named protocol's declaration ("" is Default), or an
// error listing the registered ones.
func Lookup(name string) (Declaration, error) {
	if name == "" {
		name = Default
	}
	return declarations.Lookup(name)
}
