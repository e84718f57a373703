package kubelethttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
)

// errBodyTooLarge ends the read of a body beyond its cap.
var errBodyTooLarge = errors.New("the body is larger than its cap")

// cappedReader reads at most left bytes of r, then fails with
// errBodyTooLarge: it counts the bytes it is given, which are inflated
// already when the transport decompressed the body. err is the first error
// it returned, to tell the body's faults from those of its JSON.
type cappedReader struct {
	r    io.Reader
	left int64
	err  error
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left <= 0 {
		// One byte more tells a body at the cap from one over it.
		var b [1]byte
		n, err := io.ReadFull(c.r, b[:])
		switch {
		case n > 0:
			c.err = errBodyTooLarge
		case err == io.ErrUnexpectedEOF:
			c.err = io.EOF
		default:
			c.err = err
		}
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// decodeStream decodes a JSON v1 PodList from r as it arrives, ignoring
// unknown fields: it walks the list's tokens and decodes its items one pod
// at a time, so that what it holds is the pods decoded, never the whole
// body (a 200 MB body held 1.0 to 1.25 GB when it was read whole, then
// decoded). It fails with errBodyTooLarge when r does.
func decodeStream(r io.Reader) ([]corev1.Pod, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	var kind, apiVersion string
	var items []corev1.Pod
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("a key of the pod list is %v", t)
		}
		switch key {
		case "kind":
			err = dec.Decode(&kind)
		case "apiVersion":
			err = dec.Decode(&apiVersion)
		case "items":
			items, err = decodeItems(dec)
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the pod list")
		}
		return nil, err
	}
	if kind != "PodList" || apiVersion != "v1" {
		return nil, fmt.Errorf("got kind %q and apiVersion %q, want PodList and v1", kind, apiVersion)
	}
	return items, nil
}

// decodeItems decodes the array of pods dec is at; null is none.
func decodeItems(dec *json.Decoder) ([]corev1.Pod, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("got %v, want an array", t)
	}
	var items []corev1.Pod
	for dec.More() {
		items = append(items, corev1.Pod{})
		if err := dec.Decode(&items[len(items)-1]); err != nil {
			return nil, fmt.Errorf("item %d: %w", len(items)-1, err)
		}
	}
	_, err = dec.Token() // ']'
	return items, err
}

// skipValue reads past the value dec is at, token by token, holding none
// of it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// expectDelim reads the delimiter want.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("got %v, want %v", t, want)
	}
	return nil
}
