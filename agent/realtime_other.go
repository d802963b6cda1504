//go:build !linux

package main

import "errors"

func realtime(int) error { return errors.New("real-time scheduling is implemented for Linux only") }
