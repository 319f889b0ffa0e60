//go:build integration

package scale

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

// tracePolicy audits, once complete, the requests on ConfigMaps and Liens
// outside the noisy namespace: the probes' own requests and the
// controller's for them, and the setup's, but not the noisy tenant's
// writes or what they cause. Lists and watches are left out.
const tracePolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: None
  verbs: ["watch", "list"]
- level: None
  namespaces: ["bench-000"]
- level: Metadata
  resources:
  - group: ""
    resources: ["configmaps"]
  - group: "teardown.dev"
    resources: ["liens", "liens/status"]
- level: None
`

// probe is one probe's times on the driver's clock: its lien's CREATE
// sent and answered, and the first refused DELETE answered. The log's
// clock is the same machine's.
type probe struct {
	ns, name                string
	began, created, refused time.Time
}

// segments is where one probe's time went, from kube-apiserver's audit
// log (the same machine's clock as the driver's), in order:
//
//   - create: the lien's CREATE, sent to answered by kube-apiserver;
//   - toController: from the CREATE answered to the controller's first
//     request about the lien (its watch event, its queue, its reconcile
//     up to that request);
//   - ctlServer: the controller's requests for the lien up to the
//     markers' write, in kube-apiserver (received to response complete);
//   - ctlOwn: the rest of the controller's reconcile up to the markers
//     written (its own work and its client between those requests);
//   - toRefused: from the markers written to the first refused DELETE
//     answered (the driver polls every 20 ms).
type segments struct {
	create, toController, ctlServer, ctlOwn, toRefused time.Duration
	total                                              time.Duration
}

// trace finds each probe's requests among events and splits its time;
// probes whose requests are not all logged are left out.
func trace(events []kit.Event, probes []probe) []segments {
	type key struct{ ns, name string }
	byProbe := map[key][]kit.Event{}
	for _, e := range events {
		if e.ObjectRef == nil || !strings.HasPrefix(e.ObjectRef.Name, "probe-") {
			continue
		}
		k := key{e.ObjectRef.Namespace, e.ObjectRef.Name}
		byProbe[k] = append(byProbe[k], e)
	}
	var out []segments
	for _, p := range probes {
		evs := byProbe[key{p.ns, p.name}]
		slices.SortFunc(evs, func(a, b kit.Event) int { return a.Received.Compare(b.Received) })
		created := p.created // the server's answer, when the log names the lien
		var first, marked time.Time
		var server time.Duration
		for _, e := range evs {
			if e.UserAgent == driverAgent && e.Verb == "create" && e.ObjectRef.Resource == "liens" && ok(e) {
				created = e.Done
			}
			if e.UserAgent == driverAgent || e.Received.Before(p.began) {
				continue
			}
			if first.IsZero() {
				first = e.Received
			}
			server += e.Done.Sub(e.Received)
			if e.ObjectRef.Resource == "configmaps" && (e.Verb == "patch" || e.Verb == "update") && ok(e) {
				marked = e.Done
				break
			}
		}
		if first.IsZero() || marked.IsZero() || p.refused.IsZero() {
			continue
		}
		out = append(out, segments{
			create:       created.Sub(p.began),
			toController: first.Sub(created),
			ctlServer:    server,
			ctlOwn:       marked.Sub(first) - server,
			toRefused:    p.refused.Sub(marked),
			total:        p.refused.Sub(p.began),
		})
	}
	return out
}

// timeline writes the requests of the n slowest probes, each from the
// probe's start: who sent it, what, when received and for how long.
func timeline(w io.Writer, events []kit.Event, probes []probe, n int) {
	ps := slices.Clone(probes)
	slices.SortFunc(ps, func(a, b probe) int { return cmp.Compare(b.refused.Sub(b.began), a.refused.Sub(a.began)) })
	for _, p := range ps[:min(n, len(ps))] {
		fmt.Fprintf(w, "scale: probe %s/%s, %v:", p.ns, p.name, ms(p.refused.Sub(p.began)))
		dels := 0
		var last kit.Event
		for _, e := range events {
			if e.ObjectRef == nil || e.ObjectRef.Namespace != p.ns || e.ObjectRef.Name != p.name || e.Received.Before(p.began) {
				continue
			}
			if e.UserAgent == driverAgent && e.Verb == "delete" && ok(e) {
				dels++
				if e.Done.Before(p.refused) {
					last = e
				}
				continue // the accepted dry runs: counted, the last shown
			}
			who := "controller"
			if e.UserAgent == driverAgent {
				who = "driver"
			}
			res := e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				res += "/" + e.ObjectRef.Subresource
			}
			code := 0
			if e.ResponseStatus != nil {
				code = e.ResponseStatus.Code
			}
			fmt.Fprintf(w, " [%s %s %s %d at +%s for %s]", who, e.Verb, res, code, ms(e.Received.Sub(p.began)), ms(e.Done.Sub(e.Received)))
		}
		fmt.Fprintf(w, " and %d accepted dry-run DELETEs", dels)
		if !last.Received.IsZero() {
			fmt.Fprintf(w, ", the last at +%s for %s", ms(last.Received.Sub(p.began)), ms(last.Done.Sub(last.Received)))
		}
		fmt.Fprintln(w)
	}
}

func ok(e kit.Event) bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// deleteTrips is the round trips, in kube-apiserver, of the driver's
// dry-run DELETEs of probes.
func deleteTrips(events []kit.Event) []time.Duration {
	var out []time.Duration
	for _, e := range events {
		if e.UserAgent == driverAgent && e.Verb == "delete" && e.ObjectRef != nil && strings.HasPrefix(e.ObjectRef.Name, "probe-") {
			out = append(out, e.Done.Sub(e.Received))
		}
	}
	return out
}

// tail is the mean of each segment over the slowest share of the probes
// (by total): where the tail's time went.
func tail(ss []segments, share float64) segments {
	if len(ss) == 0 {
		return segments{}
	}
	s := slices.Clone(ss)
	slices.SortFunc(s, func(a, b segments) int { return int(b.total - a.total) })
	n := max(1, int(float64(len(s))*share+0.5))
	var sum segments
	for _, x := range s[:n] {
		sum.create += x.create
		sum.toController += x.toController
		sum.ctlServer += x.ctlServer
		sum.ctlOwn += x.ctlOwn
		sum.toRefused += x.toRefused
		sum.total += x.total
	}
	d := time.Duration(n)
	return segments{sum.create / d, sum.toController / d, sum.ctlServer / d, sum.ctlOwn / d, sum.toRefused / d, sum.total / d}
}

// pick is one segment of each probe.
func pick(ss []segments, f func(segments) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// traced is one window's trace: each probe's segments and the DELETEs'
// round trips.
type traced struct {
	probes []segments
	trips  []time.Duration
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Round(time.Millisecond).Milliseconds()) }

// protectedAt is each probe's time from its lien's CREATE sent to its
// markers stored by kube-apiserver: from then on every DELETE of its
// ConfigMap is refused. The first refused DELETE the driver sees comes
// later by its polling (up to 20 ms asleep and the round trips of a DELETE
// in flight and of the refused one).
func protectedAt(tr traced) []time.Duration {
	return pick(tr.probes, func(s segments) time.Duration { return s.total - s.toRefused })
}

// traceTables prints, per arm and window, the tail's segments (mean over
// the slowest 2% of probes) and each segment's p99.
func traceTables(w io.Writer, rs []result) {
	t := kit.Table{
		Title: "Lien scale: where the slowest probes' time goes (kube-apiserver's audit log; mean over the slowest 2% of probes, then each segment's p99)",
		Header: []string{"arm", "window", "probes traced", "slowest 2%: total", "lien CREATE", "to the controller's first request",
			"controller to markers: in kube-apiserver", "in the controller", "markers to refused DELETE",
			"p99: to the controller", "controller to markers", "markers to refused", "DELETE round trip"},
	}
	for _, r := range rs {
		for _, win := range []struct {
			name string
			tr   traced
		}{{"idle", r.idleTrace}, {"noisy", r.noisyTrace}} {
			s := tail(win.tr.probes, 0.02)
			t.Add(r.sz, win.name, len(win.tr.probes), ms(s.total), ms(s.create), ms(s.toController), ms(s.ctlServer), ms(s.ctlOwn), ms(s.toRefused),
				secs(p99(pick(win.tr.probes, func(s segments) time.Duration { return s.toController }))),
				secs(p99(pick(win.tr.probes, func(s segments) time.Duration { return s.ctlServer + s.ctlOwn }))),
				secs(p99(pick(win.tr.probes, func(s segments) time.Duration { return s.toRefused }))),
				secs(p99(win.tr.trips)))
		}
	}
	t.Write(w)
	prot := kit.Table{
		Title: "Lien scale: lien created to its markers stored (kube-apiserver's audit log): protected from then on",
		Header: []string{"arm", "probes traced", "p50 idle", "p99 idle", "p50 noisy", "p99 noisy", "p99 noisy/idle (goal ≤ 2)",
			"kube-apiserver alone: p99 DELETE round trip noisy/idle"},
	}
	for _, r := range rs {
		idle, noisy := protectedAt(r.idleTrace), protectedAt(r.noisyTrace)
		prot.Add(r.sz, fmt.Sprintf("%d + %d", len(idle), len(noisy)), secs(p50(idle)), secs(p99(idle)), secs(p50(noisy)), secs(p99(noisy)),
			kit.Ratio(p99(noisy), p99(idle)), kit.Ratio(p99(r.noisyTrace.trips), p99(r.idleTrace.trips)))
	}
	prot.Write(w)
}
