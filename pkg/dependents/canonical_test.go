package dependents

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/teardown-dev/teardown/config"
)

// celEntry is the policy's `findAll` of entries.
var celEntry = regexp.MustCompile(`\{[^{}]*\}`)

// celLinks reads a canonical value as the policy teardown-owner-links
// does, in Go: the entries are findAll('\{[^{}]*\}'), each split at '"';
// apiVersion is part 3, kind part 7, namespace part 11 when part 9 is
// "namespace", name the sixth part from the end, uid the second.
func celLinks(raw string) []OwnerLink {
	var out []OwnerLink
	for _, e := range celEntry.FindAllString(raw, -1) {
		p := strings.Split(e, `"`)
		l := OwnerLink{APIVersion: p[3], Kind: p[7], Name: p[len(p)-6], UID: types.UID(p[len(p)-2])}
		if p[9] == "namespace" {
			l.Namespace = p[11]
		}
		out = append(out, l)
	}
	return out
}

// TestPolicyCarriesTheGoPattern: the policy checks new values with the
// very pattern Format's output is tested against here, and the warning
// policy reads only values of that form.
func TestPolicyCarriesTheGoPattern(t *testing.T) {
	data, err := config.Manifests.ReadFile("policy/owner-links.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "r'" + AnnotationPattern + "'"; !strings.Contains(string(data), want) {
		t.Errorf("policy/owner-links.yaml lacks the CEL raw string %s", want)
	}
	if want := "r'" + celEntry.String() + "'"; !strings.Contains(string(data), want) {
		t.Errorf("policy/owner-links.yaml lacks the entry pattern %s", want)
	}
	if want := fmt.Sprintf("<= %d", MaxOwners); !strings.Contains(string(data), want) {
		t.Errorf("policy/owner-links.yaml lacks the limit %q", want)
	}
	// teardown-grants-warn-owned warns only about values of that form.
	if data, err = config.Manifests.ReadFile("policy/controller-grants.yaml"); err != nil {
		t.Fatal(err)
	}
	if want := "r'" + AnnotationPattern + "'"; !strings.Contains(string(data), want) {
		t.Errorf("policy/controller-grants.yaml lacks the CEL raw string %s", want)
	}
}

func TestFormatIsCanonical(t *testing.T) {
	ok := []OwnerLink{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "gc", Name: "owner-x", UID: "be119f09-e836-48ed-9e80-8a324ab5928b"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "system:aggregate-to-edit", UID: "u2"},
		{APIVersion: "sriovnetwork.openshift.io/v1", Kind: "SriovNetwork", Namespace: "sriov-network-operator", Name: "intel.net_1@x+y=z~w", UID: "U-3"},
	}
	for n := 0; n <= len(ok); n++ {
		raw, err := Format(ok[:n])
		if err != nil {
			t.Fatal(err)
		}
		if !Canonical(raw) {
			t.Errorf("Format(%d links) = %s, not canonical", n, raw)
		}
		got, err := Parse(raw)
		if err != nil {
			t.Fatalf("Parse(%s): %v", raw, err)
		}
		if diff := cmp.Diff(ok[:n], got, cmp.Comparer(func(a, b []OwnerLink) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
			t.Errorf("Parse(Format) (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(ok[:n], celLinks(raw)); n > 0 && diff != "" {
			t.Errorf("the policy's reading of %s (-want +got):\n%s", raw, diff)
		}
	}
	bad := map[string]OwnerLink{
		"quote in the name":       {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: `x"y`, UID: "u"},
		"backslash in the name":   {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: `x\y`, UID: "u"},
		"brace in the name":       {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: `x}`, UID: "u"},
		"< escaped by json":       {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: `x<y`, UID: "u"},
		"non-ASCII name":          {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "é", UID: "u"},
		"space in the kind":       {APIVersion: "v1", Kind: "Config Map", Namespace: "a", Name: "x", UID: "u"},
		"upper-case namespace":    {APIVersion: "v1", Kind: "ConfigMap", Namespace: "A", Name: "x", UID: "u"},
		"upper-case group":        {APIVersion: "Example.com/v1", Kind: "ConfigMap", Name: "x", UID: "u"},
		"U+2028 in the uid":       {APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u\u2028"},
		"comma in the apiVersion": {APIVersion: "v1,", Kind: "ConfigMap", Name: "x", UID: "u"},
	}
	for what, l := range bad {
		if err := l.ValidateCanonical(); err == nil {
			t.Errorf("%s: ValidateCanonical accepted %+v", what, l)
		}
		raw, err := Format([]OwnerLink{l})
		if err != nil {
			t.Fatal(err)
		}
		if Canonical(raw) {
			t.Errorf("%s: %s is canonical, but SetOwner refuses it", what, raw)
		}
		d := &rbacv1.ClusterRole{}
		if err := AddLink(d, l); err == nil {
			t.Errorf("%s: AddLink accepted %+v", what, l)
		}
	}
	for _, raw := range []string{
		`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x","uid":"u"} ]`,
		`[{"kind":"ConfigMap","apiVersion":"v1","namespace":"a","name":"x","uid":"u"}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"","name":"x","uid":"u"}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x","name":"y","uid":"u"}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x\u0079","uid":"u"}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x","uid":"u","x":1}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x","uid":"u"},]`,
		` [{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x","uid":"u"}]`,
		"[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"a\",\"name\":\"x\",\"uid\":\"u\"}]\n",
		`null`, ``, `{}`,
	} {
		if Canonical(raw) {
			t.Errorf("Canonical(%q) = true", raw)
		}
	}
}

// TestCanonicalIffSetOwnerAccepts draws links from an alphabet with every
// kind of character and checks, for each: Format's output is canonical
// exactly when ValidateCanonical accepts every link, and a canonical value
// reads the same through Parse and the policy's regular expressions.
func TestCanonicalIffSetOwnerAccepts(t *testing.T) {
	const alphabet = "abcxyzAZ09-._:@+=~/ \"\\{}[],<>&é\u2028\x00\t"
	rng := rand.New(rand.NewPCG(1, 2))
	field := func(good string) string {
		n := 1 + rng.IntN(6)
		var b strings.Builder
		for range n {
			if rng.IntN(8) == 0 {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			} else {
				b.WriteByte(good[rng.IntN(len(good))])
			}
		}
		return b.String()
	}
	for i := range 20000 {
		n := rng.IntN(5)
		links := make([]OwnerLink, n)
		allOK := true
		for j := range links {
			l := OwnerLink{
				APIVersion: field("abc09"),
				Kind:       field("abcAZ09"),
				Name:       field("abc09-.:"),
				UID:        types.UID(fmt.Sprintf("%s-%d", field("abc09-"), j)),
			}
			if rng.IntN(2) == 0 {
				l.APIVersion = field("abc09.-") + "/" + field("v19")
			}
			if rng.IntN(2) == 0 {
				l.Namespace = field("abc09-")
			}
			links[j] = l
			allOK = allOK && l.Validate() == nil && l.ValidateCanonical() == nil
		}
		raw, err := Format(links)
		if err != nil {
			t.Fatal(err)
		}
		if got := Canonical(raw); got != allOK {
			t.Fatalf("case %d: Canonical(%s) = %v, ValidateCanonical says %v", i, raw, got, allOK)
		}
		if !allOK {
			continue
		}
		parsed, err := Parse(raw)
		if err != nil {
			t.Fatalf("case %d: Parse(%s): %v", i, raw, err)
		}
		if diff := cmp.Diff(links, celLinks(raw), cmp.Comparer(func(a, b []OwnerLink) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
			t.Fatalf("case %d: the policy's reading of %s (-want +got):\n%s", i, raw, diff)
		}
		if diff := cmp.Diff(links, parsed, cmp.Comparer(func(a, b []OwnerLink) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
			t.Fatalf("case %d: Parse(%s) (-want +got):\n%s", i, raw, diff)
		}
	}
}

// FuzzCanonicalReadsTheSame: any value the policy accepts as canonical is
// one Format writes, and Parse reads the links the policy's regular
// expressions read (or refuses it for a reason the policy checks too).
func FuzzCanonicalReadsTheSame(f *testing.F) {
	f.Add(`[{"apiVersion":"v1","kind":"ConfigMap","namespace":"gc","name":"owner-x","uid":"u1"}]`)
	f.Add(`[{"apiVersion":"a.b/v1","kind":"K","name":"n","uid":"u"},{"apiVersion":"v1","kind":"K","namespace":"n","name":"n","uid":"u"}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		if !Canonical(raw) {
			return
		}
		links, err := Parse(raw)
		if err != nil {
			if !strings.Contains(err.Error(), "listed twice") && !strings.Contains(err.Error(), "at most") {
				t.Fatalf("Parse(%s) of a canonical value: %v", raw, err)
			}
			return
		}
		again, err := Format(links)
		if err != nil {
			t.Fatal(err)
		}
		if again != raw {
			t.Fatalf("Format(Parse(%s)) = %s", raw, again)
		}
		if len(links) > 0 {
			if diff := cmp.Diff(links, celLinks(raw)); diff != "" {
				t.Fatalf("the policy's reading of %s (-want +got):\n%s", raw, diff)
			}
		}
	})
}

func TestSetOwnerRefusesA33rdOwner(t *testing.T) {
	d := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "d"}}
	for i := range MaxOwners {
		if err := SetOwner(d, owner("ns", fmt.Sprintf("o%d", i), fmt.Sprintf("uid-%d", i))); err != nil {
			t.Fatalf("owner %d: %v", i, err)
		}
	}
	before := d.Annotations[OwnersAnnotation]
	err := SetOwner(d, owner("ns", "one-too-many", "uid-x"))
	if err == nil || !strings.Contains(err.Error(), "already has 32 owner links") {
		t.Fatalf("SetOwner of a 33rd owner = %v, want the limit", err)
	}
	if d.Annotations[OwnersAnnotation] != before {
		t.Error("a refused SetOwner changed the annotation")
	}
	// Updating a link it has is not a 33rd.
	if err := SetOwner(d, owner("ns", "renamed", "uid-0")); err != nil {
		t.Errorf("SetOwner of an existing owner: %v", err)
	}
	links := make([]OwnerLink, MaxOwners+1)
	for i := range links {
		links[i] = OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "o", UID: types.UID(fmt.Sprint(i))}
	}
	raw, _ := Format(links)
	if _, err := Parse(raw); err == nil || !strings.Contains(err.Error(), "33 owner links, at most 32") {
		t.Errorf("Parse of 33 links = %v, want the limit", err)
	}
}
