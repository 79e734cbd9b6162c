package iptables

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The conformance runner: the upstream iptables extension tests (*.t files,
// format in shared/conformance/README.md) replayed against this package.

// FileReport is the outcome of one .t file. A case is one rule line tried
// for one family (in every filter chain the file lists).
type FileReport struct {
	Name                    string
	Passed, Failed, Skipped int
	// Failures describe the failed cases.
	Failures []string
	// SkipReasons count the skipped cases by reason.
	SkipReasons map[string]int
}

// Report is the outcome of a conformance run.
type Report struct {
	Files                   []FileReport
	Passed, Failed, Skipped int
}

// conformanceExtensions are the extension test files xfw supports, by the
// name after libxt_/libipt_/libip6t_.
var conformanceExtensions = map[string]bool{
	"tcp": true, "udp": true, "multiport": true, "icmp": true, "icmp6": true,
	"iprange": true, "comment": true, "length": true, "ttl": true, "hl": true,
	"mac": true, "standard": true, "REJECT": true, "LOG": true, "set": true,
	"conntrack": true, "state": true, "addrtype": true, "pkttype": true, "recent": true,
	"dscp": true, "tos": true, "ecn": true, "tcpmss": true,
	"rt": true, "frag": true, "ip6:ah": true, // ip6:NAME: only libip6t_NAME.t
	"limit": true, "hashlimit": true, "connlimit": true, "cpu": true,
	"string": true, "u32": true, "time": true,
	"hbh": true, "dst": true, "ipv6header": true, "mh": true,
	"sctp": true, "dccp": true, "esp": true, "ah": true, // "ah": libipt_ah.t
	"statistic": true, "mark": true, "MARK": true,
	"connmark": true, "CONNMARK": true, "owner": true,
	"TCPMSS": true, "DSCP": true, "TOS": true, "TTL": true, "HL": true, "NOTRACK": true,
	"DNAT": true, "SNAT": true, "MASQUERADE": true, "REDIRECT": true,
	"physdev": true,
	"NFLOG":   true,
	"SET":     true,
}

// conformanceSets is the set lookup of the conformance cases: upstream's
// iptables-test.py creates no ipset, and libxt_set.t expects "foo" not to
// exist ("fails: foo does not exist"), so no set exists.
func conformanceSets(string) (SetInfo, bool) { return SetInfo{}, false }

// conformanceFamilies returns the families a .t file is run with (as
// upstream's iptables-test.py does) and whether xfw supports the file.
func conformanceFamilies(name string) ([]ir.Family, bool) {
	base := strings.TrimSuffix(name, ".t")
	switch {
	case base == "iptables":
		return []ir.Family{ir.IPv4}, true
	case strings.HasPrefix(base, "libxt_"):
		return []ir.Family{ir.IPv4, ir.IPv6}, conformanceExtensions[strings.TrimPrefix(base, "libxt_")]
	case strings.HasPrefix(base, "libipt_"):
		return []ir.Family{ir.IPv4}, conformanceExtensions[strings.TrimPrefix(base, "libipt_")]
	case strings.HasPrefix(base, "libip6t_"):
		ext := strings.TrimPrefix(base, "libip6t_")
		return []ir.Family{ir.IPv6}, conformanceExtensions[ext] || conformanceExtensions["ip6:"+ext]
	}
	return []ir.Family{ir.IPv4}, false
}

// RunConformance runs every *.t file of dir (the extensions folder of the
// upstream iptables tests) and reports, per file and in total, the cases
// that passed, failed and were skipped. Files of extensions xfw does not
// support, lines of tables other than filter and lines limited to the
// nf_tables backend are skipped, never passed.
func RunConformance(dir string) (Report, error) {
	var rep Report
	files, err := filepath.Glob(filepath.Join(dir, "*.t"))
	if err != nil {
		return rep, fmt.Errorf("list conformance files: %w", err)
	}
	if len(files) == 0 {
		return rep, fmt.Errorf("no conformance files (*.t) in %s", dir)
	}
	sort.Strings(files)
	for _, path := range files {
		fr, err := runConformanceFile(path)
		if err != nil {
			return rep, err
		}
		rep.Files = append(rep.Files, fr)
		rep.Passed += fr.Passed
		rep.Failed += fr.Failed
		rep.Skipped += fr.Skipped
	}
	return rep, nil
}

// runConformanceFile runs one .t file.
func runConformanceFile(path string) (FileReport, error) {
	fr := FileReport{Name: filepath.Base(path), SkipReasons: map[string]int{}}
	fams, supported := conformanceFamilies(fr.Name)
	f, err := os.Open(path)
	if err != nil {
		return fr, fmt.Errorf("open conformance file: %w", err)
	}
	defer f.Close()
	skip := func(reason string) {
		fr.Skipped += len(fams)
		fr.SkipReasons[reason] += len(fams)
	}
	table := "filter"
	var chains []string
	sc := bufio.NewScanner(f)
	const maxLine = 1 << 20 // long comment tests
	sc.Buffer(make([]byte, 0, maxLine), maxLine)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, ":"):
			chains = strings.Split(line[1:], ",")
			continue
		case strings.HasPrefix(line, "*"):
			table = strings.TrimSpace(line[1:])
			continue
		case strings.HasPrefix(line, "@") || strings.HasPrefix(line, "%"):
			// Helper commands prepare other modules' tests; a supported
			// file needing one would be tested wrongly without it.
			if supported {
				return fr, fmt.Errorf("%s:%d: helper command not supported: %q", fr.Name, lineNo, line)
			}
			continue
		}
		fields := strings.Split(line, ";")
		if len(fields) < 3 {
			return fr, fmt.Errorf("%s:%d: malformed line %q", fr.Name, lineNo, line)
		}
		switch {
		case !supported:
			skip("unsupported extension")
			continue
		case !ir.IsTable(table):
			skip("table " + table)
			continue
		case len(fields) > 3 && fields[3] == "NFT":
			skip("nf_tables only")
			continue
		}
		for _, fam := range fams {
			msg, ok, skipped := conformanceCase(fam, table, chains, fields[0], fields[1], fields[2])
			switch {
			case skipped:
				fr.Skipped++
				fr.SkipReasons["no filter chain"]++
			case ok:
				fr.Passed++
			default:
				fr.Failed++
				fr.Failures = append(fr.Failures, fmt.Sprintf("%s:%d (%s): %s", fr.Name, lineNo, fam, msg))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fr, fmt.Errorf("read %s: %w", fr.Name, err)
	}
	return fr, nil
}

// conformanceCase checks one rule line for one family in every built-in
// chain of table listed.
func conformanceCase(fam ir.Family, table string, chains []string, rule, expected, result string) (msg string, ok, skipped bool) {
	args, err := shellSplit(rule)
	if err != nil {
		return err.Error(), false, false
	}
	if expected == "=" {
		expected = rule
	}
	tried := 0
	for _, chain := range chains {
		if !ir.IsTableBuiltin(table, chain) {
			continue
		}
		tried++
		got, err := addToEmpty(fam, table, chain, args)
		switch result {
		case "OK":
			if err != nil {
				return fmt.Sprintf("-A %s %s: want success, got %v", chain, rule, err), false, false
			}
			want := strings.TrimSpace("-A " + chain + " " + expected)
			if len(got) != 1 || got[0] != want {
				return fmt.Sprintf("-A %s %s: got %q, want %q", chain, rule, got, want), false, false
			}
		case "FAIL":
			if err == nil {
				return fmt.Sprintf("-A %s %s: want failure, got %q", chain, rule, got), false, false
			}
		default:
			return fmt.Sprintf("unknown result %q", result), false, false
		}
	}
	return "", tried > 0, tried == 0
}

// addToEmpty runs "iptables -t table -A chain args" on an empty table and
// returns the rules "iptables -t table -S chain" prints.
func addToEmpty(fam ir.Family, table, chain string, args []string) ([]string, error) {
	rs := ir.NewRuleset(fam)
	cmd, err := ParseCommandWith(fam, append([]string{"-t", table, "-A", chain}, args...), ParseOptions{Sets: conformanceSets})
	if err != nil {
		return nil, err
	}
	if _, err := cmd.Apply(rs); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rs.TableByName(table).Chain(chain).Rules {
		out = append(out, FormatRule(fam, chain, r, false))
	}
	return out, nil
}

// shellSplit splits a command line as a POSIX shell does (single quotes,
// double quotes with backslash escapes, backslashes), which is how the
// upstream test runner passes rules to iptables.
func shellSplit(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote in " + s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote in " + s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
