package ir

import "testing"

// TestMatchTagsDistinct checks that no two matches share a tag of the
// binary form (tags are defined in several files, each in a range of its
// own: codec.go lists them).
func TestMatchTagsDistinct(t *testing.T) {
	tags := map[string]int{
		"tagAH4":        tagAH4,
		"tagAH6":        tagAH6,
		"tagAddrType":   tagAddrType,
		"tagCPU":        tagCPU,
		"tagComment":    tagComment,
		"tagConnlimit":  tagConnlimit,
		"tagConntrack":  tagConntrack,
		"tagConnmark":   tagConnmark,
		"tagOwner":      tagOwner,
		"tagDevGroup":   tagDevGroup,
		"tagPhysdev":    tagPhysdev,
		"tagDCCP":       tagDCCP,
		"tagDSCP":       tagDSCP,
		"tagECN":        tagECN,
		"tagESP":        tagESP,
		"tagFrag":       tagFrag,
		"tagHashLimit":  tagHashLimit,
		"tagICMP":       tagICMP,
		"tagIPRange":    tagIPRange,
		"tagIPv6Header": tagIPv6Header,
		"tagLength":     tagLength,
		"tagLimit":      tagLimit,
		"tagMAC":        tagMAC,
		"tagMH":         tagMH,
		"tagMultiport":  tagMultiport,
		"tagOpts":       tagOpts,
		"tagPktType":    tagPktType,
		"tagRT":         tagRT,
		"tagRecent":     tagRecent,
		"tagSCTP":       tagSCTP,
		"tagSet":        tagSet,
		"tagString":     tagString,
		"tagTCP":        tagTCP,
		"tagTCPMSS":     tagTCPMSS,
		"tagTOS":        tagTOS,
		"tagTTL":        tagTTL,
		"tagTime":       tagTime,
		"tagU32":        tagU32,
		"tagUDP":        tagUDP,
		"tagStatistic":  tagStatistic,
		"tagMark":       tagMark,
	}
	seen := map[int]string{}
	for name, tag := range tags {
		if other, ok := seen[tag]; ok {
			t.Errorf("%s and %s share tag %d", name, other, tag)
		}
		seen[tag] = name
	}
}
