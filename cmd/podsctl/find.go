package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/client/printer"
)

// findFlags are the flags of podsctl find.
type findFlags struct {
	pid       int32
	container string
	ip        string
	cgroup    string
	self      bool
	deleted   bool
	wait      time.Duration
}

// key returns the one key the flags of cmd set.
func (f *findFlags) key(cmd *cobra.Command) (client.FindKey, error) {
	var keys []client.FindKey
	var names []string
	for _, k := range []struct {
		name string
		key  func() (client.FindKey, error)
	}{
		{"pid", func() (client.FindKey, error) { return client.ByPID(f.pid), nil }},
		{"container", func() (client.FindKey, error) { return client.ByContainerID(f.container), nil }},
		{"ip", func() (client.FindKey, error) {
			ip, err := netip.ParseAddr(f.ip)
			if err != nil {
				return client.FindKey{}, fmt.Errorf("invalid --ip: %w", err)
			}
			return client.ByIP(ip), nil
		}},
		{"cgroup", func() (client.FindKey, error) { return client.ByCgroup(f.cgroup), nil }},
		{"self", func() (client.FindKey, error) { return client.ByCaller(), nil }},
	} {
		if !cmd.Flags().Changed(k.name) {
			continue
		}
		key, err := k.key()
		if err != nil {
			return client.FindKey{}, err
		}
		keys, names = append(keys, key), append(names, "--"+k.name)
	}
	if len(keys) != 1 {
		return client.FindKey{}, fmt.Errorf("find takes one of --pid, --container, --ip, --cgroup or --self, got %d %q", len(keys), names)
	}
	return keys[0], nil
}

func (a *app) findCommand() *cobra.Command {
	var f findFlags
	cmd := &cobra.Command{
		Use:   "find (--pid PID | --container ID | --ip IP | --cgroup PATH | --self) [--deleted] [--wait DURATION] [flags]",
		Short: "Find the pod of a process, container, IP or cgroup",
		Long: `Find the pods of a process (by PID, in the server's PID namespace), of a
container (by ID, with or without its runtime://, or by a prefix of at least
12 digits), of an IP, of a cgroup (a line of /proc/PID/cgroup, or its path), or
of podsctl itself (--self), from the server's index: the table of podsctl list
with the CONTAINER the key names. The pods of the host network share the
node's IP: an IP of the node finds all of them. --deleted also finds the pods
deleted within the server's --deleted-pod-retention, marked "(deleted)".
--wait waits, when the key matches no pod yet, until it does, at most that
long (the server cuts it to its --max-find-wait): podsctl answers the moment
the server learns of the container, and fails as without --wait when the
wait runs out.`,
		Example: `  # The pod and container of process 4242
  podsctl find --pid 4242

  # The pod of a container, by the short ID crictl ps prints
  podsctl find --container 3f1e9b0c2d3a

  # The pods with an IP, including those deleted a moment ago
  podsctl find --ip 10.244.1.7 --deleted

  # The pod of a cgroup an eBPF program saw
  podsctl find --cgroup 0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f6c9c5e_1b7a_4d0e_9a8f_2c3b4d5e6f70.slice/cri-containerd-3f1e9b0c2d3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c.scope

  # The pod of a container that is starting, once the server knows it
  podsctl find --container 3f1e9b0c2d3a --wait 5s

  # The pod podsctl runs in, as YAML
  podsctl find --self -o yaml`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.RunE = a.run(func(ctx context.Context, _ []string) error {
		key, err := f.key(cmd)
		if err != nil {
			return usageError{error: err}
		}
		return runFind(ctx, &a.o, key, f.deleted, f.wait, a.stdout)
	})
	fs := cmd.Flags()
	fs.Int32Var(&f.pid, "pid", 0, "a process ID, in the PID namespace of the server's --host-proc")
	fs.StringVar(&f.container, "container", "", "a container ID, with or without runtime://, or a unique prefix of at least 12 digits")
	fs.StringVar(&f.ip, "ip", "", "an IP of status.podIPs")
	fs.StringVar(&f.cgroup, "cgroup", "", "a cgroup: a line of /proc/PID/cgroup, or its path")
	fs.BoolVar(&f.self, "self", false, "the pod podsctl itself runs in")
	fs.BoolVar(&f.deleted, "deleted", false, "also the pods deleted within the server's --deleted-pod-retention")
	fs.DurationVar(&f.wait, "wait", 0, "when the key matches no pod yet, wait at most this long for it to match (the server cuts it to its --max-find-wait); 0: answer at once")
	a.o.addOutputFlags(cmd)
	return cmd
}

// runFind runs podsctl find.
func runFind(ctx context.Context, o *options, key client.FindKey, deleted bool, wait time.Duration, stdout io.Writer) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	opts := []client.CallOption{o.mask()}
	if deleted {
		opts = append(opts, client.WithDeleted())
	}
	if wait > 0 {
		opts = append(opts, client.WithWait(wait))
	}
	ms, _, err := c.FindPods(ctx, key, opts...)
	if err != nil {
		return fmt.Errorf("find: %w", err)
	}
	return printer.New(stdout, o.format, printer.WithNow(now)).PrintMatches(ms)
}
