package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/metrics"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// metricsRules4 has the rules TestMetrics counts through: an accepting
// rule with a comment (quotes and a backslash: escaped in the labels), a
// dropping rule, a DROP policy behind them, and a set match in INPUT.
const metricsRules4 = `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m set --match-set mbl src -j DROP
-A FORWARD -p udp -m udp --dport 7400 -m comment --comment "say \"hi\" \\ ok" -j ACCEPT
-A FORWARD -p udp -m udp --dport 7401 -j DROP
COMMIT
`

// metricsRules6 accepts one port in FORWARD.
const metricsRules6 = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 7400 -j ACCEPT
COMMIT
`

// TestMetrics loads rulesets of both families and a set, sends datagrams
// through fw, and checks that `xfw metrics` reports what `xfw iptables -L
// -v -x` lists (every rule and policy counter, with its labels), the drops
// the verdicts add up to, the set, the attachments and the families; and
// that the HTTP handler, run in fw's namespace, serves the same metrics.
func TestMetrics(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	run := func(argv ...string) string {
		t.Helper()
		res, err := nettest.Exec(tp.FwNS, append([]string{bin}, argv...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("xfw %v: %v %+v", argv, err, res)
		}
		return res.Stdout
	}
	run("ipset", "create", "mbl", "hash:ip")
	run("ipset", "add", "mbl", "192.0.2.7")
	fw.restore(t, tp, 4, metricsRules4)
	fw.restore(t, tp, 6, metricsRules6)

	srv4 := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7400))
	srv6 := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv6, 7400))
	// The dropped datagrams go first: once the accepted ones arrived,
	// fw has judged them all.
	for _, send := range []struct {
		dst netip.Addr
		n   int
		at  uint16
	}{{tp.Sink.IPv4, 2, 7401}, {tp.Sink.IPv4, 1, 7402}, {tp.Sink.IPv4, 3, 7400}, {tp.Sink.IPv6, 2, 7400}} {
		for i := 0; i < send.n; i++ {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(send.dst, send.at), []byte("x"))
		}
	}
	if got := srv4.Wait(3, arrivalWait); len(got) != 3 {
		t.Fatalf("%d of 3 IPv4 datagrams arrived", len(got))
	}
	if got := srv6.Wait(2, arrivalWait); len(got) != 2 {
		t.Fatalf("%d of 2 IPv6 datagrams arrived", len(got))
	}

	// IPv6 hosts send some traffic of their own (router solicitations,
	// MLD) that fw's INPUT may count meanwhile: each metric must lie
	// between the listings taken before and after it.
	before := listedCounters(t, run("iptables", "-w", "-L", "-v", "-x", "-n"), run("ip6tables", "-w", "-L", "-v", "-x", "-n"))
	text := run("metrics")
	after := listedCounters(t, run("iptables", "-w", "-L", "-v", "-x", "-n"), run("ip6tables", "-w", "-L", "-v", "-x", "-n"))
	got := parseMetrics(t, text)
	for key, lo := range before {
		v, ok := got[key]
		if !ok {
			t.Errorf("xfw metrics lacks %s\n%s", key, text)
			continue
		}
		if hi := after[key]; v < lo || v > hi {
			t.Errorf("%s = %d, iptables -L listed %d before and %d after", key, v, lo, hi)
		}
	}
	checkMetricValues(t, got, map[string]uint64{
		`xfw_rule_packets_total{family="ipv4",table="filter",chain="FORWARD",rule="1",comment="say \"hi\" \\ ok"}`: 3,
		`xfw_rule_packets_total{family="ipv4",table="filter",chain="FORWARD",rule="2",comment=""}`:                 2,
		`xfw_chain_policy_packets_total{family="ipv4",table="filter",chain="FORWARD"}`:                             1,
		`xfw_chain_drops_packets_total{family="ipv4",table="filter",chain="FORWARD"}`:                              3,
		`xfw_chain_drops_bytes_total{family="ipv4",table="filter",chain="FORWARD"}`:                                3 * 29, // IPv4 + UDP headers and 1 byte
		`xfw_rule_packets_total{family="ipv6",table="filter",chain="FORWARD",rule="1",comment=""}`:                 2,
		`xfw_set_entries{set="mbl",type="hash:ip"}`:                                                                1,
		`xfw_set_references{set="mbl"}`:                                                                            1,
		`xfw_interfaces_attached{interface="in0",hook="xdp"}`:                                                      1,
		`xfw_interfaces_attached{interface="out0",hook="tcx_egress"}`:                                              1,
		`xfw_loaded{family="ipv4"}`:                                                                                1,
		`xfw_loaded{family="ipv6"}`:                                                                                1,
		`xfw_conntrack_entries{family="ipv4"}`:                                                                     0, // no rule tracks connections
	})
	checkExposition(t, text)

	// The handler, run on a thread in fw's namespace, serves the same
	// metrics.
	var rec *httptest.ResponseRecorder
	if err := nettest.InNamespace(tp.FwNS, func() error {
		rec = httptest.NewRecorder()
		(&metrics.Collector{}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metrics.MetricsPath, nil))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != metrics.ContentType {
		t.Fatalf("GET %s: %d %q\n%s", metrics.MetricsPath, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	served := parseMetrics(t, rec.Body.String())
	for key, v := range got {
		w, ok := served[key]
		if !ok {
			t.Errorf("the handler lacks %s", key)
		} else if w < v || (w != v && !strings.Contains(key, `chain="INPUT"`) && !strings.Contains(key, `chain="OUTPUT"`)) {
			t.Errorf("the handler serves %s = %d, xfw metrics printed %d", key, w, v)
		}
	}
	if len(served) != len(got) {
		t.Errorf("the handler serves %d samples, xfw metrics printed %d", len(served), len(got))
	}
}

var (
	// listChainLine is a chain's header in iptables -L -v.
	listChainLine = regexp.MustCompile(`^Chain (\S+) \((?:policy \S+ (\d+) packets, (\d+) bytes|\d+ references)\)$`)
	// listRuleLine is a rule's line in iptables -L -v -x: pkts, bytes.
	listRuleLine = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s`)
)

// listedCounters returns the rule and policy counters of `iptables -L -v
// -x -n` and `ip6tables -L -v -x -n` listings, keyed as the metrics name
// them (without the rules' comment label).
func listedCounters(t *testing.T, list4, list6 string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for fam, list := range map[string]string{"ipv4": list4, "ipv6": list6} {
		chain, rule := "", 0
		sc := bufio.NewScanner(strings.NewReader(list))
		for sc.Scan() {
			line := sc.Text()
			if m := listChainLine.FindStringSubmatch(line); m != nil {
				chain, rule = m[1], 0
				if m[2] != "" {
					key := fmt.Sprintf(`{family=%q,table="filter",chain=%q}`, fam, chain)
					out["xfw_chain_policy_packets_total"+key] = atou(t, m[2])
					out["xfw_chain_policy_bytes_total"+key] = atou(t, m[3])
				}
			} else if m := listRuleLine.FindStringSubmatch(line); m != nil {
				rule++
				key := fmt.Sprintf(`{family=%q,table="filter",chain=%q,rule="%d"}`, fam, chain, rule)
				out["xfw_rule_packets_total"+key] = atou(t, m[1])
				out["xfw_rule_bytes_total"+key] = atou(t, m[2])
			}
		}
	}
	return out
}

// metricLine is a sample line of the text exposition format.
var metricLine = regexp.MustCompile(`^([a-z_]+)(\{.*\})? (\d+)$`)

// commentLabel is a rule sample's comment label, last of its labels.
var commentLabel = regexp.MustCompile(`,comment="(?:[^"\\]|\\.)*"\}$`)

// parseMetrics returns the samples of a metrics text by name and labels
// as written; a rule sample is also keyed without its comment label, as
// listedCounters keys them.
func parseMetrics(t *testing.T, text string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := metricLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample line: %q", line)
		}
		key, v := m[1]+m[2], atou(t, m[3])
		out[key] = v
		if strings.HasPrefix(key, "xfw_rule_") {
			out[commentLabel.ReplaceAllString(key, "}")] = v
		}
	}
	return out
}

// checkMetricValues requires the samples of want in got, with their
// values.
func checkMetricValues(t *testing.T, got, want map[string]uint64) {
	t.Helper()
	for key, w := range want {
		if v, ok := got[key]; !ok {
			t.Errorf("no sample %s", key)
		} else if v != w {
			t.Errorf("%s = %d, want %d", key, v, w)
		}
	}
}

// checkExposition requires HELP and TYPE lines before each family's
// samples, and each family in one block.
func checkExposition(t *testing.T, text string) {
	t.Helper()
	typed, done := map[string]bool{}, map[string]bool{}
	current := ""
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "# HELP "):
			if done[f[2]] {
				t.Errorf("family %s written twice", f[2])
			}
			done[current], current = true, f[2]
		case strings.HasPrefix(line, "# TYPE "):
			if f[2] != current || (f[3] != "counter" && f[3] != "gauge") {
				t.Errorf("TYPE line %q after the HELP of %s", line, current)
			}
			typed[f[2]] = true
		default:
			name, _, _ := strings.Cut(f[0], "{")
			if name != current || !typed[name] {
				t.Errorf("sample %q outside its family's block (%s)", line, current)
			}
		}
	}
}

// atou parses a decimal counter.
func atou(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
