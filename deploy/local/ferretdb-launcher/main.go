// Command ferretdb-launcher serves FerretDB (SQLite backend) on a given address.
//
// It exists because `go install .../cmd/ferretdb` builds a binary that panics at start: the
// upstream build reads a generated version.txt that is not part of the published module. Embedding
// the public `ferretdb` package in a main module of our own sidesteps that check.
//
// It writes the MongoDB URI to -uri-file (atomically) once the listener is up, logs "ready", and
// stops on SIGINT/SIGTERM — or when its standard input closes, if -exit-on-stdin-eof is set, so a
// parent that dies without cleaning up does not leave the server behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on (port 0 picks a free port)")
	dir := flag.String("dir", "", "directory for the SQLite files (created if missing)")
	uriFile := flag.String("uri-file", "", "file to write the MongoDB URI to once listening")
	stdinEOF := flag.Bool("exit-on-stdin-eof", false, "exit when standard input is closed")
	logLevel := flag.String("log-level", "warn", "log level: debug, info, warn, error")
	flag.Parse()

	if err := run(*listen, *dir, *uriFile, *stdinEOF, *logLevel); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb-launcher:", err)
		os.Exit(1)
	}
}

func run(listen, dir, uriFile string, stdinEOF bool, logLevel string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("bad -log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
		Logger:    logger,
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if stdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()

	// MongoDBURI blocks until the listener is bound, so the URI carries the real port.
	uri := f.MongoDBURI()
	if uriFile != "" {
		tmp := uriFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(uri+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, uriFile); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "ferretdb ready on %s\n", uri)

	<-done
	return nil
}
