package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// exampleServer serves pods on a temporary socket for an example. It returns
// the socket, the store to change, and a function that stops the server.
func exampleServer(pods ...*corev1.Pod) (string, *store.Store, func()) {
	dir, err := os.MkdirTemp("", "podsapi")
	if err != nil {
		panic(err)
	}
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	socket := filepath.Join(dir, "pods.sock")
	srv, err := server.New(st, server.Config{Socket: socket, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	return socket, st, func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
}

func ExampleClient_List() {
	socket, _, stop := exampleServer(podstest.Pod("default", "web-1", 1), podstest.Pod("kube-system", "dns-0", 2))
	defer stop()

	c, err := client.New(socket)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	pods, err := c.List(context.Background(), client.WithFields("metadata.namespace", "metadata.name", "status.phase", "status.podIPs"))
	if err != nil {
		panic(err)
	}
	for _, p := range pods {
		fmt.Println(p.Namespace, p.Name, p.Status.Phase, p.Status.PodIPs[0].IP)
	}
	// Output:
	// default web-1 Running 10.244.0.3
	// kube-system dns-0 Running 10.244.0.4
}

func ExampleClient_Watch() {
	socket, st, stop := exampleServer(podstest.Pod("default", "web-1", 1))
	defer stop()

	c, err := client.New(socket)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	w, err := c.Watch(context.Background(), client.WithFields("status.phase"))
	if err != nil {
		panic(err)
	}
	defer w.Close()
	for {
		ev, err := w.Next()
		if err != nil {
			panic(err)
		}
		if ev.Type == client.Synced {
			fmt.Println(ev.Type)
			// Now change the pods: the watch reports it.
			failed := podstest.Pod("default", "web-1", 1)
			failed.Status.Phase = corev1.PodFailed
			st.Upsert(failed)
			continue
		}
		fmt.Println(ev.Type, ev.Pod.Namespace, ev.Pod.Name, ev.Pod.Status.Phase)
		if ev.Type == client.Modified {
			break
		}
	}
	// Output:
	// ADDED default web-1 Running
	// SYNCED
	// MODIFIED default web-1 Failed
}

func ExampleCache() {
	socket, st, stop := exampleServer(podstest.Pod("default", "web-1", 1))
	defer stop()

	c, err := client.New(socket)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	cache := client.NewCache(c, client.WithFields("metadata.labels", "status.podIPs"),
		// The errors the cache retries after (the server restarting, not
		// synced yet, dropping the watch), for the logs.
		client.WithErrorHandler(func(err error) { log.Printf("pods cache: %v (retrying)", err) }))
	deleted := make(chan struct{})
	cache.OnAdd(func(p *corev1.Pod) { fmt.Println("added", p.Namespace+"/"+p.Name) })
	cache.OnDelete(func(p *corev1.Pod) {
		fmt.Println("deleted", p.Namespace+"/"+p.Name)
		close(deleted)
	})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- cache.Run(ctx) }()
	// WaitForSync returns Run's error when Run stops for good (a bad field
	// or selector, a user the server denies): the cache will never sync.
	if err := cache.WaitForSync(ctx); err != nil {
		panic(err)
	}
	for _, p := range cache.ByPodIP("10.244.0.3") {
		fmt.Println("10.244.0.3 is", p.Namespace+"/"+p.Name, "of app", p.Labels["app.kubernetes.io/name"])
	}

	st.Delete(podstest.UID("default", "web-1"))
	<-deleted
	fmt.Println(len(cache.List()), "pods")
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// added default/web-1
	// 10.244.0.3 is default/web-1 of app web
	// deleted default/web-1
	// 0 pods
	// Run: <nil>
}

func ExampleWithFieldSelector() {
	socket, _, stop := exampleServer(podstest.Pod("default", "web-1", 1), podstest.Pod("kube-system", "dns-0", 2))
	defer stop()

	c, err := client.New(socket)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// The server selects the pods; the mask trims them.
	pods, err := c.List(context.Background(),
		client.WithNamespace("kube-system"),
		client.WithFieldSelector("status.phase=Running"),
		client.WithFields("metadata.name"))
	if err != nil {
		panic(err)
	}
	for _, p := range pods {
		fmt.Println(p.Name)
	}
	// Output: dns-0
}

func ExampleWithResumeFrom() {
	socket, st, stop := exampleServer(podstest.Pod("default", "web-1", 1))
	defer stop()

	c, err := client.New(socket)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	_, rev, err := c.ListRevision(ctx)
	if err != nil {
		panic(err)
	}
	// Changes made while the client was away.
	st.Upsert(podstest.Pod("default", "web-2", 2))
	w, err := c.Watch(ctx, client.WithResumeFrom(rev))
	if err != nil {
		panic(err) // errors.Is(err, client.ErrRevisionTooOld): list or watch again
	}
	defer w.Close()
	for {
		ev, err := w.Next()
		if err != nil {
			panic(err)
		}
		if ev.Type == client.Synced {
			break
		}
		fmt.Println(ev.Type, ev.Pod.Name)
	}
	// Output: ADDED web-2
}
