package podstest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Protocol is one protocol and codec a watch can be called with over raw
// HTTP, whose enveloped messages a test reads byte for byte.
type Protocol struct {
	Name        string
	ContentType string
	// JSON says the messages are protojson.
	JSON bool
	// Binary says the server writes the envelopes of a shared snapshot
	// itself (binary protobuf); JSON is encoded by connect alone, one
	// event at a time.
	Binary bool
}

// Protocols are the protocols and codecs of a watch: gRPC, gRPC-Web and
// Connect with binary protobuf, and Connect with JSON.
var Protocols = []Protocol{
	{Name: "grpc", ContentType: "application/grpc", Binary: true},
	{Name: "grpc-web", ContentType: "application/grpc-web+proto", Binary: true},
	{Name: "connect", ContentType: "application/connect+proto", Binary: true},
	{Name: "connect-json", ContentType: "application/connect+json", JSON: true},
}

// Marshal encodes m in the codec of p.
func (p Protocol) Marshal(m proto.Message) ([]byte, error) {
	if p.JSON {
		return protojson.Marshal(m)
	}
	return proto.Marshal(m)
}

// Unmarshal decodes the message of an envelope (with its 5-byte prefix)
// into m, in the codec of p.
func (p Protocol) Unmarshal(envelope []byte, m proto.Message) error {
	if p.JSON {
		return protojson.Unmarshal(envelope[5:], m)
	}
	return proto.Unmarshal(envelope[5:], m)
}

// OpenWatch posts req, enveloped, to url with protocol p and the field mask
// mask (none if empty), accepting gzip as connect-go's clients do, and
// returns the response, whose body is left to read.
func OpenWatch(ctx context.Context, c *http.Client, url string, req proto.Message, mask string, p Protocol) (*http.Response, error) {
	msg, err := p.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(Envelope(0, msg)))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", p.ContentType)
	hreq.Header.Set("Te", "trailers")
	hreq.Header.Set("Grpc-Accept-Encoding", "gzip")
	hreq.Header.Set("Connect-Accept-Encoding", "gzip")
	if mask != "" {
		hreq.Header.Set("X-Kubernetes-Fieldmask", mask)
	}
	resp, err := c.Do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != p.ContentType {
		resp.Body.Close()
		return nil, fmt.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp, nil
}

// Envelope wraps msg in a gRPC envelope: its flags byte and its length.
func Envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// ReadEnvelope reads one enveloped message, with its 5-byte prefix.
func ReadEnvelope(r io.Reader) ([]byte, error) {
	prefix := make([]byte, 5)
	if _, err := io.ReadFull(r, prefix); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(prefix[1:])
	if n > MaxMessageBytes {
		return nil, fmt.Errorf("message of %d bytes", n)
	}
	msg := make([]byte, 5+int(n))
	copy(msg, prefix)
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// ExpectEnd reads the rest of a watch and checks that it ends with the gRPC
// code code (named name in the Connect protocol) as protocol p says it. It
// returns the messages read before the end.
func ExpectEnd(resp *http.Response, p Protocol, code int, name string) ([][]byte, error) {
	var msgs [][]byte
	for {
		msg, err := ReadEnvelope(resp.Body)
		switch {
		case errors.Is(err, io.EOF) && p.Name == "grpc":
			if got := resp.Trailer.Get("Grpc-Status"); got != strconv.Itoa(code) {
				return msgs, fmt.Errorf("grpc-status %q, want %d (%s)", got, code, name)
			}
			return msgs, nil
		case err != nil:
			return msgs, fmt.Errorf("no end of stream: %w", err)
		case msg[0] == 0x80 && p.Name == "grpc-web":
			if !strings.Contains(strings.ToLower(string(msg[5:])), fmt.Sprintf("grpc-status: %d\r\n", code)) {
				return msgs, fmt.Errorf("trailers %q, want grpc-status %d (%s)", msg[5:], code, name)
			}
			return msgs, nil
		case msg[0] == 0x02 && strings.HasPrefix(p.Name, "connect"):
			if !strings.Contains(string(msg[5:]), fmt.Sprintf(`"code":%q`, name)) {
				return msgs, fmt.Errorf("end of stream %s, want code %s", msg[5:], name)
			}
			return msgs, nil
		case msg[0] != 0:
			return msgs, fmt.Errorf("message with flags %#x", msg[0])
		}
		msgs = append(msgs, msg)
	}
}
