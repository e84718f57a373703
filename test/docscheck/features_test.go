package docscheck

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/conformance"
)

// TestFeaturesDocumented checks that docs/conformance.md lists every key
// of the features file with its default, as DefaultFeatures has it.
func TestFeaturesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // key: default cell
	for l := range strings.Lines(string(doc)) {
		cells := strings.Split(strings.TrimSpace(l), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	d := reflect.ValueOf(conformance.DefaultFeatures())
	for i := range d.NumField() {
		key := strings.Split(d.Type().Field(i).Tag.Get("json"), ",")[0]
		b, err := json.Marshal(d.Field(i).Interface())
		if err != nil {
			t.Fatal(err)
		}
		got, ok := rows[key]
		switch {
		case !ok:
			t.Errorf("docs/conformance.md: no row for the features key %q (default %s)", key, b)
		case got != string(b):
			t.Errorf("docs/conformance.md: %q defaults to %s, the table says %s", key, b, got)
		}
	}
}
