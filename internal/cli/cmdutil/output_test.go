package cmdutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func TestOutputFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: nil, want: "tree"},
		{args: []string{"-o", "json"}, want: "json"},
		{args: []string{"--output=mermaid"}, want: "mermaid"},
		{args: []string{"-o", "yaml"}, want: "tree", wantErr: `invalid argument "yaml" for "-o, --output" flag: want tree, json, dot or mermaid`},
	}
	for _, tt := range tests {
		var got string
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }, SilenceUsage: true, SilenceErrors: true}
		OutputFlag(cmd, &got, "tree", "json", "dot", "mermaid")
		cmd.SetArgs(tt.args)
		cmd.SetOut(&bytes.Buffer{})
		err := cmd.Execute()
		if gotErr := errString(err); gotErr != tt.wantErr {
			t.Errorf("%v: error %q, want %q", tt.args, gotErr, tt.wantErr)
		}
		if got != tt.want {
			t.Errorf("%v: -o is %q, want %q", tt.args, got, tt.want)
		}
	}
	if diff := cmp.Diff([]string{"text", "text or json", "a, b or c"}, []string{orList([]string{"text"}), orList([]string{"text", "json"}), orList([]string{"a", "b", "c"})}); diff != "" {
		t.Errorf("orList (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestWriteAnswer(t *testing.T) {
	asText := func(w io.Writer, n int) error { _, err := fmt.Fprintf(w, "%d things\n", n); return err }
	asJSON := func(w io.Writer, n int) error { _, err := fmt.Fprintf(w, `{"things":%d}`+"\n", n); return err }
	for format, want := range map[string]string{"text": "3 things\n", "json": `{"things":3}` + "\n"} {
		var b bytes.Buffer
		if err := WriteAnswer(&b, format, 3, asText, asJSON); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		if diff := cmp.Diff(want, b.String()); diff != "" {
			t.Errorf("-o %s (-want +got):\n%s", format, diff)
		}
	}
	broken := errors.New("broken pipe")
	fail := func(io.Writer, int) error { return broken }
	err := WriteAnswer(io.Discard, "json", 3, asText, fail)
	if !errors.Is(err, broken) || err.Error() != "writing the answer: broken pipe" {
		t.Errorf("a failed write: %v, want writing the answer: broken pipe", err)
	}
}
