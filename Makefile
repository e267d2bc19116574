# One task runner for people and CI. `make test` is the README's test command; `.ci/run` calls it.
# `make dev` is the README's "see it work" command.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
VENV := $(CURDIR)/.venv
# Components (wasm32-wasip2): the examples and the guests the tests load.
EXAMPLES := -p configmap-replicator -p website
TEST_GUESTS := -p testbed -p noop -p wrong-world -p stamp -p always-trap -p hostile -p ledger
WASM := --release --target wasm32-wasip2
# Components in other languages (Python, JavaScript, C): each `build.sh` installs its pinned
# toolchain when missing and writes `target/guests/<name>.wasm`.
SCRIPTED_EXAMPLES := $(sort $(wildcard examples/*/build.sh))
SCRIPTED_GUESTS := $(sort $(wildcard host/tests/guests/*/build.sh))

GUEST_LANGUAGES := python js c go
# Each step of `make test` runs through this: its wall and CPU seconds go into the table
# `make test` prints at the end (target/test-steps.tsv).
STEP := scripts/test-step.sh
# The test steps lint the workspace's own crates while they build them: clippy-driver wraps rustc
# for workspace members, as `cargo clippy` does for its check build, so dependencies are compiled
# once, for the tests, instead of a second time for clippy. Every test step's cargo command sets
# the same two variables, so Cargo reuses what `test-build` made (a plain `cargo test` afterwards
# builds the workspace's crates again, without the wrapper).
CLIPPY_DRIVER = $(shell rustc --print sysroot)/bin/clippy-driver
LINTED = RUSTC_WORKSPACE_WRAPPER="$(CLIPPY_DRIVER)" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

.PHONY: test test-steps deps fmt-check structure clippy guests unit go-test static static-check bench dev examples

## Everything CI checks: toolchain and test dependencies, formatting, lints, all tests; then one
## table of each step's wall and CPU seconds, also when a step failed.
test:
	$(call with-step-table,test-steps)

# The recipe of `make test` and `make test-fast`: runs the targets $(1), then prints the table of
# their steps (scripts/test-steps-table.sh), also when one failed, and keeps the run's status.
define with-step-table
	@mkdir -p target && rm -f target/test-steps.tsv && date +%s >target/test-steps.started
	@+status=0; $(MAKE) --no-print-directory $(1) || status=$$?; \
	  STEPS_STARTED=$$(cat target/test-steps.started) scripts/test-steps-table.sh; exit $$status
endef

## The steps, two at a time (the machine's two cores) in this order: the Rust chain (fmt, Rust
## guests, build with clippy, tests on the embedded server, tests on the real one) is the
## critical path; the control plane, the other languages' guests and the Go tests run beside
## it; the static binary is built at the lowest CPU priority (nice 19) from the moment the test
## build is done, so the tests' time bounds do not share their cores with it, and in its own
## target directory, so it never waits for Cargo's lock. Each output line starts with its step.
## The steps run without make's jobserver (SUITE): Cargo and Go use both cores whatever else runs,
## and the kernel shares them, instead of a build dropping to one job while a step beside it waits
## on the network.
UNSHARED := env -u MAKEFLAGS -u MFLAGS STEP_PREFIX=1
SUITE := $(UNSHARED) $(MAKE) --no-print-directory
test-steps:
	$(SUITE) -j2 suite-e2e-real suite-go-test suite-js-test suite-static-check

.PHONY: $(addprefix suite-,deps fmt guests-rust wit-c test-build unit-run e2e-real go-test js-test static-check \
	control-plane $(GUEST_LANGUAGES:%=guests-%))
suite-deps:
	$(SUITE) deps
suite-fmt: suite-deps
	$(SUITE) fmt-check structure
suite-guests-rust: suite-fmt
	$(SUITE) guests-rust
## wit-c (the C and Go guests' binding generator) before the test build takes Cargo's lock
suite-wit-c: suite-guests-rust
	$(UNSHARED) $(STEP) wit-c tools/wit-c/built.sh $(CURDIR)/target
suite-test-build: suite-wit-c
	$(SUITE) test-build
suite-control-plane: suite-deps
	$(SUITE) control-plane
suite-guests-python suite-guests-js: suite-deps
suite-guests-c suite-guests-go: suite-wit-c
$(GUEST_LANGUAGES:%=suite-guests-%): suite-guests-%:
	$(SUITE) guests-$*
suite-unit-run: suite-test-build $(GUEST_LANGUAGES:%=suite-guests-%) suite-guest-cfg
	$(SUITE) unit-run UNIT_SKIP="$(E2E_REAL_ONCE)"
## fidelity (mostly waiting on its two servers) beside the end-to-end modules; the fault checker,
## which brings its own CPU contention, alone after them
suite-e2e-real: suite-unit-run suite-control-plane
	$(SUITE) -j2 e2e-real-modules fidelity
	$(SUITE) replica-faults
suite-go-test: suite-guests-go
	$(SUITE) go-test
suite-js-test: suite-guests-js
	$(SUITE) js-test
suite-static-check: suite-test-build
	STATIC_NICE=19 CARGO_TARGET_DIR=$(CURDIR)/target/static-check $(SUITE) static-check

## The build with clippy lints the Rust guests natively, for the host's target; that covers
## what `make clippy-guests` lints for wasm32 only while no guest source names a target.
.PHONY: suite-guest-cfg
suite-guest-cfg:
	@if grep -rnE 'cfg\(.*(target_arch|target_os|target_family|target_env)' \
	    guest-sdk/src examples/*/src host/tests/guests/*/src; then \
	  echo "error: guest code above depends on the target, which the native clippy of make test" \
	    "does not see; add clippy-guests to test-steps in the Makefile" >&2; exit 1; fi

## The inner loop while working (docs/testing.md): formatting, the build with clippy (Cargo
## builds again only what changed), the guests (each build is skipped when up to date), and every
## test against the embedded API server. No real control plane, no Go tests, no static binary:
## `make test` stays the gate.
.PHONY: test-fast
test-fast:
	$(call with-step-table,fmt-check structure guests test-build unit-run)

## Installs what the tests need (rustup components and target, the Python client, kubectl).
deps:
	$(STEP) deps scripts/install-test-deps.sh

fmt-check:
	$(STEP) fmt $(CARGO) fmt --all -- --check

## The source tree's rules (docs/architecture.md): no file over 600 lines, a `//!` line on every
## file, no import circle between files, the plugin rooms used only from above, no module named
## like the end of an end-to-end module's name (a `--skip` filter of `unit-run`).
.PHONY: structure
structure:
	$(STEP) structure python3 scripts/check-structure.py

## clippy on its own (a check build): the workspace for the host, and the Rust guests for
## wasm32-wasip2. `make test` lints the workspace in `test-build` instead.
.PHONY: clippy-host clippy-guests
clippy: clippy-host clippy-guests
clippy-host:
	$(STEP) clippy-host $(CARGO) clippy --workspace --all-targets --locked -- -D warnings
clippy-guests:
	$(STEP) clippy-guests $(CARGO) clippy $(EXAMPLES) $(TEST_GUESTS) --target wasm32-wasip2 --locked -- -D warnings

## The example and test components in every language (the end-to-end tests also build them
## if missing): Rust with Cargo, the others by their `build.sh`, one step per language.
guests: guests-rust $(GUEST_LANGUAGES:%=guests-%)

.PHONY: guests-rust $(GUEST_LANGUAGES:%=guests-%)
guests-rust:
	$(STEP) guests-rust $(CARGO) build $(WASM) --locked $(EXAMPLES) $(TEST_GUESTS)

$(GUEST_LANGUAGES:%=guests-%): guests-%:
	$(STEP) guests-$* bash -c 'for script in "$$@"; do bash "$$script"; done' - \
	  $(filter %-$*/build.sh,$(SCRIPTED_EXAMPLES) $(SCRIPTED_GUESTS))

## Every target of the workspace (libraries, binaries, tests, benches) built for the tests, with
## clippy's lints (`-D warnings`) on the workspace's crates: what `cargo clippy --workspace
## --all-targets` checks, in the build the tests run.
.PHONY: test-build unit-run
test-build:
	$(LINTED) $(STEP) build+clippy $(CARGO) test --workspace --all-targets --locked --no-run --timings

## Every test in the workspace against the embedded API server, but the fault checker's runs
## (E2E_REAL_ONLY: they judge replicas against the real server's history; `e2e-real` runs their
## suite seed, `make soak-replicas` random ones) and the modules of UNIT_SKIP (`make test` passes
## E2E_REAL_ONCE: they run once, on the real server, in `e2e-real`; `make test-fast` runs them here).
E2E_REAL_ONLY := replica_faults::
unit: test-build unit-run
unit-run:
	PATH="$(VENV)/bin:$$PATH" $(LINTED) $(STEP) unit-run $(CARGO) test --workspace --locked \
	  -- $(E2E_REAL_ONLY:%=--skip %) $(UNIT_SKIP:%=--skip %::)

## The end-to-end modules that run against a real kube-apiserver and etcd (one control plane for
## the whole `e2e` binary, its tests taking turns on it; docs/testing.md says which tests need the
## embedded server and stay on it), then the fidelity suite that holds the embedded server to it,
## then the fault checker's short schedule (seed 1, leader and sharded mode, about 100 s; the
## log keeps each run's line with its seed and how to run it again). `make test` runs the modules
## of E2E_REAL_ONCE on the real server only (the embedded server's answers are held to the real
## one by `fidelity`); those of E2E_BOTH also on the embedded server, where they check what the
## real one does not reach: its own authorization (`Config::authorization(true)`), and
## `kubectl reconcile` reaching hosts by `--endpoint` instead of through the API server's proxy.
## A module's name is a `--skip` filter there, a substring of test names: scripts/check-structure.py
## fails if another module of the workspace has a name ending in it.
.PHONY: e2e-real e2e-real-modules fidelity replica-faults
E2E_REAL_MODULES := example_plugins lang_c lang_go lang_javascript lang_python leader_fencing hot_reload \
	in_cluster deployment rbac_enforced plugin_admission plugin_objects plugin_fetches scale_out safe_upgrades \
	record_replay replicator_safety state_loss tenancy tenant_shares read_authorization namespaced_plugins \
	new_plugin reconcile_why reconcile_logs reconcile_traces
E2E_BOTH := tenancy tenant_shares read_authorization namespaced_plugins reconcile_why reconcile_logs
E2E_REAL_ONCE := $(filter-out $(E2E_BOTH),$(E2E_REAL_MODULES))
## `--workspace` (not `-p end-to-end`) resolves dependency features as `unit` does, so the
## crates `unit` built are reused instead of rebuilt; `--test` picks the binary, the `<module>::`
## filters its modules.
e2e-real: e2e-real-modules fidelity replica-faults
e2e-real-modules: control-plane
	PATH="$(VENV)/bin:$$PATH" E2E_BACKEND=real $(LINTED) $(STEP) e2e-real \
	  $(CARGO) test --workspace --locked --test e2e -- $(E2E_REAL_MODULES:%=%::)
fidelity: control-plane
	$(LINTED) $(STEP) fidelity $(CARGO) test --workspace --locked --test fidelity
replica-faults: control-plane
	E2E_BACKEND=real $(LINTED) $(STEP) replica-faults $(CARGO) test --workspace --locked \
	  --test e2e -- $(E2E_REAL_ONLY) --nocapture --test-threads 1

## The Go guests' own tests with the SDK's fake host: plain `go test`, no wasm.
go-test:
	$(STEP) go-test bash -c 'cd guest-sdk/go && go test ./... && cd ../../examples/website-go && go test ./...'

## The fault checker's soak (docs/testing.md): random seeds for leader and sharded mode on the real
## control plane, one run at a time; SOAK_SEEDS seeds per mode (default 100), FAULT_DURATIONS=default
## for client-go's Lease durations, FAULT_SECONDS for the faults' length, FAULT_OBJECTS, FAULT_WRITES,
## FAULT_WORK_MS and FAULT_WAIT_MS for the load (docs/testing.md). Each run prints its seed. Built
## as the test steps build (LINTED), so after `make test` nothing is compiled again.
.PHONY: soak-replicas
soak-replicas: control-plane
	E2E_BACKEND=real FAULT_SEEDS=random:$(or $(SOAK_SEEDS),100) $(LINTED) $(CARGO) test --workspace --locked \
	  --test e2e -- replica_faults:: --nocapture --test-threads 1

## The JavaScript SDK's own tests with the host's imports faked: Node's runner, no component built.
.PHONY: js-test
js-test:
	$(STEP) js-test node --test guest-sdk/javascript/tests/reconciler.test.mjs

## The static reconcile-host the container image holds (x86_64-unknown-linux-musl, release):
## target/static/reconcile-host. The Dockerfile's build stage runs the same script.
static:
	scripts/build-static.sh

## What `make test` checks of that binary: the same script in the `static-check` profile
## (Cargo.toml: no optimisation, no debug info), so the same target, features, static link and
## `--version`, without the release profile's optimisation. `make static` remains the build the
## image ships.
static-check:
	PROFILE=static-check $(STEP) static-check nice -n $(or $(STATIC_NICE),0) scripts/build-static.sh

## The real control plane (kube-apiserver and etcd, built from Go modules) the end-to-end tests run
## against: target/control-plane/<version>/. Built once per version; a second run does nothing.
.PHONY: control-plane
control-plane:
	$(STEP) control-plane scripts/build-control-plane.sh

## Benchmarks (criterion). `make bench BENCH=workqueue` runs one bench target.
bench:
	$(CARGO) bench --workspace --locked $(if $(BENCH),--bench $(BENCH),)

## client-go's workqueue and controller-runtime's controller side by side with ours: builds both
## once, alternates them for ROUNDS rounds (default 5), prints one table (benches/peers/README.md).
.PHONY: bench-peers
bench-peers:
	benches/peers/run.sh $(or $(ROUNDS),5)

## The website example against its controller-runtime twin on kube-apiserver + etcd: CPU per
## reconcile, reconciles/s, latency, memory, and memory per cached object (benches/peers/README.md).
.PHONY: bench-website-peers
bench-website-peers: control-plane
	E2E_BACKEND=real $(CARGO) bench -p end-to-end --locked --bench website_peers

examples:
	rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
	$(CARGO) build $(WASM) --locked $(EXAMPLES)
	for script in $(SCRIPTED_EXAMPLES); do bash "$$script"; done

## The host on an in-memory API server with the examples loaded and their samples applied.
dev: examples
	$(CARGO) run --release --locked -p reconcile-host -- dev
