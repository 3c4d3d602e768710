// Package guards scans content on its way through the gateway (SPEC.md §10): tool arguments,
// tool results, upstream tool definitions, and in agent mode the task and the final answer.
//
// A guard is a plugin in the CoreDNS sense: one [Guard] interface, one file per built-in guard
// with its own settings struct (decoded strictly, so a misspelled setting fails loading with its
// line), and a registry keyed by the `use:` name. [Build] turns the entries configured under one
// stage of `guardrails` into a [Set], once, at start-up; [Set.CheckJSON] and [Set.CheckText] run
// the set on a document and return what the guards found, what the gateway must do about it, and
// the redacted document.
//
// What the package promises:
//
//   - Guards see every string leaf of a JSON document (never a key) and skip empty text.
//   - Within a guard, detectors run in a fixed priority order and each byte is claimed once: a
//     card number is not also a phone number, an Anthropic key is not also an OpenAI key.
//   - Across guards the strongest enforced action wins: block > escalate > redact > none.
//     log_only guards record findings and change nothing (no redaction, no labels).
//   - A guard that errors, panics or times out follows its fail_mode: closed treats it as fired
//     with its action (redact becomes block, since nothing is known to redact), open lets the
//     content through; either way the error is in [Result.Errors].
//   - Findings, reasons and errors carry guard ids, categories, JSON pointers and byte offsets,
//     never the matched text.
//   - llm.judge, the one probabilistic guard, only makes decisions stricter: it runs after the
//     others, on what their redactions leave, never on content they blocked, and it cannot
//     redact. Its model is the built-in agent's, given through the context ([WithJudge]).
//
// The built-in guards use hand-written scanners (linear time, no regular-expression engine);
// only regex.deny runs user patterns, with github.com/dlclark/regexp2 in ECMAScript mode, always
// under a match timeout and a backtracking limit.
package guards
