package kit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// auditPolicy records every request but watches and the non-resource
// paths ignored at Metadata level, once, when the response is complete:
// enough to count who called what.
func auditPolicy(ignored string) string {
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: None
  verbs: ["watch"]
- level: None
  nonResourceURLs: [` + ignored + `]
- level: Metadata
`
}

const (
	health    = `"/healthz*", "/readyz*", "/livez*", "/metrics"`
	discovery = `"/version", "/api", "/api/*", "/apis", "/apis/*", "/openapi/*"`
)

// Audit is kube-apiserver's audit log, for counting the API calls a
// component made during a window.
type Audit struct {
	Path string
}

// AuditFlags writes an audit policy into dir and returns the
// kube-apiserver flags that log to dir/audit.log, and the Audit to read it.
func AuditFlags(dir string) ([]string, *Audit, error) {
	return auditFlags(dir, auditPolicy(health+", "+discovery))
}

// AuditFlagsWithDiscovery is AuditFlags with discovery (/api, /apis,
// /openapi) and /version requests recorded too; their Calls have an empty
// Resource and their Path set.
func AuditFlagsWithDiscovery(dir string) ([]string, *Audit, error) {
	return auditFlags(dir, auditPolicy(health))
}

// AuditFlagsPolicy is AuditFlags with the given audit policy (YAML), for
// a benchmark that traces only some requests; mode is kube-apiserver's
// --audit-log-mode ("blocking" or "batch": batch keeps the writes off the
// requests' path).
func AuditFlagsPolicy(dir, policy, mode string) ([]string, *Audit, error) {
	flags, a, err := auditFlags(dir, policy)
	if err != nil {
		return nil, nil, err
	}
	return append(flags, "--audit-log-mode="+mode), a, nil
}

func auditFlags(dir, content string) ([]string, *Audit, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(content), 0o644); err != nil {
		return nil, nil, err
	}
	log := filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + log,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
		"--audit-log-mode=blocking",
	}, &Audit{Path: log}, nil
}

// Offset is the log's current size: the start (or end) of a window.
func (a *Audit) Offset() (int64, error) {
	st, err := os.Stat(a.Path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Call is one audited request, as counted.
type Call struct {
	User      string
	UserAgent string
	Verb      string
	Resource  string
	// Path is the request's path without its query, for requests that
	// name no resource (discovery).
	Path string
}

// Event is one audited request as kube-apiserver logged it (the fields a
// benchmark reads), when its response was complete.
type Event struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent  string `json:"userAgent"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
	Done     time.Time `json:"stageTimestamp"`
}

// Events returns the requests logged between two offsets, in the log's
// order.
func (a *Audit) Events(from, to int64) ([]Event, error) {
	f, err := os.Open(a.Path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(io.LimitReader(f, to-from))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []Event
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line cut at the window's end
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Calls returns the requests logged between two offsets for which keep is
// true.
func (a *Audit) Calls(from, to int64, keep func(Call) bool) ([]Call, error) {
	events, err := a.Events(from, to)
	if err != nil {
		return nil, err
	}
	var out []Call
	for _, e := range events {
		c := Call{User: e.User.Username, UserAgent: e.UserAgent, Verb: e.Verb}
		if e.ObjectRef != nil {
			c.Resource = e.ObjectRef.Resource
		} else {
			c.Path, _, _ = strings.Cut(e.RequestURI, "?")
		}
		if keep(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// ByVerb counts calls per "verb resource", sorted, for a breakdown line.
func ByVerb(calls []Call) []string {
	n := map[string]int{}
	for _, c := range calls {
		n[c.Verb+" "+c.Resource]++
	}
	var out []string
	for k, v := range n {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}
