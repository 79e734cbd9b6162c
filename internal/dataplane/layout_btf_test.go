package dataplane

import (
	"bytes"
	_ "embed"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/conntrack"
	"github.com/xfw-dev/xfw/internal/ir"
)

// layoutsObject is bpf/layouts.c compiled by `make build`: never loaded,
// it carries the BTF of every struct of bpf/xfw_structs.h and of the enums
// user space mirrors (xfw.o's BTF lacks the structs only inner maps reach).
//
//go:embed bpf/layouts.o
var layoutsObject []byte

// layoutMirror pairs a struct of bpf/xfw_structs.h with its Go mirror.
// Fields pair up in order; their names must agree once lowercased and
// stripped of underscores ("TCPState" and "tcp_state"), unless renamed.
type layoutMirror struct {
	c      string       // the C struct's name
	goType reflect.Type // its Go mirror
	// renamed maps a Go field to its C member where the names differ.
	renamed map[string]string
	// padding names Go fields with no C member: explicit padding where
	// the C struct has a hole or tail padding.
	padding []string
}

// layoutMirrors lists every struct the data plane and user space share:
// the keys and values of the maps the control plane fills or reads, the
// memory-mapped elements and the LOG event.
var layoutMirrors = []layoutMirror{
	{c: "xfw_setlk", goType: reflect.TypeOf(bpfSetLk{})},
	{c: "xfw_ext6cond", goType: reflect.TypeOf(bpfExt6Cond{})},
	{c: "xfw_h4cond", goType: reflect.TypeOf(bpfH4Cond{})},
	{c: "xfw_h4flag", goType: reflect.TypeOf(bpfH4Flag{})},
	{c: "xfw_setkey", goType: reflect.TypeOf(bpfSetKey{})},
	{c: "xfw_setval", goType: reflect.TypeOf(bpfSetVal{})},
	{c: "xfw_entry", goType: reflect.TypeOf(bpfEntry{})},
	{c: "xfw_limit", goType: reflect.TypeOf(bpfLimit{}), renamed: map[string]string{"CPJ": "cpj"}},
	{c: "xfw_probe", goType: reflect.TypeOf(bpfProbe{})},
	{c: "bpf_spin_lock", goType: reflect.TypeOf(bpfSpinLock{})},
	{c: "xfw_rc_key", goType: reflect.TypeOf(bpfRecentKey{})},
	{c: "xfw_rc_ent", goType: reflect.TypeOf(bpfRecentEnt{}), renamed: map[string]string{"TTL": "ttl", "NStamps": "nstamps", "LRU": "lru"}, padding: []string{"Pad3"}},
	{c: "xfw_rc_list", goType: reflect.TypeOf(bpfRecentList{})},
	{c: "xfw_rc_rule", goType: reflect.TypeOf(bpfRecentRule{})},
	{c: "xfw_hl_table", goType: reflect.TypeOf(bpfHLTable{}), renamed: map[string]string{"CPJ": "cpj", "GC": "gc", "GCDone": "gc_done"}},
	{c: "xfw_hl_key", goType: reflect.TypeOf(bpfHLKey{})},
	{c: "xfw_pred", goType: reflect.TypeOf(bpfPred{}), renamed: map[string]string{"TZWest": "tz_west", "TAIOff": "tai_off", "N": "n"}},
	{c: "xfw_u32_test", goType: reflect.TypeOf(bpfU32Test{}), renamed: map[string]string{"NNums": "nnums", "NValues": "nvalues"}},
	{c: "xfw_connlimit_key", goType: reflect.TypeOf(bpfConnlimitKey{})},
	{c: "xfw_ctexpire", goType: reflect.TypeOf(bpfCtExpire{})},
	{c: "xfw_chunk", goType: reflect.TypeOf(bpfChunk{})},
	{c: "xfw_u32pair", goType: reflect.TypeOf(bpfU32Pair{})},
	{c: "xfw_bnode", goType: reflect.TypeOf(bpfBNode{})},
	{c: "xfw_bkey", goType: reflect.TypeOf(bpfBKey{})},
	{c: "xfw_hkey", goType: reflect.TypeOf(bpfHKey{})},
	{c: "xfw_counter", goType: reflect.TypeOf(bpfCounter{})},
	{c: "xfw_logcfg", goType: reflect.TypeOf(bpfLogCfg{})},
	{c: "xfw_log_event", goType: reflect.TypeOf(bpfLogEvent{})},
	{c: "xfw_family_cfg", goType: reflect.TypeOf(bpfFamilyCfg{})},
	{c: "xfw_predrop", goType: reflect.TypeOf(bpfPreDrop{})},
	{c: "xfw_ifinfo", goType: reflect.TypeOf(bpfIfInfo{})},
	{c: "xfw_inflight", goType: reflect.TypeOf(bpfInflight{})},
	// The state pages are written as [statePage]byte.
	{c: "xfw_state_page", goType: reflect.TypeOf(struct{ B [statePage]byte }{})},
	{c: "xfw_lpm4_key", goType: reflect.TypeOf(lpmKey4{})},
	{c: "xfw_lpm6_key", goType: reflect.TypeOf(lpmKey6{})},
	{c: "xfw_local_val", goType: reflect.TypeOf(localVal{})},
	{c: "xfw_route_val", goType: reflect.TypeOf(routeVal{})},
	{c: "xfw_ct_key", goType: reflect.TypeOf(bpfCTKey{})},
	{c: "xfw_ct_tcp_side", goType: reflect.TypeOf(bpfCTTCPSide{})},
	{c: "xfw_ct_val", goType: reflect.TypeOf(bpfCTVal{})},
	{c: "xfw_ct_entry", goType: reflect.TypeOf(bpfCTEntry{}), renamed: map[string]string{"Head": "lock"}},
	{c: "xfw_ct_cfg", goType: reflect.TypeOf(bpfCTCfg{}),
		renamed: map[string]string{"TCPIgnoreInvalid": "tcp_ignore_invalid_rst"}},
	{c: "xfw_saddr6_ent", goType: reflect.TypeOf(saddr6Ent{})},
	{c: "xfw_saddr6_tab", goType: reflect.TypeOf(saddr6Tab{})},
	{c: "xfw_nat_ifaddr_val", goType: reflect.TypeOf(natIfAddr{}),
		renamed: map[string]string{"AnyHi": "any_hi", "AnyLo": "any_lo", "LLHi": "ll_hi", "LLLo": "ll_lo"}},
}

// loadLayoutBTF returns the BTF of bpf/layouts.c and of xfw.o.
func loadLayoutBTF(t *testing.T) (layouts, xfw *btf.Spec) {
	t.Helper()
	layouts, err := btf.LoadSpecFromReader(bytes.NewReader(layoutsObject))
	if err != nil {
		t.Fatalf("BTF of bpf/layouts.o: %v", err)
	}
	spec, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	return layouts, spec.Types
}

// TestLayoutMirrors checks every Go mirror of a struct of bpf/xfw_structs.h
// against the struct in the built objects' BTF, field by field: as many
// fields (padding aside), each at the same offset with the same size and
// shape (array lengths, nested mirrors), and the same total size; in
// layouts.o, which has every struct, and in xfw.o, where the programs use
// it.
func TestLayoutMirrors(t *testing.T) {
	layouts, xfw := loadLayoutBTF(t)
	for _, m := range layoutMirrors {
		t.Run(m.c, func(t *testing.T) {
			var s *btf.Struct
			if err := layouts.TypeByName(m.c, &s); err != nil {
				t.Fatalf("struct %s not in bpf/layouts.o's BTF (add it to bpf/layouts.c): %v", m.c, err)
			}
			for _, e := range mirrorMismatches(s, m) {
				t.Errorf("%s (layouts.o): %s", m.c, e)
			}
			var used *btf.Struct
			if xfw.TypeByName(m.c, &used) != nil {
				return // no program or map of xfw.o reaches it
			}
			for _, e := range mirrorMismatches(used, m) {
				t.Errorf("%s (xfw.o): %s", m.c, e)
			}
		})
	}
}

// TestLayoutMirrorsCatchMistakes checks that the comparison finds a field
// moved, resized, dropped or added.
func TestLayoutMirrorsCatchMistakes(t *testing.T) {
	layouts, _ := loadLayoutBTF(t)
	var entry *btf.Struct
	if err := layouts.TypeByName("xfw_entry", &entry); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		typ  any
	}{
		{"reordered", struct {
			Rule          uint32
			Flags, Action uint8
			Aux           uint16
			Next          uint32
		}{}},
		{"resized", struct {
			Rule   uint32
			Action uint8
			Flags  uint8
			Aux    uint32
			Next   uint32
		}{}},
		{"dropped", struct {
			Rule   uint32
			Action uint8
			Flags  uint8
			Aux    uint16
		}{}},
		{"added", struct {
			Rule   uint32
			Action uint8
			Flags  uint8
			Aux    uint16
			Next   uint32
			Extra  uint32
		}{}},
	} {
		if e := mirrorMismatches(entry, layoutMirror{c: "xfw_entry", goType: reflect.TypeOf(c.typ)}); len(e) == 0 {
			t.Errorf("%s field: no mismatch found", c.name)
		}
	}
}

// mirrorMismatches compares struct s with its Go mirror m.
func mirrorMismatches(s *btf.Struct, m layoutMirror) []string {
	var out []string
	if uint32(m.goType.Size()) != s.Size {
		out = append(out, fmt.Sprintf("%d bytes in C, %d in Go", s.Size, m.goType.Size()))
	}
	var fields []reflect.StructField
	for i := 0; i < m.goType.NumField(); i++ {
		f := m.goType.Field(i)
		if !slices.Contains(m.padding, f.Name) {
			fields = append(fields, f)
			continue
		}
		for _, cm := range s.Members {
			if overlaps(f, cm) {
				out = append(out, fmt.Sprintf("Go padding %s overlaps member %s", f.Name, cm.Name))
			}
		}
	}
	if len(fields) != len(s.Members) {
		out = append(out, fmt.Sprintf("%d members in C, %d fields in Go", len(s.Members), len(fields)))
	}
	for i := 0; i < len(fields) && i < len(s.Members); i++ {
		out = append(out, fieldMismatches(fields[i], s.Members[i], m)...)
	}
	return out
}

// fieldMismatches compares the i-th member of a struct with the Go field
// standing for it.
func fieldMismatches(f reflect.StructField, cm btf.Member, m layoutMirror) []string {
	var out []string
	want := normalName(f.Name)
	if r, ok := m.renamed[f.Name]; ok {
		want = normalName(r)
	}
	if normalName(cm.Name) != want {
		out = append(out, fmt.Sprintf("member %s faces Go field %s", cm.Name, f.Name))
	}
	if cm.BitfieldSize != 0 {
		out = append(out, fmt.Sprintf("member %s is a bit field", cm.Name))
	}
	if uintptr(cm.Offset.Bytes()) != f.Offset || cm.Offset%8 != 0 {
		out = append(out, fmt.Sprintf("%s at byte %d in C, %d in Go", cm.Name, cm.Offset.Bytes(), f.Offset))
	}
	size, err := btf.Sizeof(cm.Type)
	if err != nil {
		return append(out, fmt.Sprintf("%s: %v", cm.Name, err))
	}
	if uintptr(size) != f.Type.Size() {
		out = append(out, fmt.Sprintf("%s is %d bytes in C, %d in Go", cm.Name, size, f.Type.Size()))
	}
	if e := shapeMismatch(cm.Type, f.Type); e != "" {
		out = append(out, fmt.Sprintf("%s: %s", cm.Name, e))
	}
	return out
}

// shapeMismatch compares the shape of a member's type with its Go field's:
// array lengths, and a nested struct's Go type (its own mirror's).
func shapeMismatch(ct btf.Type, gt reflect.Type) string {
	ct = btf.UnderlyingType(ct)
	switch c := ct.(type) {
	case *btf.Array:
		if gt.Kind() != reflect.Array {
			return fmt.Sprintf("an array in C, a %s in Go", gt.Kind())
		}
		if int(c.Nelems) != gt.Len() {
			return fmt.Sprintf("%d elements in C, %d in Go", c.Nelems, gt.Len())
		}
		return shapeMismatch(c.Type, gt.Elem())
	case *btf.Struct:
		for _, m := range layoutMirrors {
			if m.c == c.Name {
				if m.goType != gt {
					return fmt.Sprintf("struct %s, whose mirror is %s, faces %s", c.Name, m.goType, gt)
				}
				return ""
			}
		}
		return fmt.Sprintf("struct %s has no mirror in layoutMirrors", c.Name)
	case *btf.Int:
		switch gt.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return ""
		}
		return fmt.Sprintf("an integer in C, a %s in Go", gt.Kind())
	}
	return ""
}

// overlaps reports whether Go field f shares bytes with member cm.
func overlaps(f reflect.StructField, cm btf.Member) bool {
	size, err := btf.Sizeof(cm.Type)
	if err != nil {
		return true
	}
	start, end := uintptr(cm.Offset.Bytes()), uintptr(cm.Offset.Bytes())+uintptr(size)
	return f.Offset < end && start < f.Offset+f.Type.Size()
}

// normalName is a field name lowercased, without underscores.
func normalName(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "_", ""))
}

// fpWhyValues mirrors enum xfw_fp_why: FastPathOutcomes' indexes.
func fpWhyValues() map[string]int64 {
	out := map[string]int64{"XFW_FP_NWHY": int64(len(FastPathOutcomes))}
	for i, c := range []string{"XFW_FP_TAKEN", "XFW_FP_NO_TARGET", "XFW_FP_NO_NEIGH", "XFW_FP_MTU",
		"XFW_FP_FRAG", "XFW_FP_NAT", "XFW_FP_HEADER", "XFW_FP_ROUTE", "XFW_FP_STACK", "XFW_FP_CSUM",
		"XFW_FP_NO_SOURCE"} {
		out[c] = int64(i)
	}
	return out
}

// enumMirror pairs a C enum with Go constants that mirror its members.
type enumMirror struct {
	c      string           // the C enum's name
	mirror string           // what mirrors it in Go
	values map[string]int64 // member → the Go constant's value
	// unmirrored names the members no Go constant stands for.
	unmirrored []string
}

// enumMirrors lists the enums of bpf/common.h user space mirrors.
func enumMirrors() []enumMirror {
	states := map[string]int64{"XFW_TCP_MAX": int64(len(conntrack.TCPStates))}
	for i, name := range conntrack.TCPStates {
		states["XFW_TCP_"+name] = int64(i)
	}
	rejects := map[string]int64{"XFW_RJ_COUNT": int64(len(compiler.RejectTypes))}
	for c, name := range map[string]string{
		"XFW_RJ_ICMP_NET_UNREACH": "icmp-net-unreachable", "XFW_RJ_ICMP_HOST_UNREACH": "icmp-host-unreachable",
		"XFW_RJ_ICMP_PROT_UNREACH": "icmp-proto-unreachable", "XFW_RJ_ICMP_PORT_UNREACH": "icmp-port-unreachable",
		"XFW_RJ_ICMP_NET_PROHIBITED": "icmp-net-prohibited", "XFW_RJ_ICMP_HOST_PROHIBITED": "icmp-host-prohibited",
		"XFW_RJ_ICMP_ADMIN_PROHIBITED": "icmp-admin-prohibited", "XFW_RJ_TCP_RESET": "tcp-reset",
		"XFW_RJ_ICMP6_NO_ROUTE": "icmp6-no-route", "XFW_RJ_ICMP6_ADM_PROHIBITED": "icmp6-adm-prohibited",
		"XFW_RJ_ICMP6_ADDR_UNREACH": "icmp6-addr-unreachable", "XFW_RJ_ICMP6_PORT_UNREACH": "icmp6-port-unreachable",
		"XFW_RJ_ICMP6_POLICY_FAIL": "icmp6-policy-fail", "XFW_RJ_ICMP6_REJECT_ROUTE": "icmp6-reject-route",
	} {
		v, ok := compiler.RejectTypes[name]
		if !ok {
			v = 0xffff // no such type in Go: reported as a mismatch
		}
		rejects[c] = int64(v)
	}
	return []enumMirror{
		{c: "xfw_chain", mirror: "compiler.Chain", values: map[string]int64{
			"XFW_CHAIN_INPUT": compiler.ChainInput, "XFW_CHAIN_FORWARD": compiler.ChainForward,
			"XFW_CHAIN_OUTPUT": compiler.ChainOutput, "XFW_NCHAINS": compiler.NumChains,
		}},
		{c: "xfw_field", mirror: "compiler.Field", values: map[string]int64{
			"XFW_F_SRC": int64(compiler.FieldSrc), "XFW_F_DST": int64(compiler.FieldDst),
			"XFW_F_PROTO": int64(compiler.FieldProto), "XFW_F_SPORT": int64(compiler.FieldSport),
			"XFW_F_DPORT": int64(compiler.FieldDport), "XFW_F_TCPFLAGS": int64(compiler.FieldTCPFlags),
			"XFW_F_ICMP": int64(compiler.FieldICMP), "XFW_F_IIF": int64(compiler.FieldIIF),
			"XFW_F_OIF": int64(compiler.FieldOIF), "XFW_F_FRAG": int64(compiler.FieldFrag),
			"XFW_F_LEN": int64(compiler.FieldLen), "XFW_F_TTL": int64(compiler.FieldTTL),
			"XFW_F_MAC": int64(compiler.FieldMAC), "XFW_F_SETS": int64(compiler.FieldSets),
			"XFW_F_CT": int64(compiler.FieldCt), "XFW_F_CTOSRC": int64(compiler.FieldCtOrigSrc),
			"XFW_F_CTODST": int64(compiler.FieldCtOrigDst), "XFW_F_CTOSPORT": int64(compiler.FieldCtOrigSport),
			"XFW_F_CTODPORT": int64(compiler.FieldCtOrigDport), "XFW_F_CTRSPORT": int64(compiler.FieldCtReplSport),
			"XFW_F_CTRDPORT": int64(compiler.FieldCtReplDport), "XFW_F_ADDRTYPE": int64(compiler.FieldAddrType),
			"XFW_F_PKTTYPE": int64(compiler.FieldPktType), "XFW_NFIELDS": int64(compiler.NumFields),
			"XFW_F_TOS": int64(compiler.FieldTOS), "XFW_F_TCPMSS": int64(compiler.FieldTCPMSS),
			"XFW_F_EXT6": int64(compiler.FieldExt6), "XFW_F_HDR4": int64(compiler.FieldHdr4),
			"XFW_F_PHYSIN": int64(compiler.FieldPhysIn), "XFW_F_PHYSOUT": int64(compiler.FieldPhysOut),
		}},
		{c: "xfw_hdr4", mirror: "compiler.Hdr4*", values: map[string]int64{
			"XFW_H4_SCTP": compiler.Hdr4KindSCTP, "XFW_H4_DCCP": compiler.Hdr4KindDCCP,
			"XFW_H4_ESP": compiler.Hdr4KindESP, "XFW_H4_AH": compiler.Hdr4KindAH,
			"XFW_H4_TCPOPT": compiler.Hdr4KindTCPOpt, "XFW_H4_HOT_SHIFT": compiler.Hdr4HotShift,
			"XFW_H4_SHORT_SCTP": compiler.Hdr4ShortSCTP, "XFW_H4_SHORT_DCCP": compiler.Hdr4ShortDCCP,
			"XFW_H4F_SPORTS": h4Sports, "XFW_H4F_DPORTS": h4Dports, "XFW_H4F_TYPES": h4Types,
			"XFW_H4F_OPTION": h4Option, "XFW_H4M_ANY": ir.SCTPChunkAny, "XFW_H4M_ALL": ir.SCTPChunkAll,
			"XFW_H4M_ONLY": ir.SCTPChunkOnly,
		}},
		{c: "xfw_addrtype", mirror: "compiler.AddrType*", values: map[string]int64{
			"XFW_AT_BITS": compiler.AddrTypeBits, "XFW_AT_DST_SHIFT": compiler.AddrTypeDstShift,
			"XFW_AT_RTN": compiler.AddrTypeRTN, "XFW_AT_VIA_IN": compiler.AddrTypeViaIn,
			"XFW_AT_VIA_OUT": compiler.AddrTypeViaOut, "XFW_AT_CLASS": compiler.AddrClassMask,
			"XFW_AT_CLASS_OTHER": compiler.AddrClassOther, "XFW_AT_CLASS_UNICAST": compiler.AddrClassUnicast,
			"XFW_AT_CLASS_MULTICAST": compiler.AddrClassMulticast, "XFW_AT_CLASS_ANY": compiler.AddrClassAny,
			"XFW_AT6_LOCAL": compiler.AddrType6Local, "XFW_AT6_ANYCAST": compiler.AddrType6Anycast,
		}},
		{c: "xfw_action", mirror: "compiler.Action", values: map[string]int64{
			"XFW_ACT_ACCEPT": int64(compiler.ActAccept), "XFW_ACT_DROP": int64(compiler.ActDrop),
			"XFW_ACT_REJECT": int64(compiler.ActReject), "XFW_ACT_CONTINUE": int64(compiler.ActContinue),
			"XFW_ACT_DNAT": int64(compiler.ActDNAT), "XFW_ACT_SNAT": int64(compiler.ActSNAT),
			"XFW_ACT_CALL": int64(compiler.ActCall), "XFW_ACT_RETURN": int64(compiler.ActReturn),
			"XFW_ACT_UNWIND": int64(compiler.ActUnwind), "XFW_ACT_EXIT": int64(compiler.ActExit),
			"XFW_ACT_REROUTE": int64(compiler.ActReroute),
		}},
		{c: "xfw_reject", mirror: "compiler.RejectTypes", values: rejects},
		{c: "xfw_stat", mirror: "statTrivial", values: map[string]int64{
			"XFW_STAT_TRIVIAL": statTrivial, "XFW_NSTATS": numStats,
			"XFW_STAT_FP": statFP,
		}, unmirrored: []string{"XFW_STAT_LOG_LOST", "XFW_STAT_LOOP_EXHAUSTED"}},
		{c: "xfw_fp_why", mirror: "FastPathOutcomes", values: fpWhyValues()},
		{c: "xfw_probe_kind", mirror: "compiler.ProbeKind", values: map[string]int64{
			"XFW_PROBE_LIMIT": int64(compiler.ProbeLimit), "XFW_NPROBE_KINDS": int64(compiler.NumProbeKinds),
			"XFW_PROBE_RECENT":    int64(compiler.ProbeRecent),
			"XFW_PROBE_HASHLIMIT": int64(compiler.ProbeHashLimit),
			"XFW_PROBE_PRED":      int64(compiler.ProbePred),
			"XFW_PROBE_CONNLIMIT": int64(compiler.ProbeConnlimit), "XFW_PROBE_CTEXPIRE": int64(compiler.ProbeCtExpire), "XFW_PROBE_CPU": int64(compiler.ProbeCPU),
			"XFW_PROBE_STATISTIC":   int64(compiler.ProbeStatistic),
			"XFW_PROBE_MARK":        int64(compiler.ProbeMark),
			"XFW_PROBE_SETMARK":     int64(compiler.ProbeSetMark),
			"XFW_PROBE_CONNMARK":    int64(compiler.ProbeConnmark),
			"XFW_PROBE_SETCONNMARK": int64(compiler.ProbeSetConnmark),
			"XFW_PROBE_OWNER":       int64(compiler.ProbeOwner),
			"XFW_PROBE_MANGLE":      int64(compiler.ProbeMangle),
			"XFW_PROBE_MARKMOVED":   int64(compiler.ProbeMarkMoved),
			"XFW_PROBE_NATRANGE":    int64(compiler.ProbeNatRange),
			"XFW_PROBE_CTNAT":       int64(compiler.ProbeCtNat),
			"XFW_PROBE_CTREPL":      int64(compiler.ProbeCtRepl),
			"XFW_PROBE_NATADDR6":    int64(compiler.ProbeNatAddr6),
			"XFW_PROBE_SETTARGET":   int64(compiler.ProbeSetTarget),
			"XFW_PROBE_SETMATCH":    int64(compiler.ProbeSetMatch),
		}},
		{c: "xfw_mangle_op", mirror: "compiler.Mangle*", values: map[string]int64{
			"XFW_MGOP_TOS": compiler.MangleTOS, "XFW_MGOP_TTL_SET": compiler.MangleTTLSet,
			"XFW_MGOP_TTL_INC": compiler.MangleTTLInc, "XFW_MGOP_TTL_DEC": compiler.MangleTTLDec,
			"XFW_MGOP_MSS": compiler.MangleMSS, "XFW_MGOP_CLAMP": compiler.MangleClamp,
			"XFW_MGOP_NOTRACK": compiler.MangleNotrack, "XFW_MGOP_MASK": compiler.MangleOpMask,
			"XFW_MGOP_PREDEC": compiler.ManglePreDec,
		}},
		{c: "xfw_settarget_arg", mirror: "compiler.SetTarget* and compiler.SetMatch*", values: map[string]int64{
			"XFW_SETT_DEL_SHIFT": compiler.SetTargetDelShift, "XFW_SETT_EXIST": compiler.SetTargetExist,
			"XFW_SETT_ADD_DST": compiler.SetTargetAddDst, "XFW_SETT_DEL_DST": compiler.SetTargetDelDst,
			"XFW_SETM_DST": compiler.SetMatchDst, "XFW_SETM_RETURN_NOMATCH": compiler.SetMatchReturnNomatch,
			"XFW_SETM_INVERT":   compiler.SetMatchInvert,
			"XFW_SETT_ADD_DST2": compiler.SetTargetAddDst2, "XFW_SETT_DEL_DST2": compiler.SetTargetDelDst2,
			"XFW_SETT_ADD_DIM2": compiler.SetTargetAddDim2, "XFW_SETT_DEL_DIM2": compiler.SetTargetDelDim2,
			"XFW_SETM_DST2": compiler.SetMatchDst2, "XFW_SETM_DIM2": compiler.SetMatchDim2,
		}},
		{c: "xfw_setw_meta", mirror: "dataplane setWrite*", values: map[string]int64{
			"XFW_SETW_META": setWriteMetaPort, "XFW_SETW_TIMEOUT": setWriteTimeout, "XFW_SETW_NET": setWriteNet, "XFW_SETW_PORT": setWritePort,
			"XFW_SETW_NDP": setWriteCountDP, "XFW_SETW_NCP": setWriteCountCP, "XFW_SETW_MDP": setWriteMarkDP,
		}},
		{c: "xfw_connmark_arg", mirror: "compiler.Connmark* and ir.Connmark*", values: map[string]int64{
			"XFW_CONNMARK_SET": int64(ir.ConnmarkSet), "XFW_CONNMARK_SAVE": int64(ir.ConnmarkSave),
			"XFW_CONNMARK_RESTORE": int64(ir.ConnmarkRestore), "XFW_CONNMARK_MODE": compiler.ConnmarkModeMask,
			"XFW_CONNMARK_SHIFT_RIGHT": compiler.ConnmarkShiftRight, "XFW_CONNMARK_SHIFT_BITS": compiler.ConnmarkShiftBits,
			"XFW_CONNMARK_SHIFT_POS": compiler.ConnmarkShiftPos,
		}},
		{c: "xfw_owner_bits", mirror: "ir.Owner* and compiler.OwnerInvertShift", values: map[string]int64{
			"XFW_OWNER_UID": int64(ir.OwnerUID), "XFW_OWNER_GID": int64(ir.OwnerGID),
			"XFW_OWNER_SOCKET": int64(ir.OwnerSocket), "XFW_OWNER_INV_SHIFT": compiler.OwnerInvertShift,
		}, unmirrored: []string{"XFW_OWNER_F_SOCKET", "XFW_OWNER_F_FILE"}},
		{c: "xfw_ctstat", mirror: "ctStat* (ctstats.go)", values: map[string]int64{
			"XFW_CTSTAT_INSERT": ctStatInsert, "XFW_CTSTAT_NEW_GONE": ctStatNewGone,
			"XFW_CTSTAT_PROMOTE": ctStatPromote, "XFW_CTSTAT_MAIN_GONE": ctStatMainGone,
			"XFW_CTSTAT_PROMOTE_FULL": ctStatPromoteFull, "XFW_CTSTAT_USER_NEW": ctStatUserNew,
			"XFW_CTSTAT_USER_MAIN": ctStatUserMain, "XFW_CTSTAT_LOCK_TIMEOUT": ctStatLockTimeout,
			"XFW_NCTSTATS": numCTStats,
		}},
		{c: "xfw_tcp_state", mirror: "conntrack.TCPStates", values: states,
			unmirrored: []string{"XFW_TCP_IGNORE", "XFW_TCP_RETRANS", "XFW_TCP_UNACK", "XFW_TCP_TIMEOUT_MAX"}},
		// The timeout slots of struct xfw_ct_cfg (ctcfg.go) start with
		// the TCP states'.
		{c: "xfw_tcp_state", mirror: "ctTCP timeout slots", values: map[string]int64{
			"XFW_TCP_SYN_SENT": ctTCPSynSent, "XFW_TCP_SYN_RECV": ctTCPSynRecv,
			"XFW_TCP_ESTABLISHED": ctTCPEstablished, "XFW_TCP_FIN_WAIT": ctTCPFinWait,
			"XFW_TCP_CLOSE_WAIT": ctTCPCloseWait, "XFW_TCP_LAST_ACK": ctTCPLastAck,
			"XFW_TCP_TIME_WAIT": ctTCPTimeWait, "XFW_TCP_CLOSE": ctTCPClose,
			"XFW_TCP_SYN_SENT2": ctTCPSynSent2, "XFW_TCP_RETRANS": ctTCPRetrans,
			"XFW_TCP_UNACK": ctTCPUnack, "XFW_TCP_TIMEOUT_MAX": ctUDPUnreplied,
		}, unmirrored: []string{"XFW_TCP_NONE", "XFW_TCP_MAX", "XFW_TCP_IGNORE"}},
	}
}

// TestEnumMirrors checks the Go constants that mirror the enums of
// bpf/common.h against the enums in bpf/layouts.o's BTF: every member
// mirrored (or listed as unmirrored), each with the Go constant's value.
func TestEnumMirrors(t *testing.T) {
	layouts, _ := loadLayoutBTF(t)
	for _, m := range enumMirrors() {
		t.Run(m.c+"/"+m.mirror, func(t *testing.T) {
			var e *btf.Enum
			if err := layouts.TypeByName(m.c, &e); err != nil {
				t.Fatalf("enum %s not in bpf/layouts.o's BTF (add it to bpf/layouts.c): %v", m.c, err)
			}
			seen := map[string]bool{}
			for _, v := range e.Values {
				seen[v.Name] = true
				want, ok := m.values[v.Name]
				switch {
				case ok && int64(v.Value) != want:
					t.Errorf("%s is %d in C, %d in Go", v.Name, v.Value, want)
				case !ok && !slices.Contains(m.unmirrored, v.Name):
					t.Errorf("%s (%d) has no Go mirror", v.Name, v.Value)
				}
			}
			for name := range m.values {
				if !seen[name] {
					t.Errorf("Go mirrors %s, which enum %s lacks", name, m.c)
				}
			}
		})
	}
}
