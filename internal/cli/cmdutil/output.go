package cmdutil

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// OutputFlag adds -o/--output to cmd, storing into p one of formats (the
// first is the default). Another value is refused when the flags are
// parsed: a usage error (exit 2) naming the formats, as for any bad flag.
func OutputFlag(cmd *cobra.Command, p *string, formats ...string) {
	*p = formats[0]
	cmd.Flags().VarP(&choice{p: p, allowed: formats}, "output", "o", "output format: "+orList(formats))
}

// WriteAnswer writes answer to w in the format -o chose, for the commands
// whose -o is text or json: with asJSON for "json", with asText otherwise.
func WriteAnswer[T any](w io.Writer, format string, answer T, asText, asJSON func(io.Writer, T) error) error {
	write := asText
	if format == "json" {
		write = asJSON
	}
	if err := write(w, answer); err != nil {
		return fmt.Errorf("writing the answer: %w", err)
	}
	return nil
}

// choice is a string flag that takes one of allowed.
type choice struct {
	p       *string
	allowed []string
}

func (c *choice) String() string { return *c.p }
func (c *choice) Type() string   { return "string" }

func (c *choice) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("want %s", orList(c.allowed))
	}
	*c.p = v
	return nil
}

// orList is "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
