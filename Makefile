# xfw build. `make` builds bin/xfw (BPF objects compiled by clang, embedded
# in the Go binary); `make test` runs every test; `make demo` runs the demo.
GO ?= go
CLANG ?= clang
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -I/usr/include/$(shell uname -m)-linux-gnu
BPF_SRC := $(wildcard bpf/*.c bpf/*.h)
# One object per bpf/*.c: xfw.o (the hooks) and ct_clock.o (the connection
# tables' clock), embedded in the binary; layouts.o (BTF of the layouts
# shared with user space), read by internal/dataplane's tests only.
BPF_DIR := internal/dataplane/bpf
BPF_OBJ := $(patsubst bpf/%.c,$(BPF_DIR)/%.o,$(wildcard bpf/*.c))

.PHONY: all build test unit demo deps clean bench bench-quick

all: build

deps:
	./scripts/deps.sh

$(BPF_DIR)/%.o: bpf/%.c $(BPF_SRC)
	@mkdir -p $(dir $@)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

build: $(BPF_OBJ)
	$(GO) build -o bin/xfw ./cmd/xfw

unit: $(BPF_OBJ)
	$(GO) vet ./...
	$(GO) test -count=1 ./internal/ir/ ./internal/compiler/ ./internal/iptables/

# The README's two commands: both install missing system packages first.
test: deps
	$(MAKE) build
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -timeout 60m ./...

demo: deps
	$(MAKE) build
	./scripts/demo.sh

clean:
	rm -rf bin $(BPF_DIR)/*.o

# Benchmark suite (issue #5; as root): every section, results/ and the
# README's Benchmarks section (some tens of minutes) or the headline ratios
# only (under a minute). See bench/run.sh.
bench: deps
	$(MAKE) build
	./bench/run.sh full

bench-quick: deps
	$(MAKE) build
	./bench/run.sh quick

# The differential oracle, a long campaign: random rulesets (COUNT per
# family, from SEED) through the kernel's iptables-legacy and through xfw.
# (`make test` runs a bounded one: tests/difftest.)
SEED ?= 1
COUNT ?= 100
PACKETS ?= 2000
.PHONY: difftest
difftest: build
	./bin/xfw difftest --seed $(SEED) --rulesets $(COUNT) --packets $(PACKETS)

# LPM benchmark for large address sets (issue #7; as root): xfw's DXR tables
# vs the kernel's LPM trie and hash, ipset and nft build times; fetches its
# data sets (apt, pip, Go module proxy) into results/tmp/lpm-data and writes
# results/lpm.md. See bench/lpm/run.sh.
.PHONY: bench-lpm
bench-lpm: deps
	./bench/lpm/run.sh
