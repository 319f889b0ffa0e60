package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Env is the variable that makes the corpus test record answers and run
// the peers: the record directory (docs/peers), holding peers.json.
const Env = "TEARDOWN_PEERS"

// RunTimeout bounds one peer's run on one case.
const RunTimeout = 3 * time.Minute

// Run runs the built peer b (its program under cacheDir) on t against the
// cluster of kubeconfig, and returns its answer (output not yet
// normalized). A peer that fails to start answers with the error.
func Run(ctx context.Context, b Built, cacheDir string, t Target, kubeconfig string) (Answer, error) {
	p, ok := PeerNamed(b.Name)
	if !ok {
		return Answer{}, fmt.Errorf("no peer %s", b.Name)
	}
	if b.Bin == "" {
		return Answer{}, fmt.Errorf("%s was not built: %s", b.Name, b.Error)
	}
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	name, args := p.Command(filepath.Join(cacheDir, b.Bin), t, kubeconfig)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "NO_COLOR=1")
	cmd.Dir = os.TempDir() // knsk writes a log where it runs
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	exit := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		exit = ee.ExitCode()
	} else if err != nil {
		return Answer{}, fmt.Errorf("running %s: %w", b.Name, err)
	}
	hide := func(s string) string { return strings.ReplaceAll(s, kubeconfig, "KUBECONFIG") }
	// The command as a person types it: the peer's name, not where this
	// machine keeps its program.
	line := append([]string{b.Name}, p.Args(t, kubeconfig)...)
	return Answer{
		Tool: b.Name, Command: hide(strings.Join(line, " ")), Exit: exit,
		Output: hide(stdout.String() + stderr.String()),
	}, nil
}

// Write keeps a in dir/id/TOOL.txt: the command line, the exit code, a
// blank line, and the output.
func Write(dir, id string, a Answer) error {
	if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
		return err
	}
	text := fmt.Sprintf("$ %s\nexit %d\n\n%s", a.Command, a.Exit, a.Output)
	return os.WriteFile(filepath.Join(dir, id, a.Tool+".txt"), []byte(text), 0o644)
}

// ReadAnswers reads every answer kept in dir: by case ID, then tool.
func ReadAnswers(dir string) (map[string]map[string]Answer, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.txt"))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]Answer{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		a, err := parseAnswer(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		a.Tool = strings.TrimSuffix(filepath.Base(f), ".txt")
		id := filepath.Base(filepath.Dir(f))
		if out[id] == nil {
			out[id] = map[string]Answer{}
		}
		out[id][a.Tool] = a
	}
	return out, nil
}

func parseAnswer(text string) (Answer, error) {
	cmdLine, rest, ok1 := strings.Cut(text, "\n")
	exitLine, rest, ok2 := strings.Cut(rest, "\n")
	blank, output, ok3 := strings.Cut(rest, "\n")
	if !ok1 || !ok2 || !ok3 || !strings.HasPrefix(cmdLine, "$ ") || !strings.HasPrefix(exitLine, "exit ") || blank != "" {
		return Answer{}, errors.New(`not an answer: want "$ COMMAND", "exit N", a blank line, then the output`)
	}
	exit, err := strconv.Atoi(strings.TrimPrefix(exitLine, "exit "))
	if err != nil {
		return Answer{}, fmt.Errorf("exit code: %w", err)
	}
	return Answer{Command: strings.TrimPrefix(cmdLine, "$ "), Exit: exit, Output: output}, nil
}
