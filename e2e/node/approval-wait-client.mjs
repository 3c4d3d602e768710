// A client of the TypeScript MCP SDK (@modelcontextprotocol/sdk) that calls one tool the way an
// agent framework does, with a short request timeout, for the end-to-end tests of calls held for
// an operator's approval.
//
//   node approval-wait-client.mjs URL TOOL ARGS_JSON TIMEOUT_MS reset|noreset|terminate|close
//
// It connects to the streamable HTTP endpoint URL and calls TOOL with ARGS_JSON and
// {timeout: TIMEOUT_MS, resetTimeoutOnProgress, onprogress}: noreset does not reset the timeout
// on progress (the SDK's default), the others do. Once the first progress notification arrives,
// terminate ends its session (DELETE), as a client that shuts down mid-call does, and close
// closes the client (its streams) without ending the session, as a client that dies does. It
// prints one JSON line per progress notification as it arrives, {"progress": {"progress",
// "total", "message"}}, then one for the outcome: {"result": the call's result, "elapsed_ms"}
// or, when the call failed (a timeout gives up on it, which sends notifications/cancelled),
// {"error": {"code", "message"}, "elapsed_ms"}. Exit status 1 means it could not connect.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, tool, argsJSON, timeoutMs, mode] = process.argv.slice(2);
if (!url || !tool || !argsJSON || !timeoutMs || !['reset', 'noreset', 'terminate', 'close'].includes(mode)) {
  console.error('usage: node approval-wait-client.mjs URL TOOL ARGS_JSON TIMEOUT_MS reset|noreset|terminate|close');
  process.exit(2);
}

const print = (v) => process.stdout.write(JSON.stringify(v) + '\n');

const client = new Client({ name: 'e2e-approval-wait-client', version: '1' });
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}

const start = Date.now();
let left = false;
try {
  const result = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) }, undefined, {
    timeout: Number(timeoutMs),
    resetTimeoutOnProgress: mode !== 'noreset',
    onprogress: ({ progress, total, message }) => {
      print({ progress: { progress, total, message } });
      if (left) {
        return;
      }
      if (mode === 'terminate') {
        left = true;
        transport.terminateSession().then(() => print({ left: 'terminated' }), (err) => print({ left: String(err) }));
      } else if (mode === 'close') {
        left = true;
        client.close().then(() => print({ left: 'closed' }), (err) => print({ left: String(err) }));
      }
    },
  });
  print({ result, elapsed_ms: Date.now() - start });
  await transport.terminateSession();
  await client.close();
} catch (err) {
  print({ error: { code: err?.code, message: String(err?.message ?? err) }, elapsed_ms: Date.now() - start });
  // Give the notifications/cancelled the SDK sent on giving up time to arrive; the session is
  // left open, so that the cancellation alone tells the gateway the caller left.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  process.exit(0);
}
