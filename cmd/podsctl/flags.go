package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/client/printer"
)

// socketEnv names the environment variable that sets the default socket.
const socketEnv = "PODSAPI_SOCKET"

// options are the flags of a command.
type options struct {
	socket    string
	fields    string
	output    string
	namespace string
	selector  string
	wire      client.Wire

	format   printer.Format
	labels   labels.Selector
	args     []string
	filtered bool // whether the command has --namespace and --selector
}

// parse parses the flags of command name, which may come before and after
// its positional arguments, and checks them. filter adds --namespace and
// --selector.
func parse(name, synopsis string, args []string, filter bool, stderr io.Writer) (*options, error) {
	o := &options{filtered: filter}
	fs := flag.NewFlagSet("podsctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	defSocket := os.Getenv(socketEnv)
	if defSocket == "" {
		defSocket = client.DefaultSocket
	}
	fs.StringVar(&o.socket, "socket", defSocket, "the Pods API socket: a path or unix:///path (env "+socketEnv+")")
	fs.Var(&o.wire, "wire", "the `service` the socket serves: auto (the default: detected with gRPC reflection),\npodsapi (kubelet.pods.v1alpha1.Pods) or kubelet (v1alpha1.Pods, a kubelet's own Pods API)")
	fs.StringVar(&o.fields, "fields", "", "comma-separated field mask, such as metadata.name,status.phase (default: whole pods)")
	fs.StringVar(&o.output, "o", "table", "output format: table, wide, json, yaml or name")
	fs.StringVar(&o.output, "output", "table", "same as -o")
	if filter {
		fs.StringVar(&o.namespace, "n", "", "only the pods of this namespace")
		fs.StringVar(&o.namespace, "namespace", "", "same as -n")
		fs.StringVar(&o.selector, "l", "", "only the pods matching this label selector, such as app=web,tier!=db")
		fs.StringVar(&o.selector, "selector", "", "same as -l")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: podsctl %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		o.args = append(o.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
	var err error
	if o.format, err = printer.ParseFormat(o.output); err != nil {
		return nil, usageError{err}
	}
	if o.labels, err = labels.Parse(o.selector); err != nil {
		return nil, usageError{fmt.Errorf("invalid --selector: %w", err)}
	}
	return o, nil
}

// mask returns the field mask option. When the mask leaves out the fields
// --namespace or --selector need, they are added.
func (o *options) mask() client.CallOption {
	if o.fields == "" {
		return client.WithFields()
	}
	var paths []string
	for p := range strings.SplitSeq(o.fields, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	if o.namespace != "" {
		paths = append(paths, "metadata.namespace")
	}
	if !o.labels.Empty() {
		paths = append(paths, "metadata.labels")
	}
	return client.WithFields(slices.Compact(slices.Sorted(slices.Values(paths)))...)
}

// dial returns a client of the socket, speaking --wire.
func (o *options) dial() (*client.Client, error) {
	c, err := client.New(o.socket, client.WithWire(o.wire))
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}
