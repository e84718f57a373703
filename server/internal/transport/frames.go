package transport

import (
	"errors"
	"time"

	"golang.org/x/time/rate"
)

// Limits of frameGuard, far above what a client does: Go and grpc-go send
// a header block in 16 KiB frames (the headers are limited to 64 KiB), and
// cancel calls one by one.
const (
	// maxContinuations is the number of CONTINUATION frames a header block
	// may have.
	maxContinuations = 32
	// resetRate and resetBurst bound the RST_STREAM frames of a connection.
	resetRate  = 100
	resetBurst = 1000
)

// errFrameFlood is returned by the reads of a connection closed by its
// frameGuard.
var errFrameFlood = errors.New("connection closed: HTTP/2 frame flood")

// http2Preface starts every HTTP/2 connection.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// frameGuard follows the HTTP/2 frames a client sends, as they are read
// from its connection, and reports the floods net/http lets through:
//   - a header block of more than maxContinuations CONTINUATION frames (net/http
//     bounds the size of headers, not the number of frames: empty
//     CONTINUATION frames are accepted without end);
//   - RST_STREAM frames beyond resetRate a second (burst resetBurst): a
//     Rapid Reset flood, which net/http only stops when its handlers fall
//     behind, not when they keep up.
//
// It reads frame headers only (9 bytes a frame) and skips the payloads; a
// connection that does not start with the HTTP/2 preface (HTTP/1.1) is not
// followed.
type frameGuard struct {
	off     int  // bytes of the preface seen; len(http2Preface) once past it
	notH2   bool // the connection did not start with the preface
	hdr     [9]byte
	nhdr    int
	skip    int // payload bytes of the current frame still to come
	cont    int // CONTINUATION frames of the current header block
	resets  *rate.Limiter
	verdict string // why the connection is a flood, once it is
}

func newFrameGuard() *frameGuard {
	return &frameGuard{resets: rate.NewLimiter(resetRate, resetBurst)}
}

// feed follows the bytes p read from the connection, and returns why the
// connection must be closed ("continuation" or "rapid_reset"), or "".
func (g *frameGuard) feed(p []byte) string {
	for len(p) > 0 && g.verdict == "" && !g.notH2 {
		if g.off < len(http2Preface) {
			if p[0] != http2Preface[g.off] {
				g.notH2 = true // HTTP/1.1: nothing to follow
				return ""
			}
			g.off++
			p = p[1:]
			continue
		}
		if g.skip > 0 {
			k := min(g.skip, len(p))
			g.skip -= k
			p = p[k:]
			continue
		}
		k := copy(g.hdr[g.nhdr:], p)
		g.nhdr += k
		p = p[k:]
		if g.nhdr < len(g.hdr) {
			continue
		}
		g.nhdr = 0
		g.skip = int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
		g.frame(g.hdr[3])
	}
	return g.verdict
}

// HTTP/2 frame types.
const (
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameContinuation = 0x9
)

// frame accounts for one frame of type typ.
func (g *frameGuard) frame(typ byte) {
	switch typ {
	case frameContinuation:
		if g.cont++; g.cont > maxContinuations {
			g.verdict = "continuation"
		}
	case frameRSTStream:
		if !g.resets.AllowN(time.Now(), 1) {
			g.verdict = "rapid_reset"
		}
		g.cont = 0
	default:
		g.cont = 0
	}
}
