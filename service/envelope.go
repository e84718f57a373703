package service

import (
	"encoding/binary"
	"math"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// The envelopes of the watch streams, in one place: the shared snapshot of a
// watch is written as enveloped messages straight to the response body
// (Stream.WriteRaw), behind what connect has written, so the envelopes this
// file writes must be exactly connect's. Three rules make them so, and
// TestEnvelopesAreConnects pins all three against connect itself:
//   - an envelope is a flags byte, then the message's length as a
//     big-endian uint32 (gRPC, gRPC-Web and the Connect protocol's streams
//     alike), then the message as connect's binary codec marshals it;
//   - the flags are 0, which says not compressed: the Pods handlers never
//     compress a response (envelopeOptions), so connect's envelopes are
//     uncompressed too;
//   - only streams whose messages travel as binary protobuf
//     (binaryEnvelopes) are written so: JSON messages are encoded by connect
//     alone.

// envelopeLen is the length of the prefix of every message of a stream: a
// flags byte, then the message's length as a big-endian uint32.
const envelopeLen = 5

// envelopeOptions are the connect options the envelopes of this file rely
// on. Responses are never compressed: on a UNIX socket compression only
// costs CPU (a flate writer reset per message, per watcher), and connect-go
// clients ask for gzip by default. Compressed requests are still accepted.
func envelopeOptions() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithCompressMinBytes(math.MaxInt32)}
}

// binaryContentTypes are the content types of the streams whose messages
// connect encodes with its binary protobuf codec, in the envelopes of gRPC,
// gRPC-Web and the Connect protocol.
var binaryContentTypes = map[string]bool{
	"application/grpc":           true,
	"application/grpc+proto":     true,
	"application/grpc-web":       true,
	"application/grpc-web+proto": true,
	"application/connect+proto":  true,
}

// binaryEnvelopes reports whether the messages of the stream whose request
// has header h travel as binary protobuf, which the watch may envelope
// itself.
func binaryEnvelopes(h http.Header) bool {
	return binaryContentTypes[strings.ToLower(h.Get("Content-Type"))]
}

// appendEnvelope appends to b the envelope of the message appendMessage
// appends.
func appendEnvelope(b []byte, appendMessage func([]byte) ([]byte, error)) ([]byte, error) {
	at := len(b)
	b = append(b, make([]byte, envelopeLen)...)
	b, err := appendMessage(b)
	if err != nil {
		return nil, err
	}
	n := len(b) - at - envelopeLen
	if uint64(n) > math.MaxUint32 {
		return nil, errEncoding
	}
	binary.BigEndian.PutUint32(b[at+1:], uint32(n))
	return b, nil
}
