package experiments

import "tokenbed/internal/registry"

// Schema is a protocol plug-in's say over an experiment file: the roles
// of its processes, their configuration sections and the words its
// schedule may use as targets. Package experiments parses everything else
// (agents, links, profiles, the schedule, the checks) and knows no
// protocol; each protocol's declaration (package protocols, one package
// per protocol beneath it) implements Schema and registers it through
// protocols.Register.
type Schema interface {
	// Role resolves a process's role as written ("" when neither the
	// agent nor defaults.role names one), or says why it is not a role of
	// the protocol, listing those that are.
	Role(role string) (string, error)
	// CheckConfig validates an agent's configuration section
	// (Agent.Config: defaults.agent overridden by the agent's config),
	// with its Role resolved. It records each problem with
	// Agent.Config.Errorf (or the Node of the field) so that the error
	// names the file and line; a returned error (a field that does not
	// decode) already does.
	CheckConfig(a Agent) error
	// Targets lists the words a crash or restart step may name instead of
	// an agent (token passing: "holder", whoever holds the token). They
	// are reserved as agent names; the run's observer resolves them.
	Targets() []string
	// CheckAgents judges the agents as a whole, each with its role
	// resolved, in file order: what the protocol needs of the membership
	// (token passing: some agent generates the first token, 002 §3.2; a
	// lock service: a server). Each Problem names the field it concerns.
	CheckAgents(agents []Agent) []Problem
}

// Problem is a fault a protocol finds in an experiment file, at the YAML
// path of the field it concerns ("$.agents", "$.agents[2].generate"):
// the error names the file and that field's line.
type Problem struct{ Path, Msg string }

// DefaultProtocol is the protocol of an experiment file that names none.
const DefaultProtocol = "tokenpassing"

var schemas = registry.New[Schema]("protocol")

// RegisterSchema makes a protocol's schema known by the protocol's name
// (protocols.Register calls it). Registering a name twice panics.
func RegisterSchema(name string, s Schema) { schemas.Register(name, s) }

// lookupSchema returns the schema of protocol ("" is DefaultProtocol).
func lookupSchema(protocol string) (Schema, error) {
	if protocol == "" {
		protocol = DefaultProtocol
	}
	return schemas.Lookup(protocol)
}
