package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/xfw-dev/xfw/internal/logd"
)

func init() {
	commands["nflog"] = runNFLog
}

// nflogUsage is xfw nflog's usage line.
const nflogUsage = "usage: xfw nflog [-w FILE|-] GROUP"

// runNFLog is xfw nflog: the NFLOG events of one group, as text lines
// (ulogd's LOGEMU format) or, with -w, as a pcap stream to FILE or to
// standard output ("-"), until interrupted.
func runNFLog(name string, args []string, env Env) int {
	var pcapPath, group string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-w" && i+1 < len(args) && pcapPath == "":
			pcapPath = args[i+1]
			i++
		case group == "" && args[i] != "-w":
			group = args[i]
		default:
			fmt.Fprintln(env.Stderr, nflogUsage)
			return exitParameter
		}
	}
	g, err := strconv.ParseUint(group, 10, 16)
	if err != nil || g > math.MaxUint16 {
		fmt.Fprintln(env.Stderr, nflogUsage+" (GROUP: 0 to 65535)")
		return exitParameter
	}
	o := logd.NFLogOptions{Group: uint16(g), Listening: func() {
		// As tcpdump says it, on standard error: scripts wait for it.
		fmt.Fprintf(env.Stderr, "xfw nflog: listening on NFLOG group %d\n", g)
	}}
	if pcapPath != "" {
		w, closeFile, err := pcapOutput(pcapPath, env.Stdout)
		if err != nil {
			fmt.Fprintf(env.Stderr, "xfw nflog: %v\n", err)
			return exitOther
		}
		defer closeFile()
		o.Pcap = w
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := logd.RunNFLog(ctx, env.Stdout, o); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(env.Stderr, "xfw nflog: %v\n", err)
		return exitOther
	}
	return exitOK
}

// pcapOutput opens where -w writes: path, or stdout for "-".
func pcapOutput(path string, stdout io.Writer) (io.Writer, func(), error) {
	if path == "-" {
		return stdout, func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	return f, func() { f.Close() }, nil
}
