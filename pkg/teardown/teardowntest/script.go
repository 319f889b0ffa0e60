// Package teardowntest reads the planner's scripts, pkg/teardown/testdata/*.txt,
// in the style of etcd-io/raft's interaction tests: blocks of a command,
// its input and its expected output. The planner's own tests replay them;
// internal/contract sends their plans to kube-apiserver, so that the CRD's
// validation and pkg/teardown's Validate are checked on the same input.
package teardowntest

import (
	"fmt"
	"os"
	"strings"
)

// Block is one command of a script:
//
//	# comments
//	CMD ARGS...
//	INPUT (any lines)
//	----
//	WANT (up to a blank line)
type Block struct {
	// Line is the command's line in the script, from 1.
	Line  int
	Cmd   string
	Args  []string
	Input string
	Want  string
	// Header is the comments, command and input as written: what a
	// rewritten script keeps of the block before its output.
	Header string
}

// ParseFile reads the script in file and splits it into its blocks.
func ParseFile(file string) ([]Block, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	blocks, err := Parse(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return blocks, nil
}

// Parse splits a script into its blocks.
func Parse(s string) ([]Block, error) {
	lines := strings.Split(s, "\n")
	var blocks []Block
	for i := 0; i < len(lines); {
		var header strings.Builder
		for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
			if strings.HasPrefix(lines[i], "#") {
				header.WriteString(lines[i] + "\n")
			}
			i++
		}
		if i >= len(lines) {
			break
		}
		b := Block{Line: i + 1}
		fields := strings.Fields(lines[i])
		b.Cmd, b.Args = fields[0], fields[1:]
		header.WriteString(lines[i] + "\n")
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			header.WriteString(lines[i] + "\n")
			i++
		}
		if i >= len(lines) {
			return nil, fmt.Errorf("line %d: %s has no ---- separator", b.Line, b.Cmd)
		}
		i++
		var want []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			want = append(want, lines[i])
			i++
		}
		b.Input, b.Want, b.Header = strings.Join(input, "\n"), strings.Join(want, "\n"), header.String()
		blocks = append(blocks, b)
	}
	return blocks, nil
}
