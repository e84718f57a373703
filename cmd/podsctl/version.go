package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/podsapi/podsapi/internal/buildinfo"
)

// versionCommand returns podsctl version, which prints podsctl's version
// and the server's, as kubectl version does.
func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version [flags]",
		Short: "Print the versions of podsctl and of the server",
		Long: `Print the version of podsctl, then that of the server on the socket, which
podsapi-server sends in the X-Podsapi-Version header of every response (read
from a gRPC health check, which needs no permission and no rate-limit token).
A kubelet sends none: its version shows as "unknown".`,
		Example: `  podsctl version
  podsctl version --client`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: a.run(func(ctx context.Context, _ []string) error {
			return runVersion(ctx, &a.o, clientOnly, a.stdout)
		}),
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print podsctl's version only, without asking the server")
	return cmd
}

// runVersion runs podsctl version.
func runVersion(ctx context.Context, o *options, clientOnly bool, stdout io.Writer) error {
	fmt.Fprintf(stdout, "Client Version: %s\n", buildinfo.Get())
	if clientOnly {
		return nil
	}
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.ServerVersion(ctx)
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	if v == "" {
		v = "unknown (the server sends no version: a kubelet, or an older podsapi)"
	}
	fmt.Fprintf(stdout, "Server Version: %s\n", v)
	return nil
}
