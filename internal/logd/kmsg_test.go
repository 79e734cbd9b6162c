package logd

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// kmsgTail reads the kernel log records written after it was opened.
type kmsgTail struct {
	fd int
}

// kmsgRecordMax bounds one /dev/kmsg record (with its dictionary).
const kmsgRecordMax = 8192

// kmsgPoll is how often waitLine looks for new records.
const kmsgPoll = 5 * time.Millisecond

// openKmsgTail opens /dev/kmsg positioned after the last record.
func openKmsgTail() (*kmsgTail, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seek /dev/kmsg: %w", err)
	}
	return &kmsgTail{fd: fd}, nil
}

// Close closes the file.
func (k *kmsgTail) Close() error { return unix.Close(k.fd) }

// kmsgRecord is one kernel log record.
type kmsgRecord struct {
	level int // syslog level (the facility removed)
	text  string
}

// next returns the next record, or false when there is none yet.
func (k *kmsgTail) next() (kmsgRecord, bool, error) {
	buf := make([]byte, kmsgRecordMax)
	for {
		n, err := unix.Read(k.fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return kmsgRecord{}, false, nil
		case errors.Is(err, unix.EPIPE):
			continue // records were overwritten: go on with the next one
		case err != nil:
			return kmsgRecord{}, false, fmt.Errorf("read /dev/kmsg: %w", err)
		}
		return parseKmsg(string(buf[:n]))
	}
}

// parseKmsg parses "prio,seq,usec,flags[,...];text\n[ KEY=value\n...]".
func parseKmsg(rec string) (kmsgRecord, bool, error) {
	head, body, ok := strings.Cut(rec, ";")
	if !ok {
		return kmsgRecord{}, false, fmt.Errorf("malformed /dev/kmsg record %q", rec)
	}
	prio, _, _ := strings.Cut(head, ",")
	p, err := strconv.Atoi(prio)
	if err != nil {
		return kmsgRecord{}, false, fmt.Errorf("malformed /dev/kmsg priority %q", prio)
	}
	text, _, _ := strings.Cut(body, "\n")
	const levelMask = 7 // the facility is in the higher bits
	return kmsgRecord{level: p & levelMask, text: unescapeKmsg(text)}, true, nil
}

// unescapeKmsg undoes /dev/kmsg's \xNN escapes.
func unescapeKmsg(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// waitLine returns the first new record whose text starts with prefix.
func (k *kmsgTail) waitLine(prefix string, timeout time.Duration) (kmsgRecord, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, ok, err := k.next()
		if err != nil {
			return kmsgRecord{}, err
		}
		if ok {
			if strings.HasPrefix(r.text, prefix) {
				return r, nil
			}
			continue
		}
		if time.Now().After(deadline) {
			return kmsgRecord{}, fmt.Errorf("no kernel log line starting with %q within %v", prefix, timeout)
		}
		time.Sleep(kmsgPoll)
	}
}
