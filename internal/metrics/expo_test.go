package metrics

import (
	"strings"
	"testing"
)

// TestWriteFamilies checks the text format: HELP and TYPE lines before
// the samples, families and samples in the order given, labels in their
// order, escaping of label values and HELP texts, families without
// samples left out.
func TestWriteFamilies(t *testing.T) {
	tests := []struct {
		name string
		fams []*family
		want string
	}{
		{
			name: "no labels",
			fams: []*family{{name: "xfw_x", help: "An x.", typ: gauge, samples: []sample{{value: 3}}}},
			want: "# HELP xfw_x An x.\n# TYPE xfw_x gauge\nxfw_x 3\n",
		},
		{
			name: "labels in the order given, samples in the order given",
			fams: []*family{{name: "xfw_y_total", help: "Ys.", typ: counter, samples: []sample{
				{labels: []label{{"z", "1"}, {"a", "2"}}, value: 18446744073709551615},
				{labels: []label{{"z", "0"}, {"a", "9"}}, value: 0},
			}}},
			want: "# HELP xfw_y_total Ys.\n# TYPE xfw_y_total counter\n" +
				"xfw_y_total{z=\"1\",a=\"2\"} 18446744073709551615\nxfw_y_total{z=\"0\",a=\"9\"} 0\n",
		},
		{
			name: "label values escaped",
			fams: []*family{{name: "xfw_c", help: "C.", typ: gauge, samples: []sample{
				{labels: []label{{"comment", "say \"hi\"\\now\nthen"}}, value: 1},
			}}},
			want: "# HELP xfw_c C.\n# TYPE xfw_c gauge\nxfw_c{comment=\"say \\\"hi\\\"\\\\now\\nthen\"} 1\n",
		},
		{
			name: "invalid UTF-8 replaced",
			fams: []*family{{name: "xfw_c", help: "C.", typ: gauge, samples: []sample{
				{labels: []label{{"comment", "a\xffb"}}, value: 1},
			}}},
			want: "# HELP xfw_c C.\n# TYPE xfw_c gauge\nxfw_c{comment=\"a\uFFFDb\"} 1\n",
		},
		{
			name: "HELP escaped: backslash and line feed, not quotes",
			fams: []*family{{name: "xfw_h", help: "a \"b\" c\\d\ne", typ: gauge, samples: []sample{{value: 1}}}},
			want: "# HELP xfw_h a \"b\" c\\\\d\\ne\n# TYPE xfw_h gauge\nxfw_h 1\n",
		},
		{
			name: "families in the order given, empty ones left out",
			fams: []*family{
				{name: "xfw_b", help: "B.", typ: gauge, samples: []sample{{value: 2}}},
				{name: "xfw_empty", help: "Nothing.", typ: counter},
				{name: "xfw_a", help: "A.", typ: counter, samples: []sample{{value: 1}}},
			},
			want: "# HELP xfw_b B.\n# TYPE xfw_b gauge\nxfw_b 2\n# HELP xfw_a A.\n# TYPE xfw_a counter\nxfw_a 1\n",
		},
		{name: "nothing", fams: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeFamilies(&b, tt.fams); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}

// TestFamilyAdd pairs the label arguments in order.
func TestFamilyAdd(t *testing.T) {
	f := &family{}
	f.add(7, "a", "1", "b", "2")
	if got := f.samples; len(got) != 1 || got[0].value != 7 || len(got[0].labels) != 2 ||
		got[0].labels[0] != (label{"a", "1"}) || got[0].labels[1] != (label{"b", "2"}) {
		t.Errorf("add made %+v", got)
	}
}
