package printer

import (
	"strings"
	"unicode/utf8"
)

// columnPadding is the space between two columns, as in kubectl.
const columnPadding = 3

// table aligns rows in columns. Column widths only grow, so that the rows
// of a watch, printed one at a time, stay aligned as well as they can.
type table struct {
	widths []int
}

// format returns rows as lines, padding each cell but the last of a row to
// its column's width.
func (t *table) format(rows ...[]string) string {
	for _, row := range rows {
		for i, cell := range row {
			if i == len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(cell)+columnPadding))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
