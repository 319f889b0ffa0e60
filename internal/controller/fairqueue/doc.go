// Package fairqueue is a work queue that takes turns between tenants: one
// namespace whose objects churn cannot delay another namespace's requests
// behind its backlog.
//
// client-go's work queue hands items out first in, first out. A tenant who
// relabels its 30 objects 360 times in 40 s keeps the lien controller's
// queue full of its own requests, and a Lien created meanwhile in another
// namespace waited 29-45 s to be applied (1-2 s idle), while DELETEs of the
// object it was to protect were accepted. Queue keeps one FIFO per key (a
// request's namespace; "" for cluster-scoped objects) and pops the keys in
// turn, so a request waits for at most one request of each other busy key
// ahead of it, however long their backlogs.
//
// Requests a reconcile asked to see again after a while (RequeueAfter of
// ResyncAfter or more: the lien controller's resync every minute, "in case
// a watch missed one") wait behind the requests events made, and are
// handed out when none waits, or one in laterEvery under sustained load.
// At a thousand liens and more the resyncs alone keep every namespace
// busy; taking turns with them, a new lien waited for one resync of each
// of the hundred namespaces (docs/benchmarks.md, section 7).
//
// What queued a request is known when it is added, not when it was
// scheduled: resyncs wait for their time in a delaying queue of their own
// and are marked resyncs as they come due. An event for a request being
// worked on queues it again at its Done, which comes after the reconcile
// asked for its next resync: that push is the event's, among the events.
// (Marked when the RequeueAfter was asked for, such events were queued as
// resyncs, and under load waited behind every resync: TestEventsAreNotMadeResyncs,
// TestNoisyNeighbourWithSeveralWorkers.)
//
// Paced adds pacing: a token bucket per namespace for the requests events
// make, and one for all resyncs, so that neither one tenant's churn nor
// the resyncs of many liens take the whole client budget a new lien
// elsewhere needs. The buckets of namespaces quiet again are forgotten.
//
// With several workers, one namespace's requests are still handed out one
// at a time: a tenant's churn holds one worker at most, the others serve
// the other namespaces; and a batch of liens in one namespace is applied
// one after the other instead of all at once, sharing the client's budget,
// each Ready only at the end of the lot. A request popped while its
// namespace is busy is held back and queued again, in the class it was
// handed out in, when the namespace is free, ahead of the request that
// set it free if an event queued that one again (TestHeldRequestsGoFirst);
// being popped and held back does not count in the resyncs' turns
// (TestHeldRequestsDoNotHurryResyncs).
//
// It is the ordering inside client-go's queue (workqueue.Queue), so the
// queue keeps its guarantees: an item queued twice is queued once, an item
// being processed is not handed to a second worker, delays and rate limits
// work as before. NewRateLimitingQueue builds the controller-runtime queue
// around it (controller.Options.NewQueue; PacedBy for a typed request).
package fairqueue
