package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/server"
)

func TestServerErrors(t *testing.T) {
	pods := testPods()
	_, synced := startServer(t, server.Config{}, false, pods...)
	_, unsynced := startServer(t, server.Config{}, true, pods...)
	_, limited := startServer(t, server.Config{QPS: 0.001, Burst: 1}, false, pods...)
	kubelet := startKubelet(t, pods...).Path()
	if _, stderr, code := run(t, "list", "--socket", limited); code != 0 { // uses the only token
		t.Fatal(stderr)
	}
	dir, err := os.MkdirTemp("", "podsctl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	missing := filepath.Join(dir, "missing.sock")

	tests := []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"MissingSocket", []string{"list", "--socket", missing}, []string{"UNAVAILABLE", "no such file or directory", "hint: is the server running? Choose its socket with --socket"}},
		{"MissingSocketWatch", []string{"watch", "--socket", missing}, []string{"UNAVAILABLE", "hint: is the server running?"}},
		{"NotSynced", []string{"list", "--socket", unsynced}, []string{"podsctl: list: FAILED_PRECONDITION: the pod sources have not synced yet", "hint: the server has not synced yet"}},
		{"NotSyncedWatch", []string{"watch", "--socket", unsynced}, []string{"FAILED_PRECONDITION", "hint: the server has not synced yet"}},
		{"UnknownUID", []string{"get", "no-such-uid", "--socket", synced}, []string{`podsctl: get no-such-uid: NOT_FOUND: no pod with UID "no-such-uid"`}},
		{"RateLimited", []string{"get", string(pods[0].UID), "--socket", limited}, []string{"RESOURCE_EXHAUSTED", "hint: rate limited, retry later"}},
		{"BadFieldMask", []string{"list", "--fields", "status.nope", "--socket", synced}, []string{"INVALID_ARGUMENT", "status.nope"}},
		{"MissingSocketKubeletWire", []string{"get", "x", "--wire", "kubelet", "--socket", missing}, []string{"UNAVAILABLE", "hint: is the server running?"}},
		{"KubeletUnknownUID", []string{"get", "no-such-uid", "--socket", kubelet}, []string{`podsctl: get no-such-uid: NOT_FOUND: pod "no-such-uid" not found`, "hint: list the pods"}},
		{"KubeletBadFieldMask", []string{"list", "--fields", "status.nope", "--socket", kubelet}, []string{"INVALID_ARGUMENT", "status.nope"}},
		{"KubeletBadFieldMaskWatch", []string{"watch", "--fields", "metadata.labels.app", "--socket", kubelet}, []string{"INVALID_ARGUMENT", "metadata.labels"}},
		{"PodsapiWireOnKubelet", []string{"list", "--wire", "podsapi", "--socket", kubelet}, []string{"UNIMPLEMENTED", "hint: the socket does not serve this API: try --wire auto"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tt.args...)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"NoCommand", nil, 2, "podsctl: no command"},
		{"UnknownCommand", []string{"delete"}, 2, `unknown command "delete"`},
		{"UnknownFlag", []string{"list", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"BadOutput", []string{"list", "-o", "xml"}, 2, `unknown output format "xml"`},
		{"BadSelector", []string{"list", "-l", "a in (b"}, 2, "invalid --selector"},
		{"GetWithoutUID", []string{"get"}, 2, "get takes one pod UID"},
		{"GetTwoUIDs", []string{"get", "a", "b"}, 2, "get takes one pod UID"},
		{"ListArgument", []string{"list", "extra"}, 2, "list takes no arguments"},
		{"GetNamespace", []string{"get", "a", "-n", "x"}, 2, "flag provided but not defined: -n"},
		{"BadSocket", []string{"list", "--socket", "tcp://127.0.0.1:1"}, 2, "unix:// URL"},
		{"BadWire", []string{"list", "--wire", "grpc"}, 2, `invalid value "grpc" for flag -wire: unknown wire "grpc": want auto, podsapi or kubelet`},
		{"Help", []string{"list", "-h"}, 0, "Usage: podsctl list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}
