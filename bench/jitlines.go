package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// writeJitLines writes, for each loaded program whose id is in ids
// (comma-separated), one line per BTF line info: the JIT image address the
// source line starts at (hex), file:line and the source text, tab
// separated. bench/profile.sh maps sampled instruction addresses to source
// lines with it (bpftool needs libbfd for a JIT listing).
func writeJitLines(w io.Writer, ids string) error {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for _, s := range strings.Split(ids, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		id, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("program id %q: %w", s, err)
		}
		if err := writeProgJitLines(bw, ebpf.ProgramID(id)); err != nil {
			return fmt.Errorf("program %d: %w", id, err)
		}
	}
	return nil
}

// writeProgJitLines is writeJitLines for one program.
func writeProgJitLines(w io.Writer, id ebpf.ProgramID) error {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return err
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return err
	}
	addrs, ok := info.JitedLineInfos()
	if !ok {
		return fmt.Errorf("the kernel gives no JIT line infos")
	}
	lines, err := info.LineInfos()
	if err != nil {
		return err
	}
	// The kernel lists both in the same order, one address per line info.
	for i, l := range lines {
		if i >= len(addrs) {
			break
		}
		fmt.Fprintf(w, "%x\t%s:%d\t%s\n", addrs[i], l.Line.FileName(), l.Line.LineNumber(),
			strings.TrimSpace(l.Line.Line()))
	}
	return nil
}
