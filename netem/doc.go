// Package netem models Linux netem impairment profiles and applies them.
//
// tokenbed's testbed puts loss and delay on the links between agents (002
// §4 runs the token protocol over lossy, delayed links). One type, Profile,
// describes everything `tc qdisc ... netem` can do; the kernel backend in
// this package applies it through netlink, and a userspace engine is meant
// to take the very same Profile. Text in tc's own syntax converts both
// ways: Parse reads what follows "netem" on a tc command line, and
// Profile.String writes canonical text that Parse reads back to an equal
// Profile.
//
// # Profile semantics
//
// Field by field, what sch_netem (Linux 6.1) does with it:
//
//   - Limit: queue length in packets; beyond it netem drops. 0 means
//     DefaultLimit (1000), tc's default.
//   - Delay, Jitter: each packet is held Delay plus a random term. With no
//     Distribution the term is uniform over [-Jitter, +Jitter); with a
//     table it is Jitter*t/8192 for an entry t drawn from the table (a
//     table is an inverse CDF in units of 1/8192 sigma, see package dist).
//     The kernel caps Jitter at 2^31-1 ns (MaxJitter); Validate refuses
//     more. Packets may leave out of order when jitter exceeds their
//     spacing, as in the kernel.
//   - Distribution: normal, pareto, paretonormal, experimental (iproute2's
//     tables, generated or embedded by package dist, never read from
//     iproute2's files) or a custom table. Needs Delay and Jitter.
//   - Correlations (DelayCorrelation, Loss.Correlation,
//     DuplicateCorrelation, ReorderCorrelation, CorruptCorrelation): the
//     random number behind the decision is next = (1-ρ)·U + ρ·last with U
//     uniform and ρ the correlation. This smooths successive values but
//     also narrows their spread, so a correlated loss of p% loses fewer
//     than p% of packets; tc's man page calls correlated random loss
//     deprecated for that reason. Use LossState or LossGE for bursts.
//   - Loss, LossRandom: each packet is dropped with probability Percent.
//   - Loss, LossState (tc "loss state p13 p31 p32 p23 p14", kernel
//     NETEM_LOSS_GI): a Markov chain with state 1 = packet sent in a gap
//     period, 2 = sent within a burst, 3 = lost within a burst, 4 = isolated
//     loss. From 1 the chain moves to 4 with p14 and to 3 with p13 (both
//     lose the packet); from 2 to 3 with p23 (lost); from 3 to 2 with p32
//     and to 1 with p31 (sent), else it stays in 3 (lost); from 4 it always
//     returns to 1. p13 alone is Bernoulli loss; p13+p31 the 2-state
//     (Gilbert) model. Validate requires p13+p14 ≤ 100 and p31+p32 ≤ 100.
//   - Loss, LossGE (tc "loss gemodel p r 1-h 1-k", kernel NETEM_LOSS_GE):
//     two states, Good and Bad. Each packet first moves Good→Bad with P or
//     Bad→Good with R, then is lost with OneMinusK in Good or OneMinusH in
//     Bad. The kernel stores h = 1-(1-h) and k1 = 1-k; Profile keeps tc's
//     spellings. With only P given, tc (and Parse) sets R = 100-P,
//     OneMinusH = 100, OneMinusK = 0: since P+R = 100, the next state is
//     Bad with probability P whatever the current one, which is Bernoulli
//     loss of P%. Adding R gives the simple Gilbert model (mean burst
//     length 100/R packets), 1-h the Gilbert model, 1-k Gilbert-Elliott.
//   - ECN: instead of dropping a packet the loss model chose, netem marks
//     it Congestion Experienced when it is ECN-capable (non-ECT packets are
//     still dropped). Needs a loss model.
//   - Duplicate: the packet is also sent a second time.
//   - Reorder, Gap: of every Gap packets, the first Gap-1 are delayed
//     normally; the Gap-th is sent at once (jumping the queue) with
//     probability Reorder, else delayed too. With Gap 1, Reorder percent of
//     all packets skip the delay. Needs Delay; Gap 0 would never reorder,
//     so tc and Parse set 1.
//   - Corrupt: one random bit of the packet is flipped.
//   - Rate: packets leave no faster than BytesPerSecond, each packet's
//     length counted as len+PacketOverhead, rounded up to whole CellSize
//     cells with CellOverhead added per cell. Delay is added on top.
//   - Slot: packets are released only at slot starts, at most Packets
//     packets and Bytes bytes per slot; the gap to the next slot is uniform
//     in [Min, Max], or Delay ± Jitter shaped by Slot.Distribution.
//
// # Differences from tc
//
// Parse accepts tc 6.1's keywords and their prefixes ("del", "dup", "l"),
// its units (s/ms/us, and ns; % optional on percentages; bit, kbit, mbit,
// gbit, tbit, Kibit..., Bps, KBps..., matched ignoring case, so "kbps" is
// kilobytes per second as in tc; k/m/g/kb/mb/gb/kbit/mbit/gbit sizes), its
// defaults and its consistency checks (reorder needs delay, gap needs
// reorder, ecn needs a loss model, distribution needs delay and jitter).
// Deliberate differences: a keyword given twice is an error (tc keeps a
// mix of both); "distribution uniform" means no table (tc looks for a
// uniform.dist file that does not exist); "rate N%" (percent of the
// device's speed) is refused; delay keeps nanoseconds (tc 6.1 truncates to
// microseconds, then to 64 ns ticks); hex floats, inf and nan are refused.
// A bare delay number is microseconds and a bare slot number nanoseconds,
// as in tc 6.1.
//
// # Kernel backend
//
// Add, Qdisc.Change, Qdisc.Replace, Qdisc.Delete and Read build
// RTM_NEWQDISC/RTM_DELQDISC/RTM_GETQDISC messages with
// vishvananda/netlink's nl package on a socket opened inside the target
// namespace (the calling goroutine never changes namespace), because
// netlink's Netem type lacks distribution tables, the 4-state and GE loss
// models, ECN, slots and 64-bit delay, jitter and rate. Every attribute is
// always sent: the kernel's change keeps any attribute a request omits, so
// `tc qdisc change ... netem delay 10ms` after "corrupt 1%" keeps
// corrupting, but Qdisc.Change sets exactly the Profile given. The one
// thing the kernel cannot do in place is drop a distribution table; Change
// then returns ErrTableStuck and Replace (delete and add) is the way. The
// kernel never reports tables, so Read returns Profile.KernelView of what
// was applied.
//
// A kernel without sch_netem answers ENOENT; Add (and CheckKernel, which
// tries netem in a scratch namespace named RUNID-netemcheck) return an
// error matching errors.Is(err, ErrNoNetem) that names
// CONFIG_NET_SCH_NETEM. Nothing is ever silently left unimpaired.
//
// # Per-destination impairment
//
// ApplyTree gives one interface a different profile toward each
// destination prefix. The equivalent tc commands, for two peers:
//
//	tc qdisc add dev eth0 root handle 1: htb default 1
//	tc class add dev eth0 parent 1: classid 1:1 htb rate 100gbit
//	tc class add dev eth0 parent 1: classid 1:10 htb rate 100gbit
//	tc qdisc add dev eth0 parent 1:10 handle 10: netem delay 5ms
//	tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.2/32 flowid 1:10
//	tc class add dev eth0 parent 1: classid 1:11 htb rate 100gbit
//	tc qdisc add dev eth0 parent 1:11 handle 11: netem delay 40ms
//	tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.3/32 flowid 1:11
//
// IPv6 prefixes get "protocol ipv6 prio 2 u32 match ip6 dst PREFIX".
// Traffic no filter matches (other destinations, ARP, neighbour discovery)
// goes to the default class 1:1 and is not impaired. The HTB rate is far
// above a testbed's traffic, so HTB does not shape. Prefixes must not
// overlap. Tree.Change changes one leaf in place (`tc qdisc change dev
// eth0 parent 1:11 handle 11: netem ...`); Tree.Remove deletes the root and
// with it everything (`tc qdisc del dev eth0 root`). netem only acts on
// egress: impair both directions by giving each side its own tree.
//
// # Duplication
//
// Linux (commit ec8e0e3d7ade, in 6.16 and the 6.1, 6.6 and 6.12 stable
// series; 6.1.176 in the UML guest) refuses a duplicating netem beside
// any other netem on one device: "netem: cannot mix duplicating netems
// with other netems in tree". A tree with several leaves can therefore not
// duplicate. SourceTree (per-sender impairment toward one host, what the
// harness uses) gives each duplicating sender an IFB device of its own,
// fed by a redirect on the ingress of the sender's port; Plan says, without
// touching the kernel, where each sender goes and which ones the kernel
// cannot take (CheckOwnDevice tells whether this kernel has IFB, ingress
// and mirred). The kernel's refusal, where a shared leaf is made to
// duplicate, is reported as ErrSharedDuplicate: mark a sender whose
// profile will duplicate later MayDuplicate up front. (Mainline removed
// the check again in May 2026; the own-device layout is accepted with or
// without it, so runs behave the same on every kernel.)
//
// # Debugging
//
//   - Show what the kernel holds: `ip netns exec NS tc -s qdisc show dev
//     LINK` (counters in "Sent", drops), `tc -s class show dev LINK` (which
//     class traffic went to), `tc filter show dev LINK` (u32 matches are
//     printed as hex address/mask "at 16" for IPv4).
//   - Profile.String prints the tc text to reproduce a setup by hand.
//   - Kernel errors carry the kernel's own message (netlink extended ack),
//     for example "Specified qdisc kind is unknown".
//   - Run CheckKernel first: on a kernel without netem (this project's
//     host) use User Mode Linux, where the kernel tests of this package run.
//   - Namespaces created by this package and its tests start with the run
//     ID; `ip netns list` shows leftovers after a crash.
package netem
