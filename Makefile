# tokenbed: secure application-level token passing (seed 002) and a network
# testbed that runs it with real processes. `make test` and `make endurance`
# work on a fresh machine: both install what is missing first.

GO        ?= go
BIN       := bin
export CGO_ENABLED := 0
# -buildvcs=auto: the binaries carry the revision they were built from
# (run.json's git), even where the Go environment turns stamping off.
GOFLAGS_BUILD := -trimpath -buildvcs=auto
BACKEND   ?= netns

.PHONY: all deps build test test-unit vet fmt-check fuzz bench bench-sim validate-netem validate-sim demo endurance endurance-smoke endurance-replica nightly slurm-night index trend clean clean-host image wandering wandering-full wandering-compare wandering-real

all: build

deps: .deps.stamp
.deps.stamp: scripts/install-deps.sh go.mod go.sum
	./scripts/install-deps.sh
	@touch $@

build: deps
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/agent ./agent
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/harness ./harness

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: deps
	$(GO) vet ./...

# Everything: formatting, vet, unit tests, protocol model check, loopback
# circulation, and the tests that need root (namespaces, UML, containers).
test: deps fmt-check vet
	@# What this host can exercise (sch_netem, TUN, UML): a test that needs
	@# what is missing skips with its reason (go test -v shows it).
	-@$(GO) run ./harness preflight
	$(GO) test -count=1 -timeout 40m ./...

# The tests that need no root, in under two minutes: under -short every
# test that needs root, a kernel feature, UML or Docker skips with its
# reason (internal/testenv), even when run as root, and the model check
# explores a bounded configuration. No `deps`: installing needs root.
test-unit: fmt-check
	$(GO) vet ./...
	$(GO) test -short -count=1 -timeout 10m ./...

# The passing model check at its deepest bound: two retries of every
# message, and the 4-way reroute and return with a duplicated datagram,
# besides make test's bounds (minutes of CPU).
model-check: deps
	$(GO) test -count=1 -timeout 60m -run 'TestModel' ./agent/passing -args -model.deep
.PHONY: model-check

# Run every fuzz target for FUZZTIME each (go test allows one target per run).
FUZZTIME ?= 60s
fuzz: deps
	$(GO) test ./agent/wire -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./agent/node -run '^$$' -fuzz '^FuzzReceive$$' -fuzztime $(FUZZTIME)
	$(GO) test ./agent/passing -run '^$$' -fuzz '^FuzzEndpoint$$' -fuzztime $(FUZZTIME)
	$(GO) test ./netem -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./agent/wire/wirelayer -run '^$$' -fuzz '^FuzzLayer$$' -fuzztime $(FUZZTIME)
	$(GO) test ./harness/capture -run '^$$' -fuzz '^FuzzUDPFilter$$' -fuzztime $(FUZZTIME)

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./agent/...
	$(GO) test -run '^$$' -bench . -benchtime 2s ./netem/...
	$(GO) test -run '^$$' -bench . -benchtime 500000x ./harness/capture
	$(GO) test -run '^$$' -bench . -benchtime 3x ./harness/backend/nsbackend

# The simulator's speed: the 20-day endurance experiment as one continuous
# replica in virtual time (events/s, paper s per wall s), twice: with every
# Ed25519 verification in the event loop and with them on a worker ahead
# of it (the ratio is the workers' gain; a few minutes); and the swarm's
# seeds per minute of a one-hour 3-agent experiment.
bench-sim:
	$(GO) test -run '^$$' -bench Endurance -benchtime 1x ./harness/sim
	$(GO) test -run '^$$' -bench SeedsPerMinute -benchtime 16x ./harness/swarm

# Swarm search in the simulator (harness/swarm): SEEDS seeds of
# SWARM_EXPERIMENT, each with faults drawn from its swarm section, judged
# by the analysis's invariants; failing seeds print their replay command
# and the first is shrunk to a minimal schedule.
SEEDS ?= 100
SWARM_EXPERIMENT ?= harness/swarm/testdata/three-agents-swarm.yaml
.PHONY: swarm
swarm: build
	./$(BIN)/harness swarm --seeds $(SEEDS) $(HARNESS_FLAGS) $(SWARM_EXPERIMENT)

# Cross-validation of the userspace netem engine against real sch_netem (in a
# UML guest): the same profiles both ways, a markdown table of the
# differences, exit status 1 if any profile fails. Needs root. The binary is
# static (CGO_ENABLED=0): the guest runs it for the kernel side.
VALIDATE_FLAGS ?=
validate-netem: deps
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/validate-netem ./cmd/validate-netem
	./$(BIN)/validate-netem $(VALIDATE_FLAGS)

# The simulator against real processes: experiments/validate-sim.yaml
# on the netns backend, then in the simulator in the same shape (the file's
# seed, replicas and time scale: VALIDATE_SIM_SHAPE must match them), and
# harness compare prints the table (docs/simulator.md, "The simulator
# against real processes") and exits 1 if a figure is outside its tolerance. The
# allowance is the host's cost per pass that the model leaves out
# (docs/simulator.md). Needs root; about 3 min. Results stay in results/.
VALIDATE_SIM_SHAPE ?= --replicas 4 --time-scale 1000
VALIDATE_SIM_ALLOWANCE ?= 2ms
validate-sim: build
	@set -e; rid() { echo tb$$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n'); }; \
	real=$$(rid); sim=$$(rid); \
	./$(BIN)/harness run --backend netns --run-id $$real $(HARNESS_FLAGS) experiments/validate-sim.yaml || [ $$? -eq 1 ]; \
	./$(BIN)/harness run --backend sim --run-id $$sim $(VALIDATE_SIM_SHAPE) experiments/validate-sim.yaml || [ $$? -eq 1 ]; \
	echo "sim vs real: results/$$real (netns) and results/$$sim (sim)"; \
	./$(BIN)/harness compare --allowance $(VALIDATE_SIM_ALLOWANCE) \
		--allowance-why "the host's cost per pass (kernel, TUN relay, wake-ups), which the simulator leaves out" \
		results/$$real results/$$sim

# The 20-day endurance experiment of seed 002 §3.3 in compressed time
# (results/RUNID/report.md); endurance-smoke is the same, shortened (CI);
# endurance-replica is one continuous replica at real network scale,
# hours long.
# BACKEND=sim runs them in the simulator: one continuous replica at paper
# speed in virtual time (the 20 days in about a minute).
HARNESS_FLAGS ?=
endurance: build
	./$(BIN)/harness run --backend $(BACKEND) $(HARNESS_FLAGS) experiments/endurance.yaml

endurance-smoke: build
	./$(BIN)/harness run --backend $(BACKEND) $(HARNESS_FLAGS) experiments/endurance-smoke.yaml

endurance-replica: build
	./$(BIN)/harness run --backend $(BACKEND) --replicas 1 $(HARNESS_FLAGS) experiments/endurance.yaml

# The night (experiments/nightly.yaml, docs/reference/campaign-file.md):
# every job in order, each indexed into results/results.db as it ends; a
# failed job does not stop the others; exit 1 if one failed. As root for
# the jobs on namespaces and containers (without root they are recorded
# as errors, not run). CAMPAIGN picks another campaign file.
CAMPAIGN ?= experiments/nightly.yaml
nightly: build
	./$(BIN)/harness campaign run $(CAMPAIGN_FLAGS) $(CAMPAIGN)

# The night on the in-namespace Slurm cluster (docs/cluster.md): two nodes
# of one CPU each, so that at most two jobs run at once on this 2-core
# machine, and at most two shards per job (endurance-netns: two shards of
# 8 replicas side by side); waits for every job, prints the job table as
# Slurm reports it, removes the cluster; exit 1 if a job failed. Root.
# Studies and swarms run as one task each; the container smoke is named
# as staying on the submit host, not run (docs/cluster.md). SUBMIT_FLAGS adds harness campaign submit flags (--id, --set).
slurm-night: build
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/slurmcluster ./cmd/slurmcluster
	./$(BIN)/slurmcluster -nodes 2 -cpus 1 -- $(CURDIR)/$(BIN)/harness campaign submit --slurm --shards 2 \
		--results $(CURDIR)/results --agent $(CURDIR)/$(BIN)/agent $(SUBMIT_FLAGS) $(CAMPAIGN)

# Rebuild results/results.db from the results directories.
index: build
	./$(BIN)/harness index

# Each figure of the latest night against the previous nights (exit 1 on a
# regression): docs/reference/harness-trend.md.
trend: build
	./$(BIN)/harness trend

# Seed 003 with 150, 300 and 360 real agent processes (docs/studies/scale.md,
# "Hundreds of real agents"), about 10 minutes each: each run's report,
# then its concurrency from the agents' logs beside the resource server's;
# make wandering-compare puts the runs beside the simulator and the paper.
WANDERING_REAL_N ?= 150 300 360
wandering-real: build
	@mkdir -p results; for n in $(WANDERING_REAL_N); do \
	  ./$(BIN)/harness run --backend netns $(HARNESS_FLAGS) experiments/wandering-real-$$n.yaml 2>&1 | tee results/wandering-real-$$n.log; \
	  dir=$$(sed -n 's/^results: //p' results/wandering-real-$$n.log | tail -1); \
	  [ -n "$$dir" ] && $(GO) run ./cmd/resourcereport $$dir | tee -a results/wandering-real-$$n.log; \
	done

# A 3-agent run with per-link profiles, an outage and a crash.
demo: build
	./$(BIN)/harness run --backend $(BACKEND) $(HARNESS_FLAGS) experiments/three-agents.yaml

# The Wandering Token (seeds 003 and 004) on the simulator: 004 Tables 1,
# 3, 4, 5 and 003 Figs. 2-5 beside the papers' numbers, in
# results/wandering/report.md with plots (docs/studies/wandering.md).
# make wandering keeps every parameter of the papers and shortens what the
# report's first table says (003's runs to 3*10^4 s, 004 Tables 3-4 to
# 10^5 time units, Table 5 to 5 transients per N under §5's reading, Table
# 1 in full) and 004 on its 3-way exchange: 361 s of CPU (before the 3-way
# runs: 174 s, 1 min 29 s on 2 idle cores). make wandering-full runs the
# papers' lengths (10^6, 100 transients, both readings of the removal
# rule): 19 min on 2 idle cores before 004's 3-way scenarios were added (their
# full lengths are not timed yet: use -wall-limit). The scenarios run one per CPU at once (-j; the
# results do not depend on it).
# Both exit non-zero when a figure documented as matching its paper leaves
# its tolerance (results/wandering/claims.json).
# Seed 004 on its own 3-way exchange: Tables 3-4 at 10^-4 loss and Fig. 1
# here; the other loss rate, the 4-way control and Table 5 in wandering-full.
WANDERING_FLAGS ?= -scale003 0.3 -scale004 0.1 -transients 5 -skip '^(t5fig2-|t3-3way-p5-|t3-4way-|t5-3way-|f1-3way-adaptive-)'
wandering: deps
	$(GO) run $(GOFLAGS_BUILD) ./studies/wandering -out results/wandering $(WANDERING_FLAGS)

WANDERING_FULL_FLAGS ?=
wandering-full: deps
	$(GO) run $(GOFLAGS_BUILD) ./studies/wandering -out results/wandering-full $(WANDERING_FULL_FLAGS)

# Paper | sim | real (results/wandering/combined.md): the finished real
# runs of make wandering-real (REAL="results/RUNID ..."; default: the last
# run of each results/wandering-real-N.log) beside their simulated twins
# (same parameters, length, loss and seed; simulated once) and 003's text.
REAL ?=
wandering-compare: deps
	@real="$(REAL)"; [ -n "$$real" ] || real=$$(for f in results/wandering-real-*.log; do sed -n 's/^results: //p' $$f | tail -1; done); \
	[ -n "$$real" ] || { echo "wandering-compare: no real run (make wandering-real, or REAL=results/RUNID)"; exit 2; }; \
	$(GO) run $(GOFLAGS_BUILD) ./studies/wandering -out results/wandering -real "$$(echo $$real | tr ' ' ,)"

# The FTN lock service (seed 001): unit traces, the checker on literal
# histories and seeded swarms, then every experiments/ftn-*.yaml through
# the harness on BACKEND (netns: as root; sim: anywhere), each run's
# report.md with the checker's verdicts (mutual exclusion, fencing, data,
# liveness); the first failing run stops it.
.PHONY: ftn
ftn: build
	$(GO) test -count=1 ./agent/ftn/... ./harness/protocol/ftn/...
	$(GO) test -count=1 -v -run 'TestSimulatedRun|TestSwarm|TestLiteralHistories|TestBrokenServerCaught|TestAdmittedWindow|TestSharedHolders|TestSimultaneousCrashes' ./analysis/ftn
	for e in experiments/ftn-*.yaml; do ./$(BIN)/harness run --backend $(BACKEND) $(HARNESS_FLAGS) $$e || exit 1; done

# The etcd anchor (docs/studies/ftn-etcd.md; studies/etcdbench): FTN (3
# servers) and a 3-member etcd cluster (Debian's etcd-server, data on
# tmpfs) run the same workloads in network namespaces, one after the
# other: acquire+release latency with 10 clients, unimpaired and with
# delay 10ms on every direction; throughput with 50 closed-loop clients;
# failover after a SIGKILL of the leader (etcd also with a 1 s client
# deadline, and with FTN's timers). Prints one table, figure | FTN | etcd
# | etcd/FTN | conditions, with the durability settings. As root; about
# 7 min. ETCDBENCH_FLAGS adds flags (e.g. --data-root /var/tmp for etcd's
# WAL on disk).
ETCDBENCH_FLAGS ?=
.PHONY: ftn-etcd
ftn-etcd: build
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/etcdbench ./studies/etcdbench/cmd/etcdbench
	./$(BIN)/etcdbench compare --agent $(BIN)/agent $(ETCDBENCH_FLAGS)

# Remove what a killed run left behind (namespaces, processes, UML directories).
clean-host: build
	./$(BIN)/harness clean

clean:
	rm -rf $(BIN) .deps.stamp

# User Mode Linux runner (internal/uml): its tests boot real guests, about
# 0.5 s each; the benchmark compares a guest's boot and job start with a
# host exec.
.PHONY: test-uml bench-uml
test-uml: deps
	$(GO) test -count=1 ./internal/uml/...

bench-uml: deps
	$(GO) test -run '^$$' -bench . -benchtime 10x ./internal/uml/

# The agent image (Dockerfile: FROM scratch + the static agent; no registry
# needed). The context is only the Dockerfile and bin/agent. Runs with
# --backend container build their own per-run image and do not need this.
IMAGE ?= tokenbed-agent:dev
image: build
	tar -cf - Dockerfile -C $(BIN) agent | docker build -t $(IMAGE) -

# Container backend (harness/backend/ctrbackend): real Docker containers.
.PHONY: test-containers bench-containers
test-containers: deps
	$(GO) test -count=1 -v ./harness/backend/ctrbackend/

# BenchmarkPassLatency runs the endurance smoke topology (24 agents) for
# 25,000 paper seconds on each path, netns first, about 2.5 min: per-pass
# latency and its split (send, net, wake) against netns in the same run.
bench-containers: deps
	$(GO) test -run '^$$' -bench StartToReady -benchtime 3x ./harness/backend/ctrbackend/
	$(GO) test -run '^$$' -bench PassLatency -benchtime 1x -timeout 30m ./harness/backend/ctrbackend/
