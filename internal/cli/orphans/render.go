package orphans

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

var titles = map[string]string{
	WebhookDown:       "fail-closed webhook without a server (refusing requests now)",
	APIServiceDown:    "APIService without a server (every namespace deletion waits)",
	HelmReleaseGone:   "Helm release gone (helm uninstall cannot find these)",
	TeardownOwnerGone: "teardown owner gone",
	OwnerGone:         "owner gone",
	StuckTerminating:  "Terminating, held by a finalizer no running controller is known to remove",
}

// Render prints the orphans for a person, grouped by kind of finding.
func Render(w io.Writer, orphans []Orphan) error {
	var b strings.Builder
	if len(orphans) == 0 {
		b.WriteString("no orphans found\n")
	} else {
		fmt.Fprintf(&b, "%s found\n", cmdutil.Plural(len(orphans), "orphan", "orphans"))
	}
	last := ""
	for _, o := range orphans {
		if o.Kind != last {
			n := 0
			for _, x := range orphans {
				if x.Kind == o.Kind {
					n++
				}
			}
			fmt.Fprintf(&b, "\n%s (%d)\n", titles[o.Kind], n)
			last = o.Kind
		}
		fmt.Fprintf(&b, "  %s\n      %s\n", o.Object.Display, o.Reason)
	}
	if len(orphans) > 0 {
		b.WriteString("\ndelete them once you are sure nothing uses them; `teardown why KIND/NAME` explains the Terminating ones\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RenderJSON prints {"orphans": [...]} for scripts.
func RenderJSON(w io.Writer, orphans []Orphan) error {
	if orphans == nil {
		orphans = []Orphan{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Orphans []Orphan `json:"orphans"`
	}{orphans})
}
