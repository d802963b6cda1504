// Package wire is the datagram format of the application-level token
// passing operation (seed 002 §3): the Move, Ack, Commit and EarlyStop
// datagrams, their binary encoding, and their signatures.
//
// # Format, version 2
//
// All integers are big-endian. Lengths are in bytes.
//
//	offset  size  field
//	0       2     magic, the ASCII bytes "TB" (0x54 0x42)
//	2       1     version, 2
//	3       1     type: 1 Move, 2 Ack, 3 Commit, 4 EarlyStop
//	4       1     flags: bit 0 certificate present, bit 1 directory present,
//	              bit 2 pass id present; the other bits must be zero
//	5       1     S, length of the sender's member name (1..63)
//	6       S     sender's member name (the CommonName of its certificate)
//	+0      8     token generation time, int64 ns since the Unix epoch
//	+8      1     O, length of the token's origin name (1..63)
//	+9      O     token origin: the member that generated the token
//	+0      8     session id, uint64
//	+8      8     nonce: a timestamp that makes every signature unique (002 §3)
//	+16     2     reply port: the UDP port for protocol continuation; non-zero
//	              in Move and Ack, zero in Commit and EarlyStop (002 §3)
//	if flags bit 2 (3-way exchange):
//	+0      8     pass id, uint64, non-zero: the random id that the sender
//	              of a pass draws for it (004 §4), echoed in its Ack and
//	              Commit
//	if flags bit 0 (Move and Ack only):
//	+0      2     C, certificate length (1..1024)
//	+2      C     the sender's X.509 certificate, DER
//	if flags bit 1 (Move and Ack only):
//	+0      1     N, number of directory entries (1..32)
//	              N times:
//	+0      1     L, member name length (1..63)
//	+1      L     member name
//	+0      1     A, address length: 4 (IPv4) or 16 (IPv6)
//	+1      A     address
//	+0      2     UDP port
//	+2      8     seen: when the member signed this entry, int64 ns since
//	              the Unix epoch (the member's own clock)
//	+10     64    entry signature, Ed25519, by the member the entry describes
//	end-64  64    Ed25519 signature
//
// The pass id is the one addition to version 2 since its directory
// entries: a flag, not a version, because 002's 4-way exchange does not
// use it, so its datagrams are byte for byte what they were, and
// captures taken before it decode unchanged. Like every field before the
// signature, the signature covers it.
//
// A datagram is at most MaxSize bytes, so it fits one IPv6 minimum-MTU packet
// and is never fragmented.
//
// # Signature
//
// The signature covers the context string "tokenbed/pass/v1", the source
// and the destination UDP addresses (each as a 16-byte IPv6 or IPv4-mapped
// address and a 2-byte port), and every byte of the datagram before the
// signature. Binding both addresses makes a datagram illegal when it is
// received by another destination or from another source (002 §3): a
// sniffed datagram cannot be replayed anywhere else.
//
// # Directory entries
//
// Each directory entry is signed by the member it describes, over the
// context string "tokenbed/dir/v1", the name length and name, the
// address as 16 bytes (IPv4-mapped for IPv4), the port and the seen-time.
// Other members relay the entry verbatim, so an entry is authenticated by
// its subject, not by whoever relays it: a member cannot move another's
// entry to its own address (002 §3.2 asks that directory data be
// authenticated; version 1 entries were only covered by the relaying
// sender's datagram signature, which let any member poison every
// directory). The entry signature is 64 bytes, so an entry is at most
// 1+63+1+16+2+8+64 = 155 bytes and a datagram carries fewer of them
// than in version 1; directories are sampled (see agent/node).
//
// The paper signs with DSA. We use Ed25519 instead: Go's crypto/dsa is
// deprecated, DSA needs a fresh secret nonce per signature (a weak RNG leaks
// the key), and Ed25519 is deterministic, faster to verify and has 64-byte
// signatures and 32-byte keys, so a datagram with its certificate still fits
// one packet.
package wire
