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
	_, limited := startServer(t, server.Config{Limits: server.LimitsConfig{QPS: 0.001, Burst: 1}}, false, pods...)
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
		{"UnknownUID", []string{"get", "no-such-uid", "--socket", synced}, []string{`podsctl: get no-such-uid: NOT_FOUND: no pod with UID "no-such-uid"`, "hint: podsctl list -o wide shows the pods of this node with their UIDs"}},
		{"UnknownName", []string{"--socket", synced, "get", "shop/no-such-pod"}, []string{`podsctl: get shop/no-such-pod: pod not found: no pod named "no-such-pod" in namespace "shop"`, "hint: podsctl list -o wide"}},
		{"NameInOtherNamespace", []string{"get", "default/orders-api", "--socket", synced}, []string{`no pod named "orders-api" in namespace "default"`}},
		{"NameNotSynced", []string{"get", "shop/orders-api", "--socket", unsynced}, []string{"podsctl: get shop/orders-api: FAILED_PRECONDITION", "hint: the server has not synced yet"}},
		{"RateLimited", []string{"get", string(pods[0].UID), "--socket", limited}, []string{"RESOURCE_EXHAUSTED", "hint: rate limited, retry later"}},
		{"BadFieldMask", []string{"list", "--fields", "status.nope", "--socket", synced}, []string{"INVALID_ARGUMENT", "status.nope"}},
		{"MissingSocketKubeletWire", []string{"get", "x", "--wire", "kubelet", "--socket", missing}, []string{"UNAVAILABLE", "hint: is the server running?"}},
		{"KubeletUnknownUID", []string{"get", "no-such-uid", "--socket", kubelet}, []string{`podsctl: get no-such-uid: NOT_FOUND: pod "no-such-uid" not found`, "hint: podsctl list -o wide"}},
		{"KubeletUnknownName", []string{"get", "shop/no-such-pod", "--socket", kubelet}, []string{`podsctl: get shop/no-such-pod: pod not found: no pod named "no-such-pod" in namespace "shop"`, "hint: podsctl list -o wide"}},
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
		want []string // in stderr
	}{
		{"NoCommand", nil, []string{"Usage:\n  podsctl [flags]", "podsctl: no command"}},
		{"UnknownCommand", []string{"delete"}, []string{`unknown command "delete" for "podsctl"`, "See 'podsctl --help' for usage."}},
		{"UnknownFlag", []string{"list", "--bogus"}, []string{"podsctl: unknown flag: --bogus", "See 'podsctl list --help' for usage."}},
		{"UnknownFlagBefore", []string{"--bogus", "list"}, []string{"unknown flag: --bogus"}},
		{"SingleDashLongFlag", []string{"list", "-fields", "metadata.name"}, []string{"unknown shorthand flag: 'f' in -fields"}},
		{"MissingFlagValue", []string{"list", "--socket"}, []string{"flag needs an argument: --socket"}},
		{"BadOutput", []string{"list", "-o", "xml"}, []string{`unknown output format "xml"`, "See 'podsctl list --help' for usage."}},
		{"BadSelector", []string{"list", "-l", "a in (b"}, []string{"invalid --selector"}},
		{"GetWithoutPod", []string{"get"}, []string{"get takes one pod UID or NAMESPACE/NAME", "See 'podsctl get --help' for usage."}},
		{"GetTwoPods", []string{"get", "a", "b"}, []string{"get takes one pod UID or NAMESPACE/NAME"}},
		{"GetEmptyNamespace", []string{"get", "/web"}, []string{`invalid pod "/web": want a UID or NAMESPACE/NAME`}},
		{"GetEmptyName", []string{"get", "shop/"}, []string{`invalid pod "shop/"`}},
		{"GetTwoSlashes", []string{"get", "shop/web/x"}, []string{`invalid pod "shop/web/x"`}},
		{"ListArgument", []string{"list", "extra"}, []string{"list takes no arguments"}},
		{"WatchArgument", []string{"watch", "extra"}, []string{"watch takes no arguments"}},
		{"GetNamespace", []string{"get", "a", "-n", "x"}, []string{"unknown shorthand flag: 'n' in -n"}},
		{"BadSocket", []string{"list", "--socket", "tcp://127.0.0.1:1"}, []string{"unix:// URL"}},
		{"BadSocketBefore", []string{"--socket", "tcp://127.0.0.1:1", "watch"}, []string{"unix:// URL", "See 'podsctl watch --help' for usage."}},
		{"BadWire", []string{"list", "--wire", "grpc"}, []string{`invalid argument "grpc" for "--wire" flag: unknown wire "grpc": want auto, podsapi or kubelet`}},
		{"BadWireBefore", []string{"--wire=grpc", "get", "x"}, []string{`unknown wire "grpc"`}},
		{"CompletionWithoutShell", []string{"completion"}, []string{"completion needs a shell: bash, zsh, fish or powershell", "See 'podsctl completion --help'"}},
		{"CompletionUnknownShell", []string{"completion", "csh"}, []string{`unknown command "csh" for "podsctl completion"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tt.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 2 and nothing", code, stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

// TestHelp checks that help goes to stdout with exit 0 and shows the flags
// as --flags.
func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in stdout
	}{
		{"Root", []string{"--help"}, []string{"Usage:\n  podsctl [flags]\n  podsctl [command]", "list ", "get ", "watch ", "completion ", "--socket string", "--wire wire"}},
		{"RootShort", []string{"-h"}, []string{"Available Commands:"}},
		{"HelpCommand", []string{"help", "get"}, []string{"podsctl get (UID | NAMESPACE/NAME) [flags]"}},
		{"List", []string{"list", "-h"}, []string{"Usage:\n  podsctl list [flags]", "-o, --output string", "--fields string", "-n, --namespace string", "-l, --selector string", "Global Flags:", "--socket string"}},
		{"Get", []string{"get", "--help"}, []string{"podsctl get shop/orders-api", "--fields string"}},
		{"Watch", []string{"--socket", "/nowhere", "watch", "-h"}, []string{"Usage:\n  podsctl watch [flags]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tt.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout does not contain %q:\n%s", w, stdout)
				}
			}
			if strings.Contains(stdout, " -fields") || strings.Contains(stdout, " -socket") {
				t.Errorf("help shows a long flag with one dash:\n%s", stdout)
			}
		})
	}
}
