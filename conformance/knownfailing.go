package conformance

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ReadKnownFailing reads a known-failing file: one case ID a line, alone
// (Config.KnownFailing) or followed by the word "intermittent"
// (Config.KnownIntermittent); blank lines and # comments are ignored.
func ReadKnownFailing(path string) (failing, intermittent []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		switch fields := strings.Fields(line); {
		case len(fields) == 0:
		case len(fields) == 1:
			failing = append(failing, fields[0])
		case len(fields) == 2 && fields[1] == "intermittent":
			intermittent = append(intermittent, fields[0])
		default:
			return nil, nil, fmt.Errorf("%s:%d: want a case ID, optionally followed by \"intermittent\": %q", path, n, line)
		}
	}
	return failing, intermittent, sc.Err()
}
