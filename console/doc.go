// Package console is the operator console: one web page, served by the gateway at /console,
// from which a person runs the cell (docs/console.md). It shows in one word whether physical
// action is possible and why not, what is running and what waits for a person, and it acts
// (halt, lock, unlock, approve, deny, accept pins, reload) through the same gateway methods as
// the admin API, audited with the signed-in person's principal.
//
// The page is Go templates (html/template, so nothing an upstream sent is ever markup) and a
// little hand-written JavaScript and CSS embedded in the binary: no framework, no build step.
// It stays live over server-sent events, falls back to polling when the stream drops, and says
// DISCONNECTED when neither answers rather than showing a stale state.
//
// Dependencies point one way: console uses gateway; the gateway only mounts the handler
// (Gateway.MountConsole).
package console
