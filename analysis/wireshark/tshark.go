// Package wireshark holds tokenbed's Wireshark Lua dissector
// (tokenbed.lua, embedded as Script) and runs tshark with it.
//
// # The command a user runs
//
//	tshark -X lua_script:analysis/wireshark/tokenbed.lua -r run.pcapng
//
// adds the "tokenbed" protocol on UDP port 7400 (-o tokenbed.port:N for
// another port). Fields: tokenbed.version, .type, .flags, .sender,
// .token, .token_gen, .token_origin, .session, .nonce, .reply_port,
// .cert_len, .cert, .dir_count, .dir.name, .dir.addr, .dir.ipv4, .dir.ipv6,
// .dir.port, .dir.seen, .signature, and .error for a malformed datagram
// (with an expert item in the Malformed group). Harness annotations are on
// the pcapng interface "harness": JSON in frame.comment, also dissected by
// the json dissector.
//
// # Lua and root
//
// Wireshark's init.lua decides whether Lua runs for the superuser
// (run_user_scripts_when_superuser; old releases set disable_lua for root).
// Debian 12's tshark 4.0 runs it for root, so the command above works as is.
// Where it does not, read the file as an unprivileged user instead:
//
//	setpriv --reuid=nobody --regid=nogroup --clear-groups \
//	    tshark -X lua_script:$PWD/analysis/wireshark/tokenbed.lua -r run.pcapng
//
// (the file and the script must be readable by that user). Check reports
// which case applies.
package wireshark

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Script is the dissector, tokenbed.lua.
//
//go:embed tokenbed.lua
var Script []byte

// ErrNoTshark says that tshark is not installed (apt-get install tshark;
// `make deps` does it).
var ErrNoTshark = errors.New("tshark not found in PATH (install the tshark package: make deps)")

// Tshark runs tshark with the dissector loaded.
type Tshark struct {
	Path   string // the tshark binary
	Script string // path of tokenbed.lua
}

// New finds tshark and writes Script into dir (a temporary directory the
// caller owns), so that the dissector is loaded whatever the working
// directory.
func New(dir string) (*Tshark, error) {
	path, err := exec.LookPath("tshark")
	if err != nil {
		return nil, ErrNoTshark
	}
	script := filepath.Join(dir, "tokenbed.lua")
	if err := os.WriteFile(script, Script, 0o644); err != nil {
		return nil, err
	}
	return &Tshark{Path: path, Script: script}, nil
}

// Command returns the tshark command line (without the binary) that reads
// file with the dissector loaded, followed by args.
func (t *Tshark) Command(file string, args ...string) []string {
	return append([]string{"-n", "-X", "lua_script:" + t.Script, "-r", file}, args...)
}

// Run runs tshark on file with args and returns its standard output. A
// non-zero exit is an error that carries standard error.
func (t *Tshark) Run(ctx context.Context, file string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, t.Path, t.Command(file, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("tshark %s: %v: %s", strings.Join(cmd.Args[1:], " "), err, stripRootWarning(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Check verifies that tshark loads the dissector: the "tokenbed" protocol
// must be registered. It fails when Lua is disabled (for root in some
// Wireshark builds); see the package documentation for the workaround.
func (t *Tshark) Check(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, t.Path, "-G", "protocols", "-X", "lua_script:"+t.Script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tshark -G protocols: %v: %s", err, stripRootWarning(stderr.String()))
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		cols := strings.Split(line, "\t")
		if len(cols) == 3 && cols[2] == "tokenbed" {
			return nil
		}
	}
	msg := "tshark did not register the tokenbed protocol from " + t.Script
	if os.Geteuid() == 0 {
		msg += " (Lua may be disabled for root: run tshark as an unprivileged user, e.g. setpriv --reuid=nobody --regid=nogroup --clear-groups)"
	}
	if s := stripRootWarning(stderr.String()); s != "" {
		msg += ": " + s
	}
	return errors.New(msg)
}

// Fields runs `tshark -T fields` on file for the packets that match the
// display filter (all when empty) and returns one row per packet, one
// value per field; a field that occurs several times in a packet has its
// values joined by ",".
func (t *Tshark) Fields(ctx context.Context, file, filter string, fields ...string) ([][]string, error) {
	args := []string{"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,", "-E", "quote=n"}
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := t.Run(ctx, file, args...)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" && len(fields) > 1 {
			continue
		}
		row := strings.Split(line, "\t")
		if len(row) != len(fields) {
			return nil, fmt.Errorf("tshark fields: line %q has %d columns, want %d", line, len(row), len(fields))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// stripRootWarning drops tshark's "Running as user root" warning, which
// says nothing about the failure.
func stripRootWarning(s string) string {
	var keep []string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(line, "Running as user") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
