package difftest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// This file reads the kernel's LOG lines from /dev/kmsg.

// kmsgReader follows the kernel log.
type kmsgReader struct {
	f       *os.File
	mu      sync.Mutex
	overrun int
	started bool
	done    chan struct{}
}

// openKmsg opens /dev/kmsg after its last record.
func openKmsg() (*kmsgReader, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seek /dev/kmsg: %w", err)
	}
	return &kmsgReader{f: os.NewFile(uintptr(fd), "/dev/kmsg"), done: make(chan struct{})}, nil
}

// kmsgRecordMax bounds one /dev/kmsg record.
const kmsgRecordMax = 8192

// start reads records in the background until close, adding LOG lines to
// log.
func (k *kmsgReader) start(log *eventLog) {
	k.started = true
	go k.run(log)
}

// run is start's loop.
func (k *kmsgReader) run(log *eventLog) {
	defer close(k.done)
	rc, err := k.f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, kmsgRecordMax)
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		if err == nil {
			err = rerr
		}
		if errors.Is(err, unix.EPIPE) {
			// Records were overwritten before we read them.
			k.mu.Lock()
			k.overrun++
			k.mu.Unlock()
			continue
		}
		if err != nil {
			return
		}
		if text, ok := kmsgText(string(buf[:n])); ok && strings.Contains(text, "IN=") && strings.Contains(text, " OUT=") {
			log.add(logEvent(text))
		}
	}
}

// overruns returns how many times records were lost.
func (k *kmsgReader) overruns() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.overrun
}

// close stops the reader.
func (k *kmsgReader) close() {
	k.f.Close()
	if k.started {
		<-k.done
	}
}

// kmsgText returns the text of a record "prio,seq,usec,flags;text\n...",
// with its \xNN escapes undone.
func kmsgText(rec string) (string, bool) {
	_, body, ok := strings.Cut(rec, ";")
	if !ok {
		return "", false
	}
	text, _, _ := strings.Cut(body, "\n")
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' && i+3 < len(text) && text[i+1] == 'x' {
			if v, err := strconv.ParseUint(text[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(text[i])
	}
	return b.String(), true
}
