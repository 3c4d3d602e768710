// Package governor runs every tool call through the governed call chain of SPEC.md §6.
//
// A call passes through a chain of small steps, each a [Step] in its own file, composed once at
// start-up with [Chain] the way net/http middleware is composed. A step either refuses the call
// with a failure [Outcome] (never a protocol error, so a model can recover inside its loop) or
// passes it to the next step. The last handler dispatches to the upstream.
//
// Every failure the gateway itself makes is a result envelope (§7) with success false, a reason a
// model can act on, and a machine-readable [Kind]; the kinds are defined once, in kinds.go.
package governor
