package finalizer

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Finalize does one finalizer's cleanup. done false means "not yet": the
// finalizer stays and Apply is to be called again later.
type Finalize func(ctx context.Context, obj metav1.Object) (done bool, err error)

// Finalizer is one named cleanup step.
type Finalizer struct {
	Name     string
	Finalize Finalize
}

// Finalizers run in slice order.
type Finalizers []Finalizer

// Result says what Apply did.
type Result struct {
	// Changed: obj's finalizers were changed and must be written back.
	Changed bool
	// Pending names the finalizer still waiting, if any.
	Pending string
}

// Apply adds the missing finalizers to a live object; on an object being
// deleted it runs the first finalizer still present, removes it once done,
// and goes on to the next, stopping at the first one not done. Finalizers
// of other controllers are left alone and keep their place.
func (fs Finalizers) Apply(ctx context.Context, obj metav1.Object) (Result, error) {
	if err := fs.validate(); err != nil {
		return Result{}, err
	}
	present := obj.GetFinalizers()
	if obj.GetDeletionTimestamp().IsZero() {
		var added []string
		for _, f := range fs {
			if !slices.Contains(present, f.Name) {
				added = append(added, f.Name)
			}
		}
		if len(added) == 0 {
			return Result{}, nil
		}
		obj.SetFinalizers(append(slices.Clone(present), added...))
		return Result{Changed: true}, nil
	}
	var res Result
	for _, f := range fs {
		if !slices.Contains(obj.GetFinalizers(), f.Name) {
			continue // done before, or never added: an object deleted early
		}
		done, err := f.Finalize(ctx, obj)
		if err != nil {
			res.Pending = f.Name
			return res, fmt.Errorf("finalizer %s: %w", f.Name, err)
		}
		if !done {
			res.Pending = f.Name
			return res, nil
		}
		obj.SetFinalizers(slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(n string) bool { return n == f.Name }))
		res.Changed = true
	}
	return res, nil
}

func (fs Finalizers) validate() error {
	seen := map[string]bool{}
	for i, f := range fs {
		switch {
		case f.Name == "":
			return fmt.Errorf("finalizer %d has no name", i)
		case f.Finalize == nil:
			return fmt.Errorf("finalizer %s has no Finalize", f.Name)
		case seen[f.Name]:
			return fmt.Errorf("finalizer %s is listed twice", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}
