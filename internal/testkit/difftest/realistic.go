package difftest

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// Named is a ruleset with its name and family.
type Named struct {
	Name   string
	Family ir.Family
	Text   string
}

//go:embed testdata/*.rules
var testdata embed.FS

// Realistic returns the hand-written rulesets of testdata/ (in the style of
// ufw, Docker, firewalld and a DMZ router; NAME.v4.rules and NAME.v6.rules),
// written for the topology's addresses with DefaultSubnet.
func Realistic() ([]Named, error) {
	files, err := testdata.ReadDir("testdata")
	if err != nil {
		return nil, fmt.Errorf("list testdata: %w", err)
	}
	var out []Named
	for _, f := range files {
		b, err := testdata.ReadFile("testdata/" + f.Name())
		if err != nil {
			return nil, fmt.Errorf("read testdata: %w", err)
		}
		fam := ir.IPv4
		if strings.Contains(f.Name(), ".v6.") {
			fam = ir.IPv6
		}
		out = append(out, Named{Name: "testdata/" + f.Name(), Family: fam, Text: string(b)})
	}
	return out, nil
}

// Skipped is a ruleset left out, and why.
type Skipped struct {
	Name, Reason string
}

// unsupportedLine matches rule lines with matches or targets xfw does not
// support (the parser names them; these are the ones real dumps use).
var unsupportedLine = regexp.MustCompile(`(-m|-j|--match|--jump) (limit|hashlimit|recent|addrtype|TCPMSS|NFQUEUE|CHECKSUM|CT|MARK|CONNMARK|set|owner|physdev|rt|pkttype|u32|string|time|connlimit|policy)\b`)

// Dumps returns the filter tables of the iptables-save dumps in dir (the
// conformance suite's dumps/). A dump whose filter table uses what xfw
// does not support is skipped by name, and checked again without the lines
// that use it ("NAME without N unsupported lines"): a different ruleset,
// but one both firewalls load. Interface names are mapped onto fw's (the
// most used one becomes in0, the next out0) so that -i/-o rules see
// traffic.
func Dumps(dir string) ([]Named, []Skipped, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return nil, nil, fmt.Errorf("list dumps: %w", err)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no dumps in %s", dir)
	}
	sort.Strings(files)
	var out []Named
	var skipped []Skipped
	for _, path := range files {
		name := filepath.Base(path)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read dump: %w", err)
		}
		text := FilterTable(string(b))
		if text == "" {
			skipped = append(skipped, Skipped{name, "no filter table (not iptables-save output)"})
			continue
		}
		fam := ir.IPv4
		if strings.Contains(name, "ip6") {
			fam = ir.IPv6
		}
		text = MapInterfaces(text)
		if err := supported(fam, text); err != nil {
			skipped = append(skipped, Skipped{name, firstLine(err.Error())})
			sub, dropped := dropLines(text, unsupportedLine)
			if dropped == 0 || supported(fam, sub) != nil {
				continue
			}
			name = fmt.Sprintf("%s without %d unsupported lines", name, dropped)
			text = sub
		}
		out = append(out, Named{Name: "dumps/" + name, Family: fam, Text: text})
	}
	return out, skipped, nil
}

// dropLines returns text without the lines re matches, and how many it
// dropped.
func dropLines(text string, re *regexp.Regexp) (string, int) {
	var kept []string
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if re.MatchString(l) {
			n++
			continue
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "\n"), n
}

// statefulRe matches a rule line that looks at connection tracking.
var statefulRe = regexp.MustCompile(`(-m|--match) (conntrack|state)\b`)

// Stateful reports whether a ruleset uses connection tracking (-m
// conntrack, -m state, or a nat table): its packets then come from
// GenerateStatefulCorpus and its sessions flush the connection tables
// (Config.Conntrack).
func Stateful(ruleset string) bool { return statefulRe.MatchString(ruleset) || HasNATTable(ruleset) }

// supported reports why xfw cannot load text, or nil.
func supported(fam ir.Family, text string) error {
	rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{})
	if err != nil {
		return err
	}
	_, err = compiler.Compile(rs, compiler.Options{})
	return err
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// FilterTable returns the "*filter" block of iptables-save output (through
// its COMMIT), or "".
func FilterTable(dump string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case strings.TrimSpace(l) == "*filter":
			in = true
		case !in:
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
		if strings.TrimSpace(l) == "COMMIT" {
			return b.String()
		}
	}
	return ""
}

// ifaceOpt matches an -i/-o option and its name.
var ifaceOpt = regexp.MustCompile(`(^| )(-i|-o|--in-interface|--out-interface) (\S+)`)

// MapInterfaces renames the interfaces a ruleset names after fw's: the most
// used name becomes in0, the next out0 (lo and wildcards stay).
func MapInterfaces(text string) string {
	uses := map[string]int{}
	var order []string
	for _, m := range ifaceOpt.FindAllStringSubmatch(text, -1) {
		n := m[3]
		if n == "lo" || strings.HasSuffix(n, "+") {
			continue
		}
		if uses[n] == 0 {
			order = append(order, n)
		}
		uses[n]++
	}
	sort.SliceStable(order, func(i, j int) bool { return uses[order[i]] > uses[order[j]] })
	to := map[string]string{}
	for i, n := range order {
		if i < 2 {
			to[n] = []string{"in0", "out0"}[i]
		}
	}
	return ifaceOpt.ReplaceAllStringFunc(text, func(s string) string {
		m := ifaceOpt.FindStringSubmatch(s)
		if t, ok := to[m[3]]; ok {
			return m[1] + m[2] + " " + t
		}
		return s
	})
}

// ErrNoDumps is returned by DumpsDir when the conformance data is missing.
var ErrNoDumps = errors.New("conformance dumps not found")

// DumpsDir finds the conformance suite's dumps from a directory of the
// repository (it lives in ../shared beside the clone).
func DumpsDir(from string) (string, error) {
	from, err := filepath.Abs(from)
	if err != nil {
		return "", fmt.Errorf("find the conformance dumps: %w", err)
	}
	for dir := from; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "..", "shared", "conformance", "iptables", "dumps")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w above %s (want ../shared/conformance/iptables/dumps beside the clone)", ErrNoDumps, from)
		}
	}
}
