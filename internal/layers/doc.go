// Package layers holds the test that keeps the module's imports in the
// direction its data flows: experiment → run → logs and capture →
// analysis → report. Its rules (Rules) say which trees may not import
// which; the test lists every package's imports with `go list` and fails
// naming each import that breaks one. It has no code of its own.
package layers
