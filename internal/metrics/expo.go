package metrics

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// metricType is a metric family's TYPE.
type metricType string

const (
	counter metricType = "counter"
	gauge   metricType = "gauge"
)

// label is one name="value" pair of a sample.
type label struct{ name, value string }

// sample is one line of a family: its labels (in the order written) and
// its value. Every value xfw exports is a non-negative integer.
type sample struct {
	labels []label
	value  uint64
}

// family is a metric family: its name, HELP text, TYPE and samples (in the
// order written).
type family struct {
	name    string
	help    string
	typ     metricType
	samples []sample
}

// add appends a sample with labels given as name, value, name, value, ….
func (f *family) add(value uint64, nameValues ...string) {
	s := sample{value: value, labels: make([]label, 0, len(nameValues)/2)}
	for i := 0; i+1 < len(nameValues); i += 2 {
		s.labels = append(s.labels, label{nameValues[i], nameValues[i+1]})
	}
	f.samples = append(f.samples, s)
}

// writeFamilies writes fams in the text exposition format, in the order
// given; a family without samples is left out (as client libraries do).
func writeFamilies(w io.Writer, fams []*family) error {
	b := bufio.NewWriter(w)
	for _, f := range fams {
		if len(f.samples) == 0 {
			continue
		}
		b.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n")
		b.WriteString("# TYPE " + f.name + " " + string(f.typ) + "\n")
		for _, s := range f.samples {
			b.WriteString(f.name)
			if len(s.labels) > 0 {
				b.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l.name + `="` + escapeLabelValue(l.value) + `"`)
				}
				b.WriteByte('}')
			}
			b.WriteString(" " + strconv.FormatUint(s.value, 10) + "\n")
		}
	}
	return b.Flush()
}

// helpEscaper escapes a HELP text: backslash and line feed.
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// labelEscaper escapes a label value: backslash, double quote and line
// feed.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// escapeHelp escapes a HELP text; invalid UTF-8 becomes U+FFFD (the format
// is UTF-8).
func escapeHelp(s string) string {
	return helpEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD"))
}

// escapeLabelValue escapes a label value; invalid UTF-8 (a rule comment
// may hold any bytes) becomes U+FFFD.
func escapeLabelValue(s string) string {
	return labelEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD"))
}
