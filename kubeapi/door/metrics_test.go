package door

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// flushFailer is a response writer whose flushes fail, as a stream's do
// once it is reset.
type flushFailer struct {
	http.ResponseWriter
	err error
}

func (w *flushFailer) FlushError() error { return w.err }

// The recorder records the final status, never an informational one, and
// passes the error of a flush to the watch that flushed.
func TestRecorder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codes []int
		want  int
	}{
		{name: "final only", codes: []int{http.StatusOK}, want: 200},
		{name: "early hints, then final", codes: []int{http.StatusEarlyHints, http.StatusTooManyRequests}, want: 429},
		{name: "continue, then final", codes: []int{http.StatusContinue, http.StatusCreated}, want: 201},
		{name: "switching protocols is final", codes: []int{http.StatusSwitchingProtocols}, want: 101},
		{name: "none written", want: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{ResponseWriter: httptest.NewRecorder()}
			for _, c := range tc.codes {
				rec.WriteHeader(c)
			}
			if got := rec.status(); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
	reset := errors.New("stream reset")
	rec := &recorder{ResponseWriter: &flushFailer{ResponseWriter: httptest.NewRecorder(), err: reset}}
	if err := http.NewResponseController(rec).Flush(); !errors.Is(err, reset) {
		t.Fatalf("a failed flush through the recorder: %v, want its error", err)
	}
}
