package testenv

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ShellBlock returns the lines of the first ```sh block after the heading
// in the markdown file, as a reader copies them: the docs' commands are run
// as written by the tests that read them.
func ShellBlock(file, heading string) ([]string, error) { return CodeBlock(file, heading, "sh") }

// CodeBlock returns the lines of the first ```lang block after the heading
// in the markdown file (a manifest the docs show, say), as a reader copies
// them.
func CodeBlock(file, heading, lang string) ([]string, error) {
	var lines []string
	in := false
	err := afterHeading(file, heading, func(l string) bool {
		switch {
		case !in && strings.TrimSpace(l) == "```"+lang:
			in = true
		case in && strings.TrimSpace(l) == "```":
			return true
		case in:
			lines = append(lines, l)
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if !in {
		return nil, fmt.Errorf("%s: no %s block after %q", file, lang, heading)
	}
	return lines, nil
}

// TableCommands returns the command in the first cell of each row of the
// first table after the heading (the text between the cell's backquotes),
// as in a table of "path, as a user types it | ... ".
func TableCommands(file, heading string) ([]string, error) {
	var commands []string
	in := false
	err := afterHeading(file, heading, func(l string) bool {
		if !strings.HasPrefix(l, "|") {
			return in // the table has ended
		}
		in = true
		cell := strings.TrimSpace(strings.SplitN(l[1:], "|", 2)[0])
		if len(cell) > 2 && strings.HasPrefix(cell, "`") && strings.HasSuffix(cell, "`") {
			commands = append(commands, strings.Trim(cell, "`"))
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if len(commands) == 0 {
		return nil, fmt.Errorf("%s: no table of commands after %q", file, heading)
	}
	return commands, nil
}

// afterHeading calls line with each line after the heading until it
// returns true.
func afterHeading(file, heading string, line func(string) bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if !found {
			found = strings.TrimSpace(l) == heading
			continue
		}
		if line(l) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%s: no heading %q", file, heading)
	}
	return nil
}
