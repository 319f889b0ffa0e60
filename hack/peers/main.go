// Command peers runs the side-by-side comparison of `teardown why` and
// `orphans` with the tools people reach for (internal/peers), in two
// steps around the corpus test (`make peers` runs all three):
//
//	go run ./hack/peers build -dir docs/peers
//	    fetches and builds every peer at its pinned version through the go
//	    command, and records in DIR/peers.json what was built or why not;
//	TEARDOWN_PEERS=$PWD/docs/peers go test -tags integration -run '^TestCorpus' ./internal/cli/why/
//	    reproduces each case and records teardown's and every built
//	    peer's answer in DIR/CASE/TOOL.txt;
//	go run ./hack/peers table -dir docs/peers -doc docs/doctor.md -commit C -date D
//	    classifies the recorded answers by internal/peers' rules and writes
//	    the table into the document between its markers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/teardown-dev/teardown/internal/peers"
	"github.com/teardown-dev/teardown/localcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: peers build|table [flags]")
	}
	fs := flag.NewFlagSet("peers "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", "docs/peers", "the record directory")
	doc := fs.String("doc", "docs/doctor.md", "the document whose peers part is written (table)")
	commit := fs.String("commit", "", "the commit the answers were recorded at (table)")
	date := fs.String("date", "", "the day they were recorded (table)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "build":
		cache, err := localcluster.DefaultCacheDir()
		if err != nil {
			return err
		}
		return peers.WriteBuilt(*dir, peers.Build(context.Background(), cache, os.Stderr))
	case "table":
		if *commit == "" || *date == "" {
			return errors.New("table needs -commit and -date")
		}
		return table(*dir, *doc, *commit, *date)
	default:
		return fmt.Errorf("unknown step %q: build or table", args[0])
	}
}

func table(dir, doc, commit, date string) error {
	built, err := peers.ReadBuilt(dir)
	if err != nil {
		return err
	}
	answers, err := peers.ReadAnswers(dir)
	if err != nil {
		return err
	}
	for id := range answers {
		if _, ok := peers.Cases[id]; !ok {
			return fmt.Errorf("%s: an answer to a case internal/peers does not declare", filepath.Join(dir, id))
		}
	}
	absDoc, err := filepath.Abs(doc)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	link, err := filepath.Rel(filepath.Dir(absDoc), absDir)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(doc) //nolint:gosec // G703: the document is the developer's own -doc flag
	if err != nil {
		return err
	}
	part := peers.Table(peers.Recording{Date: date, Commit: commit, Kubernetes: localcluster.KubernetesVersion, Link: filepath.ToSlash(link)}, built, answers)
	out, err := peers.Splice(string(text), part)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(out), 0o644) //nolint:gosec // G703: as above
}
