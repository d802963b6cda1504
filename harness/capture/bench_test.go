package capture_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/wire"
	"tokenbed/harness/capture"
)

// BenchmarkCapture blasts b.N signed datagrams from A to B over the scratch
// veth and reports the rate. "baseline-no-capture" sends without capturing;
// "capture-both-ends" captures both ends of the veth (two sockets, 2·b.N
// records) into a pcapng file, until every packet is written (Stop
// included), and reports records written per second, kernel drops and the
// send rate, to compare with the baseline of the same run.
func BenchmarkCapture(b *testing.B) {
	p := newPair(b)
	a, bp := newPeers(b, p, 9)
	d := wire.Datagram{Type: wire.Commit, Sender: "A", Token: wire.TokenID{Gen: 1, Origin: "A"}, Session: 1, Nonce: 1}
	enc, err := d.Encode(a.key, a.addr, bp.addr)
	if err != nil {
		b.Fatal(err)
	}
	// B's socket is bound but never read: nothing answers, nothing waits.
	blast := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := a.conn.WriteToUDPAddrPort(enc, bp.addr); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("baseline-no-capture", func(b *testing.B) {
		start := time.Now()
		blast(b.N)
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sent-pkts/s")
	})
	b.Run("capture-both-ends", func(b *testing.B) {
		file := filepath.Join(b.TempDir(), "bench.pcapng")
		c, err := capture.Create(context.Background(), file, capture.Config{Interfaces: ifaces(p), Filter: capture.UDP(port)})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		start := time.Now()
		blast(b.N)
		sent := time.Since(start)
		stats, err := c.Stop()
		if err != nil {
			b.Fatal(err)
		}
		total := time.Since(start)
		b.StopTimer()
		var written uint64
		for _, is := range stats.Interfaces {
			written += is.Written
		}
		b.ReportMetric(float64(b.N)/sent.Seconds(), "sent-pkts/s")
		b.ReportMetric(float64(written)/total.Seconds(), "written-pkts/s")
		b.ReportMetric(float64(stats.Drops()), "kernel-drops")
		b.ReportMetric(float64(written)/float64(2*b.N), "written/sent-copies")
		b.ReportMetric(float64(stats.OutOfOrder), "out-of-order")
	})
}
