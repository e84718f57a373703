package conformance

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Intermittent is a case known to fail in some runs only, a race of the
// implementation's own, and the failure it is known for.
type Intermittent struct {
	// ID is the case's ID.
	ID string
	// Failure matches the message of the known failure. A failure of the
	// case whose message it does not match fails the run, so that a
	// listed race cannot hide another defect of the same case.
	Failure *regexp.Regexp
}

// ReadKnownFailing reads a known-failing file. Each line is a case ID
// alone (Config.KnownFailing), or a case ID, the word "intermittent" and a
// regular expression, the rest of the line, that matches the message of
// its known failure (Config.KnownIntermittent). Blank lines and # comments
// are ignored.
func ReadKnownFailing(path string) (failing []string, intermittent []Intermittent, err error) {
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
		id, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		word, pattern, _ := strings.Cut(strings.TrimSpace(rest), " ")
		pattern = strings.TrimSpace(pattern)
		switch {
		case id == "":
		case word == "":
			failing = append(failing, id)
		case word == "intermittent" && pattern != "":
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: the failure of %s: %w", path, n, id, err)
			}
			intermittent = append(intermittent, Intermittent{ID: id, Failure: re})
		default:
			return nil, nil, fmt.Errorf("%s:%d: want a case ID, or a case ID, \"intermittent\" and a regular expression matching its known failure: %q", path, n, line)
		}
	}
	return failing, intermittent, sc.Err()
}
