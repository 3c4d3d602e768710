// A client of the TypeScript MCP SDK (@modelcontextprotocol/sdk) for the end-to-end tests:
// it connects to the streamable HTTP endpoint given as its argument, lists the tools, calls the
// tool named by its second argument with no arguments, and prints one JSON line of what it saw:
// {"protocolVersion", "sessionId", "tools": [names], "result": the call's result}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, tool] = process.argv.slice(2);
if (!url || !tool) {
  console.error('usage: node ts-client.mjs URL TOOL');
  process.exit(2);
}

const client = new Client({ name: 'e2e-ts-client', version: '1' });
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: {} });
  console.log(JSON.stringify({
    protocolVersion: transport.protocolVersion,
    sessionId: transport.sessionId,
    tools: tools.map((t) => t.name),
    result,
  }));
  await transport.terminateSession();
  await client.close();
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
