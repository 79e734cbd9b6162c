package dataplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelFloor is the oldest Linux release xfw's programs work on. Each
// feature that sets it, with the release that brought it:
//
//   - TCX links for the egress and ingress programs: 6.6.
//   - bpf_fib_lookup's BPF_FIB_LOOKUP_SRC, which picks a REJECT reply's
//     source address as the kernel's route would: 6.7.
//
// On an older kernel the programs would load but answer wrongly (a fib
// lookup with an unknown flag fails, so REJECT replies would never be
// sent), so xfw refuses to load there.
var kernelFloor = kernelRelease{6, 7}

// kernelCheckEnv names the environment variable that skips the release
// check: for a distribution kernel that backports these features under an
// older version number.
const kernelCheckEnv = "XFW_KERNEL_CHECK"

// kernelRelease is a Linux release's major and minor number.
type kernelRelease struct{ major, minor int }

func (r kernelRelease) String() string { return fmt.Sprintf("%d.%d", r.major, r.minor) }

// before reports whether r is an older release than o.
func (r kernelRelease) before(o kernelRelease) bool {
	return r.major < o.major || (r.major == o.major && r.minor < o.minor)
}

// parseKernelRelease reads the major and minor number at the start of a
// uname release string ("6.18.0-1-amd64", "6.7", "5.15.0+").
func parseKernelRelease(s string) (kernelRelease, error) {
	fields := strings.SplitN(s, ".", 3)
	if len(fields) < 2 {
		return kernelRelease{}, fmt.Errorf("kernel release %q: want MAJOR.MINOR", s)
	}
	major, err := strconv.Atoi(fields[0])
	if err != nil {
		return kernelRelease{}, fmt.Errorf("kernel release %q: major: %w", s, err)
	}
	minor := fields[1]
	if end := strings.IndexFunc(minor, func(c rune) bool { return c < '0' || c > '9' }); end >= 0 {
		minor = minor[:end]
	}
	n, err := strconv.Atoi(minor)
	if err != nil {
		return kernelRelease{}, fmt.Errorf("kernel release %q: minor: %w", s, err)
	}
	return kernelRelease{major, n}, nil
}

// checkKernel refuses a running kernel older than kernelFloor, unless
// XFW_KERNEL_CHECK=off.
func checkKernel() error {
	if os.Getenv(kernelCheckEnv) == "off" {
		return nil
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	return checkRelease(unix.ByteSliceToString(u.Release[:]))
}

// checkRelease is checkKernel's test on a release string.
func checkRelease(release string) error {
	r, err := parseKernelRelease(release)
	if err != nil {
		return err
	}
	if r.before(kernelFloor) {
		return fmt.Errorf("xfw needs Linux %s or later (TCX links, bpf_fib_lookup's source address selection); this kernel is %s (%s=off skips this check on a kernel that has backported them)",
			kernelFloor, release, kernelCheckEnv)
	}
	return nil
}
