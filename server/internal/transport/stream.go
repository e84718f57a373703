package transport

import "net/http"

// Stream is the response of a call whose procedure is one of
// Config.Streams: a watch. Connect flushes after every message it sends,
// which costs a write to the socket per event when a watcher has several
// events waiting; between Hold and Release the flushes are held back, so
// that the events that are ready together reach the socket with one flush.
// WriteRaw lets the watch write bytes it has enveloped itself (a shared
// snapshot) straight to the body, behind what connect has written: the
// transport does not look at them. Only the watch's handler goroutine uses
// a Stream, as connect's Send does.
type Stream struct {
	http.ResponseWriter
	rc      *http.ResponseController // flushes w, through any wrappers
	held    bool
	pending bool
}

func newStream(w http.ResponseWriter) *Stream {
	return &Stream{ResponseWriter: w, rc: http.NewResponseController(w)}
}

// maxWrite is the most bytes WriteRaw hands to the response at once, the
// largest frame of grpc-go clients. A write of a snapshot or a replay costs
// a round trip between the handler and net/http's goroutine of the
// connection, and a 2.4 MB snapshot took 600 of them in 4 KiB writes (the
// size of net/http's buffer for the body), each waiting its turn for the
// CPU on a busy node: under a herd of 1,000 watches another client's watch
// took 12 to 19 times as long as alone, and 4 to 6 times with these
// (`stress -only resume`). net/http keeps, for as long as a connection
// lives, a write buffer as large as the largest frame it wrote there: 16
// KiB more than with 4 KiB writes for each connection that received a
// snapshot, at most 4 MiB under the default --max-connections (256).
const maxWrite = 16 << 10

// WriteRaw writes b to the response body, in writes of at most maxWrite
// bytes. The flushes stay held as the watch asked.
func (s *Stream) WriteRaw(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), maxWrite)
		if _, err := s.ResponseWriter.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Flush flushes now, or at Release when flushes are held.
func (s *Stream) Flush() {
	if s.held {
		s.pending = true
		return
	}
	s.rc.Flush()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (s *Stream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Hold defers flushes until Release.
func (s *Stream) Hold() { s.held = true }

// Release ends a hold and flushes what it held back.
func (s *Stream) Release() {
	s.held = false
	if s.pending {
		s.pending = false
		s.Flush()
	}
}
