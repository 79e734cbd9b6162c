# xfw build. `make` builds bin/xfw (BPF object compiled by clang, embedded
# in the Go binary); `make test` runs every test; `make demo` runs the demo.
GO ?= go
CLANG ?= clang
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -I/usr/include/$(shell uname -m)-linux-gnu
BPF_SRC := $(wildcard bpf/*.c bpf/*.h)
BPF_OBJ := internal/dataplane/bpf/xfw.o

.PHONY: all build test unit demo deps clean bench

all: build

deps:
	./scripts/deps.sh

$(BPF_OBJ): $(BPF_SRC)
	@mkdir -p $(dir $@)
	$(CLANG) $(BPF_CFLAGS) -c bpf/xfw.c -o $@

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
	rm -rf bin $(BPF_OBJ)
