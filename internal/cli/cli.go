// Package cli holds what the tokenbed commands (agent, harness) share in
// parsing their verbs' flags.
package cli

import (
	"errors"
	"flag"
	"io"
)

// Exit statuses that every tokenbed command gives for its flags.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// Parse parses a verb's flags from args with fs, whose output is the
// command's standard error. Asking for help (-h, -help, --help) is not an
// error: the verb's usage goes to stdout and the command exits 0, as
// scripts that run `harness run -h` under `set -e` expect. A flag the verb
// does not know, or a bad value, prints the error and the usage to
// standard error and exits 2. stop says that the verb returns code now.
//
// fs.Usage, if set, must write to fs.Output(): Parse points that at
// stdout for help.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, stop bool) {
	usage := fs.Usage
	// Silenced while parsing: the flag package prints the usage before
	// it says whether it was asked for or an error.
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return ExitOK, false
	case errors.Is(err, flag.ErrHelp):
		stderr := fs.Output()
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return ExitOK, true
	default:
		fs.Usage()
		return ExitUsage, true
	}
}

// IsHelp reports whether arg asks for help as the flag package reads it.
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--h" || arg == "--help"
}
