package kubelethttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// pollError is a failed poll, with the reason label it is counted under.
type pollError struct {
	reason string
	err    error
	hint   string // What to do about it, if known.
}

func (e *pollError) Error() string { return e.err.Error() }

func (e *pollError) Unwrap() error { return e.err }

func failed(reason string, format string, args ...any) *pollError {
	return &pollError{reason: reason, err: fmt.Errorf(format, args...)}
}

// fetch polls the kubelet once and returns its pods.
func (s *Source) fetch(ctx context.Context, client *http.Client) ([]corev1.Pod, *pollError) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, failed(reasonRequest, "make the request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if s.tokenFile != "" {
		token, perr := readToken(s.tokenFile)
		if perr != nil {
			return nil, perr
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, transportError(ctx, "GET "+s.url, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		reason := reasonStatus
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			reason = reasonUnauthorized
		}
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		perr := failed(reason, "GET %s: %s: %q", s.url, resp.Status, sanitize(snippet))
		if resp.StatusCode == http.StatusForbidden {
			perr.hint = forbiddenHint(snippet)
		}
		return nil, perr
	}
	body := &cappedReader{r: resp.Body, left: s.maxBody}
	pods, err := decodeStream(body)
	switch {
	case err == nil:
		return pods, nil
	case errors.Is(body.err, errBodyTooLarge):
		return nil, failed(reasonTooLarge, "the body of %s is larger than %d bytes", s.url, s.maxBody)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The body was cut short by the deadline.
		return nil, failed(reasonTimeout, "read the body of %s: timed out: %w", s.url, err)
	case body.err != nil && body.err != io.EOF:
		return nil, transportError(ctx, "read the body of "+s.url, body.err)
	default:
		return nil, failed(reasonDecode, "decode the pod list: %w", err)
	}
}

// subresources matches the subresources the kubelet checked, in the body
// of its 403: "Forbidden (user=U, verb=get, resource=nodes,
// subresource(s)=[pods proxy])".
var subresources = regexp.MustCompile(`subresource\(s\)=\[([a-z ]*)\]`)

// forbiddenHint tells, from the body of the kubelet's 403, which
// permission is missing. A kubelet with fine-grained authorization
// (KubeletFineGrainedAuthz, GA in Kubernetes 1.36) allows /pods to get
// nodes/pods or get nodes/proxy; one without it (older, or the gate off)
// knows only nodes/proxy, which also allows exec into every pod of the
// node.
func forbiddenHint(body []byte) string {
	m := subresources.FindSubmatch(body)
	if m == nil {
		return "the kubelet denies GET /pods: grant the server's identity get on nodes/pods (Kubernetes 1.36 and later) or nodes/proxy (older kubelets)"
	}
	checked := strings.Fields(string(m[1]))
	if slices.Contains(checked, "pods") {
		return "grant the server's identity get on nodes/pods (deploy/base's ClusterRole does)"
	}
	return "this kubelet authorizes /pods with nodes/proxy only (no fine-grained kubelet authorization: Kubernetes older than 1.36, " +
		"or the KubeletFineGrainedAuthz gate off): grant get on nodes/proxy (the component deploy/components/nodes-proxy), or upgrade the kubelet"
}

// readToken reads a bearer token file.
func readToken(path string) (string, *pollError) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", failed(reasonToken, "read the token file: %w", err)
	}
	token := string(bytes.TrimSpace(b))
	if token == "" {
		return "", failed(reasonToken, "the token file %s is empty", path)
	}
	return token, nil
}

// transportError classifies an error of the request or of the body.
func transportError(ctx context.Context, what string, err error) *pollError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return failed(reasonTimeout, "%s: timed out: %w", what, err)
	}
	return failed(reasonRequest, "%s: %w", what, err)
}

// sanitize makes a body snippet fit for a log line.
func sanitize(b []byte) string {
	s := strings.ToValidUTF8(string(b), string(utf8.RuneError))
	return strings.TrimSpace(s)
}
