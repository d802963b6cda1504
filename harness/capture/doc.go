// Package capture records the packets of several network interfaces, each
// possibly in its own network namespace, into one pcapng file, together
// with the harness's own actions (outages, crashes, profile changes) as
// annotation records. It is pure Go: AF_PACKET sockets with a TPACKET_V3
// ring (github.com/gopacket/gopacket/afpacket) and the pcapng writer of
// github.com/gopacket/gopacket/pcapgo; no cgo, no libpcap.
//
// # The file
//
// One pcapng section. Each captured interface is one pcapng interface
// (IDB) named by Interface.Name, e.g. "A/eth0" (agent/link), with a
// description that says where it was captured (namespace, device, kernel
// ifindex) and the userspace filter in its comment. Timestamps have
// nanosecond resolution (if_tsresol 9) and are the kernel's software
// receive/transmit timestamps on CLOCK_REALTIME: the clock of the event
// logs' WallNS, so packets and events line up without conversion.
//
// The last IDB, "harness", carries the annotations: one record per
// Annotate call, with link type LINKTYPE_WIRESHARK_UPPER_PDU (252). Its
// data is an exported-PDU header naming the "json" dissector followed by the
// event as JSON, and the same JSON is the record's comment (opt_comment).
// tshark shows it without any plugin: frame.comment holds the JSON and the
// json dissector decodes it (json.member_with_value ...); Wireshark lists
// it in the packet list and under Statistics > Capture File Properties >
// Packet Comments. 252 is the link type Wireshark itself writes when it
// exports PDUs, so every reader that knows pcapng knows it.
//
// At Stop, an interface statistics block (ISB) per captured interface
// records the kernel's packet and drop counts (PACKET_STATISTICS).
//
// # Time order
//
// Packets reach user space up to 10 ms after their kernel timestamp (the
// ring's block timeout), from several rings at once. Records are therefore
// held in memory for half of Config.FlushInterval and written sorted by
// timestamp, so that the file is chronological, as readers expect
// (Wireshark lists frames in file order). A record that arrives later than
// that is still written, out of order, and counted (Stats.OutOfOrder).
//
// # Crashes
//
// Records are encoded into memory and written to the file with one
// write(2) of whole blocks every quarter of Config.FlushInterval (100 ms by
// default): a record is in the file at most about FlushInterval after its
// timestamp (82 ms measured at the default). A SIGKILL of the capturing
// process loses only those last records, and the file normally ends at a
// block boundary, so every pcapng reader opens it. The exception: when the
// kill lands while the kernel copies a write of several pages, the write
// stops at a page boundary (a fatal signal interrupts it) and the file
// ends inside a block; Repair cuts that partial block. Nothing is fsynced
// before Stop: the page cache survives the process, not the machine.
//
// # Namespaces
//
// A socket belongs to the network namespace it was created in. Start opens
// each socket on a locked OS thread switched into the interface's namespace
// (internal/nsenter), then switches back; the socket keeps capturing in that
// namespace. Equivalent to: `ip netns exec NS tcpdump -i DEV -w -`, for
// every interface at once, into one file.
//
// # Losses
//
// When the writer falls behind, the kernel ring fills and the kernel drops
// packets; they are counted (Stats, and the ISBs), never silent. A read
// error on one interface (for instance its namespace was deleted) ends that
// interface's capture, is written into the file as a "capture_error"
// annotation, and is returned by Stop; the other interfaces go on.
//
// # Files
//
// capture.go (Start, Add, Stop and the pcapng header), config.go,
// socket_linux.go (opening a ring in a namespace), read.go (draining a
// ring), flush.go (the reorder buffer and the writes to the file),
// annotate.go (the harness's records), stats.go, writer.go (captures of
// the simulator), repair.go, filter.go and bpf.go.
package capture
