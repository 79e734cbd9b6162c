# xfw build. `make` builds bin/xfw (BPF objects compiled by clang, embedded
# in the Go binary) and bin/xfw-difftest (the differential tester, a program
# of its own so that no test harness is linked into xfw); `make test` runs
# every test; `make demo` runs the demo.
GO ?= go
CLANG ?= clang
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -I/usr/include/$(shell uname -m)-linux-gnu
BPF_SRC := $(wildcard bpf/*.c bpf/*.h)
# One object per bpf/*.c: xfw.o (the hooks), ct_clock.o (the connection
# tables' clock) and guard.o (the namespace-wide guard the agent links),
# embedded in the binary; layouts.o (BTF of the layouts shared with user
# space), read by internal/dataplane's tests only.
BPF_DIR := internal/dataplane/bpf
BPF_OBJ := $(patsubst bpf/%.c,$(BPF_DIR)/%.o,$(wildcard bpf/*.c))
# bin/xfw-cmd: the agent's small command client in C (cmd/xfw-cmd), which
# the iptables alternatives' names link to; libc only, linked statically:
# it runs once per iptables command, and the dynamic loader's work (libc
# found, mapped and relocated) was 0.1-0.3 ms of each. Compiled by clang,
# which deps.sh installs on every machine (a C compiler named cc may be
# missing where gcc-multilib is not installed).
CMD_CFLAGS := -O2 -Wall -Wextra -Werror -static

.PHONY: all build test unit demo deps clean bench bench-quick

all: build

deps:
	./scripts/deps.sh

$(BPF_DIR)/%.o: bpf/%.c $(BPF_SRC)
	@mkdir -p $(dir $@)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

build: $(BPF_OBJ)
	$(GO) build -o bin/xfw ./cmd/xfw
	$(GO) build -o bin/xfw-difftest ./cmd/xfw-difftest
	$(CLANG) $(CMD_CFLAGS) -o bin/xfw-cmd cmd/xfw-cmd/xfw-cmd.c

unit: $(BPF_OBJ)
	$(GO) vet ./...
	$(GO) test -count=1 ./internal/ir/ ./internal/compiler/ ./internal/iptables/

# The README's two commands: both install missing system packages first.
test: deps
	$(MAKE) build
	$(GO) vet ./...
	$(MAKE) test-run

# `make test`'s tests (docs/testing.md, "Time"): tests/install first and
# alone (its `make install` relinks bin/xfw-cmd, which namespace tests
# run), then 2+E2E_SHARDS streams at once: the other packages one at a
# time (-p 1), tests/difftest (the longest of them, 6 of their 13
# minutes), and tests/e2e's tests split by name into E2E_SHARDS
# processes of about equal time (scripts/e2e-shards.sh, by the durations
# E2E_DURATIONS records; `make e2e-durations LOG=...` rewrites it from a
# `make test TEST_FLAGS=-v` log). Tests in different
# processes share nothing but what the kernel and the /run locks share
# (each builds namespaces of its own; docs/testing.md, "Namespaces").
# Every line is prefixed with its stream's name; the run fails if a
# stream does. Before them, alone, the tests/e2e tests that hold or stall
# the machine's /run/xfw.lock (E2E_ALONE: a stopped agent, a held lock),
# which every other test's xfw commands wait for: beside the shards, the
# commands of TestBridgedRejectAgainstKernel waited past their 30 s bound
# while TestCmdServerStoppedAgent ran. `make test-run E2E_SHARDS=0` runs tests/e2e with the
# other packages, one package at a time, as before; TEST_FLAGS go to every
# `go test` of the run (-v, -json).
E2E_SHARDS ?= 2
E2E_DURATIONS := tests/e2e/durations.txt
space := $(subst ,, )
TEST_TIMEOUT ?= 60m
TEST_FLAGS ?=
E2E_ALONE := TestCmdServerAgentEndsWhileWaiting|TestCmdServerCallerGone|TestCmdServerKilledAgent|\
	TestCmdServerStoppedAgent|TestCmdServerWaitSemantics|TestConcurrentCommandsLoseNothing|\
	TestIpsetLocksItsNamespaceOnly
.PHONY: test-run
test-run: SHELL := /bin/bash
test-run:
	$(GO) test $(TEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./tests/install/
	@set -u -o pipefail; shards=$(E2E_SHARDS); dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	stream() { local name=$$1; shift; { "$$@"; echo $$? >"$$dir/$$name"; } 2>&1 | sed -u "s/^/$$name: /"; }; \
	if [ "$$shards" -gt 0 ]; then \
		alone='$(subst $(space),,$(E2E_ALONE))'; \
		all=$$($(GO) test -list '^Test' ./tests/e2e/ | grep '^Test' | LC_ALL=C sort) || \
			{ echo "make test: cannot list tests/e2e's tests" >&2; exit 1; }; \
		[ "$$(grep -cxE "$$alone" <<<"$$all")" -eq "$$(tr '|' '\n' <<<"$$alone" | wc -l)" ] || \
			{ echo "make test: E2E_ALONE names a test tests/e2e does not have" >&2; exit 1; }; \
		e2e=$$(grep -vxE "$$alone" <<<"$$all"); \
		[ -n "$$e2e" ] || { echo "make test: tests/e2e lists no test" >&2; exit 1; }; \
		mapfile -t runs < <(./scripts/e2e-shards.sh "$$shards" $(E2E_DURATIONS) <<<"$$e2e") && \
			[ "$${#runs[@]}" -eq "$$shards" ] || { echo "make test: cannot deal tests/e2e into shards" >&2; exit 1; }; \
		{ $(GO) test $(TEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./tests/e2e/ -run "^($$alone)\$$"; \
			echo $$? >"$$dir/e2e-alone"; } 2>&1 | sed -u "s/^/e2e-alone: /"; \
		pkgs=$$($(GO) list ./... | grep -v -e '/tests/e2e$$' -e '/tests/install$$' -e '/tests/difftest$$'); \
		stream difftest $(GO) test $(TEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./tests/difftest/ & \
	else pkgs=$$($(GO) list ./... | grep -v -e '/tests/install$$'); fi; \
	stream pkgs $(GO) test $(TEST_FLAGS) -count=1 -p 1 -timeout $(TEST_TIMEOUT) $$pkgs & \
	for ((i = 0; i < shards; i++)); do \
		stream e2e-$$i $(GO) test $(TEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./tests/e2e/ -run "^($${runs[$$i]})\$$" & \
	done; wait; \
	fail=0; for name in pkgs $$([ "$$shards" -gt 0 ] && echo e2e-alone difftest) $$(for ((i = 0; i < shards; i++)); do echo e2e-$$i; done); do \
		rc=$$(cat "$$dir/$$name" 2>/dev/null || echo none); \
		[ "$$rc" = 0 ] || { echo "make test: stream $$name failed (exit status $$rc)" >&2; fail=1; }; \
	done; exit $$fail

# The e2e tests' durations the shards are dealt by, from the log of a
# `make test TEST_FLAGS=-v 2>&1 | tee LOG` run.
.PHONY: e2e-durations
e2e-durations:
	@[ -n "$(LOG)" ] || { echo "usage: make e2e-durations LOG=make-test-v.log" >&2; exit 2; }
	./scripts/e2e-shards.sh --record $(LOG) | grep -E '^Test' >$(E2E_DURATIONS).new
	@[ -s $(E2E_DURATIONS).new ] || { echo "make e2e-durations: no test durations in $(LOG)" >&2; rm -f $(E2E_DURATIONS).new; exit 1; }
	mv $(E2E_DURATIONS).new $(E2E_DURATIONS)

demo: deps
	$(MAKE) build
	./scripts/demo.sh

clean:
	rm -rf bin $(BPF_DIR)/*.o

# Benchmark suite (issue #5; as root): every section, results/ and the
# Benchmarks section of docs/benchmarks.md (some tens of minutes) or the headline ratios
# only (under a minute). See bench/run.sh.
bench: deps
	$(MAKE) build
	./bench/run.sh full

bench-quick: deps
	$(MAKE) build
	./bench/run.sh quick

# kube-proxy's rulesets (issue 19; as root): restore, one-service update and
# per-packet cost of 1K/5K/10K services × 10 endpoints on xfw, iptables-nft,
# iptables-legacy and nftables; writes results/kubeproxy.{md,json}. Not part
# of `make bench`. KP_FLAGS passes xfwbench kubeproxy flags (-services, -reps).
KP_FLAGS ?=
.PHONY: bench-kubeproxy
bench-kubeproxy: build
	mkdir -p results/tmp
	cp bin/xfw results/tmp/xfw
	$(GO) build -o bin/xfwbench ./bench
	./bin/xfwbench kubeproxy -xfw results/tmp/xfw $(KP_FLAGS)

# The differential oracle, a long campaign: random rulesets (COUNT per
# family, from SEED) through the kernel's iptables-legacy and through xfw.
# (`make test` runs a bounded one: tests/difftest.)
SEED ?= 1
COUNT ?= 100
PACKETS ?= 2000
.PHONY: difftest
difftest: build
	./bin/xfw-difftest --seed $(SEED) --rulesets $(COUNT) --packets $(PACKETS)

# LPM benchmark for large address sets (issue #7; as root): xfw's DXR tables
# vs the kernel's LPM trie and hash, ipset and nft build times; fetches its
# data sets (apt, pip, Go module proxy) into results/tmp/lpm-data and writes
# results/lpm.md. See bench/lpm/run.sh.
.PHONY: bench-lpm
bench-lpm: deps
	./bench/lpm/run.sh

# Installing as the system's iptables (issue #18; docs/install.md).
# `make install` (DESTDIR, PREFIX=/usr) lays out bin/xfw, bin/xfw-cmd and
# bin/xfw-difftest in SBINDIR, the names the iptables and ip6tables
# alternatives link to (iptables-xfw, … → xfw-cmd, the agent's client,
# which runs xfw when no agent serves the command), the systemd units, the
# manual page and /etc/xfw. It registers no alternative and enables no unit:
# the package's postinst registers (dist/deb), the admin switches and
# enables. `make uninstall` removes what it laid out (keeping /etc/xfw if it
# holds saved rules) and refuses while the system's iptables is xfw.
# `make deb` builds bin/xfw_VERSION_ARCH.deb (scripts/mkdeb.sh).
PREFIX ?= /usr
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= /lib/systemd/system
SYSCONFDIR ?= /etc
XFW_UNITS := xfw-restore.service xfw-agent.service
XFW_ALTNAMES := iptables-xfw iptables-xfw-restore iptables-xfw-save \
	ip6tables-xfw ip6tables-xfw-restore ip6tables-xfw-save
.PHONY: install uninstall deb
install: build
	install -d -m 0755 $(DESTDIR)$(SBINDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SYSCONFDIR)/xfw
	install -m 0755 bin/xfw bin/xfw-cmd bin/xfw-difftest $(DESTDIR)$(SBINDIR)/
	for n in $(XFW_ALTNAMES); do ln -sfn xfw-cmd $(DESTDIR)$(SBINDIR)/$$n; done
	for u in $(XFW_UNITS); do \
		sed 's|/usr/sbin/xfw|$(SBINDIR)/xfw|g' dist/systemd/$$u >$(DESTDIR)$(UNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	gzip -9n <docs/xfw.8 >$(DESTDIR)$(MANDIR)/man8/xfw.8.gz
	chmod 0644 $(DESTDIR)$(MANDIR)/man8/xfw.8.gz

uninstall:
	@for g in iptables ip6tables; do \
		if [ -z "$(DESTDIR)" ] && [ "$$(readlink /etc/alternatives/$$g)" = "$(SBINDIR)/$$g-xfw" ]; then \
			echo "make uninstall: $$g is xfw (update-alternatives); switch back first: docs/install.md" >&2; \
			exit 1; \
		fi; \
	done
	rm -f $(DESTDIR)$(SBINDIR)/xfw $(DESTDIR)$(SBINDIR)/xfw-cmd $(DESTDIR)$(SBINDIR)/xfw-difftest \
		$(addprefix $(DESTDIR)$(SBINDIR)/,$(XFW_ALTNAMES)) \
		$(addprefix $(DESTDIR)$(UNITDIR)/,$(XFW_UNITS)) \
		$(DESTDIR)$(MANDIR)/man8/xfw.8.gz
	rmdir $(DESTDIR)$(SYSCONFDIR)/xfw 2>/dev/null || true

deb: build
	./scripts/mkdeb.sh
