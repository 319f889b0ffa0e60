package teardown

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/teardown/teardowntest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// TestInteraction replays the scripts in testdata/: each is a sequence of
// commands, an input and the expected output, in the style of etcd-io/raft's
// interaction tests. The world is a set of objects the script creates and
// finalizes; `tick` runs the planner on it, prints the actions and applies
// them as kube-apiserver would.
//
//	plan            YAML TeardownSpec as input; prints ok or the errors
//	create          one object per line: APIVERSION KIND [NS/]NAME [finalizers=a,b] [webhooks=h:Fail,...] [labels=k:v,...] [conditions=T:S,...] [available=N] [custom]
//	tick [+DUR]     advances the clock, then one planner tick
//	run [+DUR]      ticks until the plan finished, failed or nothing changes
//	delete KIND NS/NAME     deletes the object as someone else would
//	finalize KIND NS/NAME   removes the object's finalizers (gone if deleting)
//	set KIND NS/NAME conditions=T:S   changes the object (available=N too)
//	resume STEP     ResumeFrom(STEP)
//	status          prints every step's status
//
// Run with -rewrite to record the actual output.
func TestInteraction(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			blocks, err := teardowntest.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			w := &world{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			var out strings.Builder
			for _, b := range blocks {
				got := w.do(t, b)
				if !*rewrite && strings.TrimSpace(got) != strings.TrimSpace(b.Want) {
					t.Errorf("%s:%d %s\n%s", file, b.Line, b.Cmd, cmp.Diff(strings.TrimSpace(b.Want), strings.TrimSpace(got)))
				}
				out.WriteString(b.Header)
				out.WriteString("----\n")
				if s := strings.TrimSpace(got); s != "" {
					out.WriteString(s + "\n")
				}
				out.WriteString("\n")
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// block is one command of a script.
type block = teardowntest.Block

// world is the cluster the scripts act on.
type world struct {
	now     time.Time
	spec    v1alpha1.TeardownSpec
	status  v1alpha1.TeardownStatus
	objects []*fakeObject
	nextUID int
}

type fakeObject struct {
	Object
	labels map[string]string
	// available replicas of a workload; nil: not a workload.
	available *int64
}

func (w *world) do(t *testing.T, b block) string {
	t.Helper()
	switch b.Cmd {
	case "plan":
		w.spec = v1alpha1.TeardownSpec{}
		w.status = v1alpha1.TeardownStatus{}
		if err := yaml.UnmarshalStrict([]byte(b.Input), &w.spec); err != nil {
			return "error: " + err.Error()
		}
		errs := Validate(&w.spec)
		if len(errs) == 0 {
			return "ok"
		}
		var out []string
		for _, e := range errs {
			out = append(out, e.Error())
		}
		return strings.Join(out, "\n")
	case "create":
		for _, l := range strings.Split(b.Input, "\n") {
			if strings.TrimSpace(l) != "" {
				w.create(t, l)
			}
		}
		return ""
	case "finalize":
		o := w.find(t, b.Args)
		o.Finalizers = nil
		if o.Deleting {
			w.remove(o)
			return o.String() + " is gone"
		}
		return ""
	case "delete":
		o := w.find(t, b.Args)
		if len(o.Finalizers) == 0 {
			w.remove(o)
			return o.String() + " is gone"
		}
		o.Deleting = true
		return ""
	case "set":
		o := w.find(t, b.Args[:2])
		for _, kv := range b.Args[2:] {
			w.setField(t, o, kv)
		}
		return ""
	case "resume":
		if err := ResumeFrom(&w.spec, &w.status, b.Args[0]); err != nil {
			return "error: " + err.Error()
		}
		return "phase " + string(w.status.Phase)
	case "status":
		var out []string
		for _, s := range w.status.Steps {
			out = append(out, stepLine(s))
		}
		return strings.Join(out, "\n")
	case "tick":
		w.advance(t, b.Args)
		return w.tick()
	case "run":
		w.advance(t, b.Args)
		var out []string
		for range 50 {
			s := w.tick()
			if len(out) > 0 && out[len(out)-1] == s {
				break // nothing changes: the world must
			}
			out = append(out, s)
			if w.status.Phase == v1alpha1.PhaseSucceeded || w.status.Phase == v1alpha1.PhaseFailed {
				break
			}
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("line %d: unknown command %q", b.Line, b.Cmd)
	return ""
}

func (w *world) advance(t *testing.T, args []string) {
	for _, a := range args {
		if d, ok := strings.CutPrefix(a, "+"); ok {
			dur, err := time.ParseDuration(d)
			if err != nil {
				t.Fatal(err)
			}
			w.now = w.now.Add(dur)
		}
	}
}

// tick runs the planner once on what the current step selects, prints the
// result and applies the actions.
func (w *world) tick() string {
	i := Current(&w.spec, &w.status)
	var observed []Object
	if i >= 0 {
		observed = w.selected(w.spec.Steps[i])
	}
	obs := Observed{Objects: observed}
	if i >= 0 && w.spec.Steps[i].IfRemoverGone != nil {
		ref := w.spec.Steps[i].IfRemoverGone.Remover
		obs.Remover = &Remover{}
		for _, o := range w.objects {
			if o.Kind == ref.Kind && o.Namespace == ref.Namespace && o.Name == ref.Name {
				obs.Remover = &Remover{Exists: true, Workload: o.available != nil}
				if o.available != nil {
					obs.Remover.Available = *o.available
				}
			}
		}
	}
	r := PlanObserved(&w.spec, w.status, obs, w.now)
	w.status = r.Status
	var out []string
	if r.Step >= 0 {
		out = append(out, stepLine(r.Status.Steps[r.Step]))
	}
	for _, a := range r.Actions {
		out = append(out, "  "+a.String())
		w.apply(a)
	}
	if len(r.Actions) == 0 && len(r.Waiting) > 0 {
		var names []string
		for _, o := range r.Waiting {
			names = append(names, o.String())
		}
		out = append(out, "  waiting for "+strings.Join(names, ", "))
	}
	out = append(out, "phase "+string(r.Status.Phase))
	return strings.Join(out, "\n")
}

func stepLine(s v1alpha1.StepStatus) string {
	line := fmt.Sprintf("step %s %s matched=%d deleted=%d remaining=%d", s.Name, s.State, s.Matched, s.Deleted, s.Remaining)
	if s.State == v1alpha1.StepFailed || s.State == v1alpha1.StepTimedOut || strings.HasPrefix(s.Message, "skipped") || strings.Contains(s.Message, "the remover ") {
		line += ": " + s.Message
	}
	if len(s.FinalizersRemoved) > 0 {
		line += "\n  finalizersRemoved: " + strings.Join(s.FinalizersRemoved, "; ")
	}
	return line
}

// apply does what kube-apiserver does with an action.
func (w *world) apply(a Action) {
	for _, o := range w.objects {
		if o.UID != a.Object.UID {
			continue
		}
		switch a.Type {
		case ActionInhibit:
			for j := range o.Webhooks {
				if slices.Contains(a.Webhooks, o.Webhooks[j].Name) {
					o.Webhooks[j].FailurePolicy = "Ignore"
				}
			}
		case ActionDelete:
			if len(o.Finalizers) == 0 {
				w.remove(o)
			} else {
				o.Deleting = true
			}
		case ActionRemoveFinalizers:
			o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool { return slices.Contains(a.Finalizers, f) })
			if o.Deleting && len(o.Finalizers) == 0 {
				w.remove(o)
			}
		}
		return
	}
}

func (w *world) remove(o *fakeObject) {
	w.objects = slices.DeleteFunc(w.objects, func(x *fakeObject) bool { return x == o })
}

// selected is what the executor's gather would list for the step.
func (w *world) selected(step v1alpha1.TeardownStep) []Object {
	kinds := Kinds(step)
	sel := Selection(step)
	var out []Object
	for _, o := range w.objects {
		if !slices.ContainsFunc(kinds, func(k v1alpha1.Kind) bool { return k.APIVersion == o.APIVersion && k.Kind == o.Kind }) {
			continue
		}
		if step.InhibitWebhooks != nil {
			if slices.Contains(step.InhibitWebhooks.Names, o.Name) {
				out = append(out, o.Object)
			}
			continue
		}
		if !sel.AllNamespaces && o.Namespace != sel.Namespace {
			continue
		}
		if sel.Name != "" && o.Name != sel.Name {
			continue
		}
		if sel.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(sel.Selector)
			if err != nil || !s.Matches(labels.Set(o.labels)) {
				continue
			}
		}
		out = append(out, o.Object)
	}
	return out
}

func (w *world) create(t *testing.T, line string) {
	f := strings.Fields(line)
	if len(f) < 3 {
		t.Fatalf("create: want APIVERSION KIND [NS/]NAME, got %q", line)
	}
	w.nextUID++
	o := &fakeObject{Object: Object{APIVersion: f[0], Kind: f[1], UID: fmt.Sprintf("uid-%d", w.nextUID), ResourceVersion: "1"}}
	if ns, name, ok := strings.Cut(f[2], "/"); ok {
		o.Namespace, o.Name = ns, name
	} else {
		o.Name = f[2]
	}
	for _, kv := range f[3:] {
		w.setField(t, o, kv)
	}
	w.objects = append(w.objects, o)
}

func (w *world) setField(t *testing.T, o *fakeObject, kv string) {
	k, v, _ := strings.Cut(kv, "=")
	pairs := func() [][2]string {
		var out [][2]string
		for _, p := range strings.Split(v, ",") {
			a, b, _ := strings.Cut(p, ":")
			out = append(out, [2]string{a, b})
		}
		return out
	}
	switch k {
	case "custom":
		o.Custom = true
	case "available":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("available=%s: %v", v, err)
		}
		o.available = &n
	case "finalizers":
		o.Finalizers = strings.Split(v, ",")
	case "webhooks":
		o.Webhooks = nil
		for _, p := range pairs() {
			o.Webhooks = append(o.Webhooks, Webhook{Name: p[0], FailurePolicy: p[1]})
		}
	case "labels":
		o.labels = map[string]string{}
		for _, p := range pairs() {
			o.labels[p[0]] = p[1]
		}
	case "conditions":
		o.Conditions = map[string]string{}
		for _, p := range pairs() {
			o.Conditions[p[0]] = p[1]
		}
	default:
		t.Fatalf("unknown object field %q", k)
	}
}

func (w *world) find(t *testing.T, args []string) *fakeObject {
	t.Helper()
	if len(args) != 2 {
		t.Fatalf("want KIND [NS/]NAME, got %v", args)
	}
	ns, name, ok := strings.Cut(args[1], "/")
	if !ok {
		ns, name = "", args[1]
	}
	for _, o := range w.objects {
		if o.Kind == args[0] && o.Namespace == ns && o.Name == name {
			return o
		}
	}
	t.Fatalf("no %s %s", args[0], args[1])
	return nil
}
