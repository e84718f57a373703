package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/client/printer"
	"github.com/podsapi/podsapi/fieldmask"
)

// socketEnv names the environment variable that sets the default socket.
const socketEnv = "PODSAPI_SOCKET"

// options are the flags of a command line.
type options struct {
	socket    string
	wire      client.Wire
	fields    string
	output    string
	namespace string
	allNS     bool
	selector  string
	fieldSel  string
	workload  string

	format printer.Format
	labels labels.Selector
}

// addGlobalFlags adds the flags of every command, which go before or after
// the command's name: --socket and --wire.
func (o *options) addGlobalFlags(cmd *cobra.Command) {
	defSocket := os.Getenv(socketEnv)
	if defSocket == "" {
		defSocket = client.DefaultSocket
	}
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.socket, "socket", defSocket, "the Pods API socket: a path or unix:///path (env "+socketEnv+")")
	fs.Var((*wireFlag)(&o.wire), "wire", "the service the socket serves: auto (detected with gRPC reflection),\npodsapi (kubelet.pods.v1alpha1.Pods) or kubelet (v1alpha1.Pods, a kubelet's own Pods API)")
	_ = cmd.RegisterFlagCompletionFunc("wire", cobra.FixedCompletions([]string{"auto", "podsapi", "kubelet"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkPersistentFlagFilename("socket", "sock")
}

// addOutputFlags adds --fields and --output.
func (o *options) addOutputFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.fields, "fields", "", "comma-separated field mask, such as metadata.name,status.phase (default: whole pods);\ntables also request the fields their columns are computed from")
	names := make([]string, len(printer.Formats))
	for i, f := range printer.Formats {
		names[i] = string(f)
	}
	fs.StringVarP(&o.output, "output", "o", "table", "output format: "+strings.Join(names, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(names, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("fields", completeFields)
}

// completeFields completes the last path of --fields with the fields of a
// pod (fieldmask.Complete), keeping the paths before it.
func completeFields(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	head, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		head, last = toComplete[:i+1], toComplete[i+1:]
	}
	var out []cobra.Completion
	for _, p := range fieldmask.Complete(strings.TrimSpace(last)) {
		out = append(out, head+p)
	}
	// No space after a path: the user may go on with "." or ",".
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// addFilterFlags adds --namespace, --selector and --field-selector.
func (o *options) addFilterFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&o.namespace, "namespace", "n", "", "only the pods of this namespace")
	fs.BoolVarP(&o.allNS, "all-namespaces", "A", false, "the pods of every namespace, as kubectl -A (the default without --namespace)")
	fs.StringVarP(&o.selector, "selector", "l", "", "only the pods matching this label selector,\nsuch as app.kubernetes.io/name=web or 'app.kubernetes.io/name in (web, redis),app.kubernetes.io/component!=cache'")
	fs.StringVar(&o.fieldSel, "field-selector", "", "only the pods matching this field selector, such as status.phase=Running,spec.restartPolicy!=Never;\nfields: "+strings.Join(client.SelectableFields, ", "))
	fs.StringVar(&o.workload, "workload", "", "only the pods of this workload, KIND or KIND/NAME, such as Deployment/web or DaemonSet\n(podsapi only: the server resolves workloads, docs/api.md)")
	_ = cmd.RegisterFlagCompletionFunc("namespace", o.completeNamespaces)
	_ = cmd.RegisterFlagCompletionFunc("workload", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("selector", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("field-selector", cobra.NoFileCompletions)
}

// selectors returns the options of --namespace, --selector and
// --field-selector: the server filters when it can, the client otherwise.
func (o *options) selectors() []client.CallOption {
	opts := []client.CallOption{client.WithNamespace(o.namespace), client.WithLabelSelector(o.selector), client.WithFieldSelector(o.fieldSel)}
	if o.workload != "" {
		kind, name, _ := strings.Cut(o.workload, "/")
		opts = append(opts, client.WithWorkloadSelector(kind, name))
	}
	return opts
}

// wideWorkloads reports whether the table has a WORKLOAD column: -o wide.
func (o *options) wideWorkloads() bool { return o.format == printer.Wide }

// complete checks the flags and computes what they imply.
func (o *options) complete() error {
	var err error
	if o.allNS && o.namespace != "" {
		return usageError{error: fmt.Errorf("--all-namespaces (-A) and --namespace %s exclude each other", o.namespace)}
	}
	if o.format, err = printer.ParseFormat(o.output); err != nil {
		return usageError{error: err}
	}
	if o.labels, err = labels.Parse(o.selector); err != nil {
		return usageError{error: fmt.Errorf("invalid --selector: %w", err)}
	}
	if _, err = fields.ParseSelector(o.fieldSel); err != nil {
		return usageError{error: fmt.Errorf("invalid --field-selector: %w", err)}
	}
	if kind, name, _ := strings.Cut(o.workload, "/"); o.workload != "" && (kind == "" || strings.Contains(name, "/")) {
		return usageError{error: fmt.Errorf("invalid --workload %q: want KIND or KIND/NAME, such as Deployment/web", o.workload)}
	}
	return nil
}

// newPrinter returns the printer of --output to w. With --fields, JSON and
// YAML print only the fields the mask kept, as the server sent them.
func (o *options) newPrinter(w io.Writer) *printer.Printer {
	opts := []printer.Option{printer.WithNow(now), printer.WithFields(o.jsonPaths()...)}
	if o.wideWorkloads() {
		opts = append(opts, printer.WithWorkloads())
	}
	return printer.New(w, o.format, opts...)
}

// jsonPaths returns the paths of --fields in the JSON shape of a pod, with
// the pod's identity that the client adds to every mask, or nil for whole
// pods (also when --fields does not parse: the server then refuses the
// call, saying why, before anything is printed).
func (o *options) jsonPaths() []string {
	paths := o.paths()
	if len(paths) == 0 {
		return nil
	}
	m, err := fieldmask.Parse(append(paths, "metadata.namespace", "metadata.name", "metadata.uid")...)
	if err != nil {
		return nil
	}
	return m.JSONPaths()
}

// paths returns the paths of --fields.
func (o *options) paths() []string {
	var paths []string
	for p := range strings.SplitSeq(o.fields, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// mask returns the field mask option. --fields is sent together with what
// podsctl itself reads: the fields the output format prints from (so that a
// table shows what the pods say, never a blank or a guess). Selectors see
// whole pods whatever the mask.
func (o *options) mask() client.CallOption {
	paths := o.paths()
	if len(paths) == 0 {
		return client.WithFields()
	}
	paths = append(paths, printer.Fields(o.format)...)
	return client.WithFields(slices.Compact(slices.Sorted(slices.Values(paths)))...)
}

// dial returns a client of the socket, speaking --wire.
func (o *options) dial() (*client.Client, error) {
	c, err := client.New(o.socket, client.WithWire(o.wire))
	if err != nil {
		return nil, usageError{error: err}
	}
	return c, nil
}

// wireFlag is a client.Wire as a command-line flag.
type wireFlag client.Wire

// String returns the name of the wire.
func (w *wireFlag) String() string { return client.Wire(*w).String() }

// Set sets the wire named s.
func (w *wireFlag) Set(s string) error { return (*client.Wire)(w).Set(s) }

// Type returns the name of the flag's value in help.
func (w *wireFlag) Type() string { return "wire" }
