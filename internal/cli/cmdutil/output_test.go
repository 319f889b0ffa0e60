package cmdutil

import (
	"bytes"
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
