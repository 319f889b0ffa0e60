// Package helmrelease reads Helm's release records (Secrets of type
// helm.sh/release.v1, written by Helm 3 and 4 alike) without Helm: which
// record is a release's latest, and the objects its manifest lists.
package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/teardown-dev/teardown/pkg/lien"
)

// Labels select the records of the release name: Helm's storage drivers
// label each record (a Secret, or a ConfigMap with the configmap driver)
// owner=helm and name=<release>. They are stated once, in pkg/lien's
// HelmRecords, the selector of a lien on the records, which this package
// may import and pkg/lien may not import back.
func Labels(name string) map[string]string {
	return lien.HelmRecords(name).MatchLabels
}

// Selector selects the records of the release name; its String is what
// kubectl -l takes, and what a message naming the records quotes.
func Selector(name string) labels.Selector {
	return labels.SelectorFromSet(Labels(name))
}

// ListOptions list the records of the release name.
func ListOptions(name string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: Selector(name).String()}
}

// Version is the revision a record's label says.
func Version(s corev1.Secret) int {
	v, _ := strconv.Atoi(s.Labels["version"])
	return v
}

// RecordName is the name of the record of the release name at revision:
// what Helm's Secret storage names it.
func RecordName(name string, revision int) string {
	return "sh.helm.release.v1." + name + ".v" + strconv.Itoa(revision)
}

// Latest is the record of the highest revision among records, or nil.
func Latest(records []corev1.Secret) *corev1.Secret {
	if len(records) == 0 {
		return nil
	}
	latest := slices.MaxFunc(records, func(a, b corev1.Secret) int { return Version(a) - Version(b) })
	return &latest
}

// Objects reads the objects of a release record's manifest: the Secret's
// release key is base64 of gzip of the release's JSON. Objects without a
// kind or name (empty documents) are skipped; the chart's crds/ are not in
// the manifest.
func Objects(data []byte) ([]*unstructured.Unstructured, error) {
	var rel struct {
		Manifest string `json:"manifest"`
	}
	if err := decode(data, &rel); err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rel.Manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("release manifest: %w", err)
		}
		if len(u.Object) == 0 || u.GetKind() == "" || u.GetName() == "" {
			continue
		}
		if _, err := schema.ParseGroupVersion(u.GetAPIVersion()); err != nil {
			return nil, fmt.Errorf("release manifest: %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, u)
	}
}

// Values are a release record's values: the chart's defaults (its
// values.yaml) and the user's own (what -f and --set gave, the values
// --reuse-values reuses).
type Values struct {
	Chart map[string]any
	User  map[string]any
}

// ReadValues reads the values of a release record (as Objects reads its
// manifest).
func ReadValues(data []byte) (Values, error) {
	var rel struct {
		Chart struct {
			Values map[string]any `json:"values"`
		} `json:"chart"`
		Config map[string]any `json:"config"`
	}
	if err := decode(data, &rel); err != nil {
		return Values{}, err
	}
	return Values{Chart: rel.Chart.Values, User: rel.Config}, nil
}

// decode decodes a record's release key (base64 of gzip of JSON, or of
// JSON) into v.
func decode(data []byte, v any) error {
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, 64<<20)); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}
