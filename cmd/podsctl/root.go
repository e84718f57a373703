package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/internal/buildinfo"
)

// app is one run of podsctl.
type app struct {
	stdout, stderr io.Writer
	o              options
	ran            bool // whether a command's RunE was reached
}

// command returns podsctl's command tree. Its examples use the pods of
// examples/manifests, which make run serves.
func (a *app) command() *cobra.Command {
	root := &cobra.Command{
		Use:   "podsctl",
		Short: "Read the pods of this node from the Kubelet Pods API",
		Long: `podsctl reads the pods of this node from the Kubelet Pods API: podsapi's
(kubelet.pods.v1alpha1.Pods), or the kubelet's own (v1alpha1.Pods), which
--wire chooses; by default podsctl detects which one the socket serves.`,
		Example: `  podsctl list
  podsctl --socket /tmp/pods.sock list -n shop -o wide
  podsctl get shop/orders-api -o yaml
  podsctl watch -l app.kubernetes.io/name=web
  source <(podsctl completion bash)`,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(a.stderr, cmd.UsageString())
			return usageError{error: errors.New("no command")}
		},
	}
	// Before InitDefaultCompletionCmd, which keeps the output it finds.
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	a.o.addGlobalFlags(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{error: err} })
	root.AddCommand(a.listCommand(), a.getCommand(), a.watchCommand(), a.findCommand(), a.versionCommand(), a.kubeconfigCommand())
	root.Version = buildinfo.Get()
	root.SetVersionTemplate("podsctl {{.Version}}\n")
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		// cobra's completion command prints its help, with exit 0, when
		// the shell is missing or unknown: that is a usage error.
		comp.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{error: errors.New("completion needs a shell: bash, zsh, fish or powershell")}
			}
			return usageError{error: fmt.Errorf("unknown shell %q: want bash, zsh, fish or powershell", args[0])}
		}
	}
	return root
}

// run returns the RunE of a command that runs f once the flags are checked.
func (a *app) run(f func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.ran = true
		if err := a.o.complete(); err != nil {
			return err
		}
		return f(cmd.Context(), args)
	}
}

// noArgs rejects positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{error: fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), args)}
	}
	return nil
}

func (a *app) listCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [flags]",
		Short: "List the pods",
		Long: `List the pods of this node, sorted by namespace and name, as a kubectl-like
table (NAMESPACE, NAME, READY, STATUS, RESTARTS, AGE; -o wide adds IP, NODE
and UID), as a Kubernetes List in JSON or YAML, or as pod/NAME lines.`,
		Example: `  # Every pod of the node
  podsctl list

  # The pods of namespace shop, with their IPs, nodes and UIDs
  podsctl list -n shop -o wide

  # The pods labelled app.kubernetes.io/name=web, by name
  podsctl list -l app.kubernetes.io/name=web -o name

  # The pods of the node that are not running
  podsctl list --field-selector status.phase!=Running

  # Only the name and phase of each pod, as YAML
  podsctl list --fields metadata.name,status.phase -o yaml`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              a.run(func(ctx context.Context, _ []string) error { return runList(ctx, &a.o, a.stdout, a.stderr) }),
	}
	a.o.addOutputFlags(cmd)
	a.o.addFilterFlags(cmd)
	return cmd
}

func (a *app) getCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get (UID | NAMESPACE/NAME) [flags]",
		Short: "Print one pod by its UID or NAMESPACE/NAME",
		Long: `Print one pod, named by its UID or by NAMESPACE/NAME. podsctl list -o wide
shows both.`,
		Example: `  # The pod orders-api of namespace shop
  podsctl get shop/orders-api

  # The same pod, by its UID, as YAML
  podsctl get 00000000-0000-4000-8000-00000000c001 -o yaml

  # The IPs and container readiness of a pod, as JSON
  podsctl get shop/web-7d9f8b6c5d-x2k4q --fields status.podIPs,status.containerStatuses.ready -o json`,
		Args:              podArg,
		ValidArgsFunction: a.completePods,
		RunE: a.run(func(ctx context.Context, args []string) error {
			return runGet(ctx, &a.o, args[0], a.stdout)
		}),
	}
	a.o.addOutputFlags(cmd)
	return cmd
}

func (a *app) watchCommand() *cobra.Command {
	var wo watchOptions
	cmd := &cobra.Command{
		Use:   "watch [flags]",
		Short: "Print the pods, then every change",
		Long: `Print the pods of this node, then every change until interrupted: table rows
prefixed with the event (ADDED, MODIFIED, DELETED, and SYNCED after the
initial pods), {type, object} documents in JSON or YAML, or "TYPE pod/NAME"
lines. A pod that starts or stops matching --namespace, --selector or
--field-selector is ADDED or DELETED, as with kubectl get --watch.

The watch outlives the server: when it ends after SYNCED (a restart or a
rollout of the server, a watch dropped for falling behind), podsctl says so
on stderr and watches again with backoff (200ms doubling to 30s), resuming
from the last revision it was sent, so that it prints only what changed
meanwhile; when the server cannot resume (it restarted, or it is a kubelet)
podsctl reads a new snapshot and prints the differences from what it showed
(DELETED, MODIFIED, ADDED), never a pod twice. --once ends at the first
error instead (exit 1). Errors before SYNCED, and those that watching again
cannot mend (an invalid selector or field mask, a denied user), end it
either way.`,
		Example: `  # Every change of every pod
  podsctl watch

  # The web pods, by name
  podsctl watch -l app.kubernetes.io/name=web -o name

  # The pods of namespace shop, as JSON documents
  podsctl watch -n shop -o json

  # Until the server goes away, as before podsctl watched again
  podsctl watch --once`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: a.run(func(ctx context.Context, _ []string) error {
			return runWatch(ctx, &a.o, wo, a.stdout, a.stderr)
		}),
	}
	a.o.addOutputFlags(cmd)
	a.o.addFilterFlags(cmd)
	cmd.Flags().BoolVar(&wo.once, "once", false, "end at the first error (the server restarting, the watch dropped) instead of watching again")
	return cmd
}

// podArg accepts one UID or NAMESPACE/NAME.
func podArg(_ *cobra.Command, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return usageError{error: fmt.Errorf("get takes one pod UID or NAMESPACE/NAME, got %q", args)}
	}
	if _, _, err := parsePodRef(args[0]); err != nil {
		return usageError{error: err}
	}
	return nil
}

// completionTimeout bounds the List a shell completion makes.
const completionTimeout = 5 * time.Second

// completionPods lists the identity of the node's pods for a completion,
// within completionTimeout.
func (o *options) completionPods(cmd *cobra.Command) ([]*corev1.Pod, error) {
	c, err := o.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	return c.List(ctx, client.WithFields(identityFields...))
}

// completeNamespaces completes --namespace with the namespaces of the
// node's pods.
func (o *options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	pods, err := o.completionPods(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, p := range pods { // sorted by namespace
		if strings.HasPrefix(p.Namespace, toComplete) && !slices.Contains(out, p.Namespace) {
			out = append(out, p.Namespace)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completePods completes get's argument with the NAMESPACE/NAME of the
// node's pods, described by their UIDs.
func (a *app) completePods(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	pods, err := a.o.completionPods(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, p := range pods {
		if ref := p.Namespace + "/" + p.Name; strings.HasPrefix(ref, toComplete) {
			out = append(out, cobra.CompletionWithDesc(ref, string(p.UID)))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
