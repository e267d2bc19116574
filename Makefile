# One task runner for people and CI. `make test` is the README's test command; `.ci/run` calls it.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
VENV := $(CURDIR)/.venv

.PHONY: test deps fmt-check clippy unit bench

## Everything CI checks: toolchain and test dependencies, formatting, lints, all tests.
test: deps fmt-check clippy unit

## Installs what the tests need (rustup components, the Python client, kubectl) if missing.
deps:
	scripts/install-test-deps.sh

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	PATH="$(VENV)/bin:$$PATH" $(CARGO) test --workspace --locked

## Benchmarks (criterion). `make bench BENCH=workqueue` runs one bench target.
bench:
	$(CARGO) bench --workspace --locked $(if $(BENCH),--bench $(BENCH),)
