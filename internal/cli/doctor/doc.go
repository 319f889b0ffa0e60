// Package doctor holds the judgements the deletion doctor's verbs share:
// who set a finalizer and whether anything runs that will remove it, which
// liens hold an object, which fail-closed webhooks and unavailable
// APIServices block deletions. Facts are gathered once; the judgements are
// pure functions of them.
package doctor
