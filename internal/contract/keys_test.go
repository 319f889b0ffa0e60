package contract

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/repofile"
)

// wellKnown is the file that declares every teardown.dev/ key.
const wellKnown = "api/v1alpha1/well_known.go"

// keyPattern finds a teardown.dev/ key: the prefix not preceded by a name's
// character (liens.teardown.dev and count/liens.teardown.dev are resource
// names, soak.teardown.dev/ another prefix), then the key's name as a
// qualified name's name part (alphanumeric at both ends, so the "-" of
// `kubectl label ... teardown.dev/lien-` and a sentence's full stop are not
// part of it). "/" may be written "~1", as in a JSON pointer.
var keyPattern = regexp.MustCompile(`(?:^|[^A-Za-z0-9.-])(teardown\.dev(?:/|~1)([A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?))`)

// declared are the teardown.dev/ keys of well_known.go: exact keys, and
// prefixes (constants named ...Prefix) that a key may extend.
type declared struct {
	keys     map[string]bool
	prefixes []string
}

func (d declared) has(key string) bool {
	if d.keys[key] {
		return true
	}
	for _, p := range d.prefixes {
		if strings.HasPrefix(key, p) && len(key) > len(p) {
			return true
		}
	}
	return false
}

// readDeclared reads the string constants of the Go file at path whose
// value starts with v1alpha1.KeyPrefix.
func readDeclared(t *testing.T, path string) declared {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	d := declared{keys: map[string]bool{}}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				switch name := vs.Names[i].Name; {
				case s == v1alpha1.KeyPrefix || !strings.HasPrefix(s, v1alpha1.KeyPrefix):
				case strings.HasSuffix(name, "Prefix"):
					d.prefixes = append(d.prefixes, s)
				default:
					d.keys[s] = true
				}
			}
		}
	}
	return d
}

// finding is a teardown.dev/ key on a line of a file.
type finding struct {
	Line int
	Key  string
}

// keysIn returns the teardown.dev/ keys r spells out, line by line; the
// API's group/version (apiVersion: teardown.dev/v1alpha1) is not a key.
func keysIn(r io.Reader) ([]finding, error) {
	var out []finding
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		for _, m := range keyPattern.FindAllStringSubmatch(sc.Text(), -1) {
			if m[2] == v1alpha1.GroupVersion.Version {
				continue
			}
			out = append(out, finding{Line: n, Key: v1alpha1.KeyPrefix + m[2]})
		}
	}
	return out, sc.Err()
}

func TestKeysIn(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`apiVersion: teardown.dev/v1alpha1`, nil},
		{`paramKind: {apiVersion: teardown.dev/v1alpha1, kind: Trust}`, nil},
		{`  name: liens.teardown.dev`, nil},
		{`count/liens.teardown.dev: "100"`, nil},
		{`' kubectl auth can-i escalate teardowns.teardown.dev/' + object.metadata.name`, nil},
		{`rule: self.all(k, !k.apiVersion.startsWith('teardown.dev/'))`, nil},
		{`and teardown''s (teardown.dev/*) are never`, nil},
		{`finalizers: [soak.teardown.dev/block]`, nil},
		{`matchLabels: {teardown.dev/lien: "true"}`, []string{"teardown.dev/lien"}},
		{`'teardown.dev/liens' in oldObject.metadata.annotations ? oldObject.metadata.annotations['teardown.dev/liens'] : ''`, []string{"teardown.dev/liens", "teardown.dev/liens"}},
		{`(kubectl label KIND/NAME teardown.dev/lien-).`, []string{"teardown.dev/lien"}},
		{`# teardown.dev/liens, finalizer teardown.dev/lien. Who`, []string{"teardown.dev/liens", "teardown.dev/lien"}},
		{`f.startsWith('teardown.dev/teardown-')`, []string{"teardown.dev/teardown"}},
		{`# finalizer teardown.dev/teardown-<plan>, or`, []string{"teardown.dev/teardown"}},
		{`- {op: remove, path: /metadata/labels/teardown.dev~1lien}`, []string{"teardown.dev/lien"}},
		{`teardown.dev/aggregate-to-controller=true`, []string{"teardown.dev/aggregate-to-controller"}},
		{`teardown.dev/v1beta1`, []string{"teardown.dev/v1beta1"}},
	} {
		got, err := keysIn(strings.NewReader(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, f := range got {
			keys = append(keys, f.Key)
		}
		if diff := cmp.Diff(tc.want, keys); diff != "" {
			t.Errorf("keysIn(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
}

// undeclared returns, as "file:line: key" for each, the keys of the file
// that d does not declare.
func undeclared(name string, r io.Reader, d declared) ([]string, int, error) {
	found, err := keysIn(r)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", name, err)
	}
	var out []string
	for _, f := range found {
		if !d.has(f.Key) {
			out = append(out, fmt.Sprintf("%s:%d: %s", name, f.Line, f.Key))
		}
	}
	return out, len(found), nil
}

func TestUndeclaredNamesFileLineAndKey(t *testing.T) {
	d := declared{keys: map[string]bool{"teardown.dev/lien": true}, prefixes: []string{"teardown.dev/teardown-"}}
	in := "kind: X\nlabels: {teardown.dev/lien: \"true\"}\nfinalizers: [teardown.dev/teardown-plan, teardown.dev/teardown]\n  teardown.dev/bogus: x\n"
	got, n, err := undeclared("f.yaml", strings.NewReader(in), d)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"f.yaml:3: teardown.dev/teardown", "f.yaml:4: teardown.dev/bogus"}
	if diff := cmp.Diff(want, got); diff != "" || n != 4 {
		t.Errorf("undeclared: %d keys, want 4; (-want +got):\n%s", n, diff)
	}
}

// TestYAMLKeysAreDeclared scans what spells the contract out in YAML (the
// admission policies, the rest of the kustomize config, the Helm chart:
// templates, CRDs, values, notes; the examples' manifests) and fails on every teardown.dev/ key
// that well_known.go does not declare, naming its file and line.
func TestYAMLKeysAreDeclared(t *testing.T) {
	path, err := repofile.Find(wellKnown, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(path)))
	d := readDeclared(t, path)
	if !d.has(v1alpha1.LienLabel) || !d.has(v1alpha1.TriggerFinalizer("p")) {
		t.Fatalf("%s: read keys %v and prefixes %v, without %s or %s", wellKnown, d.keys, d.prefixes, v1alpha1.LienLabel, v1alpha1.TriggerFinalizer("p"))
	}

	for _, tree := range []struct {
		dir   string
		files func(name string) bool
	}{
		{"config", func(name string) bool { return strings.HasSuffix(name, ".yaml") }},
		{"charts/teardown", func(string) bool { return true }},
		{"examples", func(name string) bool { return strings.HasSuffix(name, ".yaml") }},
	} {
		keys := 0
		err := filepath.WalkDir(filepath.Join(root, tree.dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !tree.files(e.Name()) {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			rel, _ := filepath.Rel(root, p)
			bad, n, err := undeclared(rel, f, d)
			for _, b := range bad {
				t.Errorf("%s is not declared in %s", b, wellKnown)
			}
			keys += n
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// A walk that found nothing proves nothing: the tree moved.
		if keys == 0 {
			t.Errorf("%s: no teardown.dev/ key found", tree.dir)
		}
	}
}
