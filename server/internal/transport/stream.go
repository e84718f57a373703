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

// maxWrite is the most bytes WriteRaw hands to the response at once: the size
// of net/http's buffer for the body of an HTTP/2 response. A larger write
// bypasses that buffer and goes out in DATA frames as large as the client
// allows (16 KiB for grpc-go), and net/http's framer keeps a write buffer as
// large as the largest frame it wrote for as long as the connection lives:
// 21 KiB of heap for every idle watcher that received a snapshot, against
// 5 KiB with frames of this size (1000 idle watchers, `bench --only idle`).
const maxWrite = 4 << 10

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
