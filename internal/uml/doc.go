// Package uml runs a command inside a User Mode Linux guest: a Linux kernel
// that runs as an ordinary host process, with the host's root filesystem as
// its own root (hostfs). The guest has kernel features that the host kernel
// may lack, sch_netem first of all (netem.CheckKernel tells;
// docs/netem.md lists the impairment paths), while every
// host path stays valid inside it: a job can run a binary built on the host
// and leave files that the host reads afterwards.
//
// # How a job runs
//
// Run writes a private directory (tokenbed-uml-* under os.TempDir) holding a
// generated init script, an fstab, the job description (argv and environment,
// NUL-separated, so no quoting is involved) and a small job runner, then
// boots, pinned to one host CPU:
//
//	linux.uml mem=512M rootfstype=hostfs rootflags=/ rw uml_dir=DIR \
//	    initcall_blacklist=raid6_select_algo,calibrate_xor_blocks printk.time=1 \
//	    init=DIR/init con=null con0=fd:0,fd:1 </dev/null >DIR/console.log 2>&1
//
// The init script runs as PID 1 in the guest. It mounts proc, sysfs, a tmpfs
// on /run and on /dev/shm (the host's /run stays untouched), checks that
// /dev is the guest's own devtmpfs (so /dev/net/tun is the guest's device and
// not the host's seen through hostfs), brings lo up, loads the requested
// modules with modprobe from the UML module tree (bind-mounted under a private
// /run/modroot; the guest kernel's own module requests, such as tc asking for
// sch_netem, go through the same tree), changes to the job's directory and
// starts the runner. The
// runner, a few lines of Perl (perl-base is Essential in Debian), forks and
// execs the job and records its exact wait status in DIR/status: the shell
// would fold a death by signal N into exit status 128+N. Then the init syncs
// and powers the guest off. linux.uml exits 0 whatever the job did, so the
// job's status only ever travels through that file.
//
// The job's stdout and stderr are files in DIR, followed every 100 ms and
// copied to Job.Stdout and Job.Stderr while the job runs. The kernel console
// (boot messages, init messages, a panic) goes to DIR/console.log and comes
// back in Result.Console.
//
// # Processes
//
// linux.uml is one host process plus helper processes and one stub process
// per guest address space. Run starts it in a new session (UML would call
// setsid itself) and, as root, as the init of a new PID namespace: when it
// dies for any reason, the host kernel kills and reaps every helper and
// stub. Without root (or without CAP_SYS_ADMIN) the whole process group is
// killed instead. On cancellation or timeout Run sends SIGTERM (UML shuts
// down at once) and, after a short grace, SIGKILL to the whole group. The
// instance also receives SIGKILL if the thread that started it dies, so a
// crashed caller leaves no process behind; its private directory remains,
// and RemoveStale clears such directories.
//
// A guest kernel panic makes UML call abort(). As the init of a PID
// namespace it cannot be killed by its own SIGABRT, and the guest spins;
// Run therefore watches the console for the panic message and kills the
// instance (ErrGuestPanic, with the lines around the panic).
//
// # Performance
//
// A trivial job costs about 0.4 s of boot and 0.1 s of shutdown on an idle
// host (BenchmarkTrivialJob). Two boot-time benchmarks of the kernel, which
// chose RAID-6 and XOR routines for md and btrfs and took 1 s, are skipped
// with initcall_blacklist, and the delay-loop calibration of the first boot
// is reused (lpj=) by later boots of the same kernel.
//
// A guest has one CPU (no SMP) and GOMAXPROCS is 1 inside. Every guest system
// call costs 15–60 µs and every fork/exec 10–13 ms, so batch work (tc -batch,
// netlink from one process) and size timeouts of guest tests generously.
// Pinned instances are about 2–4× faster than unpinned ones; Pool runs one
// instance per host CPU. An idle guest holds about 50 MB of host memory.
//
// # Debugging
//
// Set Job.KeepDir to keep the private directory: DIR/init can be read, and
// DIR/console.log shows what the guest kernel and init printed, with
// timestamps, and the init's progress lines with the guest's uptime. The
// console also comes back in Result.Console.
package uml
