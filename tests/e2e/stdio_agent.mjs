// The TypeScript SDK's StdioClientTransport launching `sezzlee serve --stdio` as a local
// host would (tests/e2e/test_stdio_clients.py): search, load, invoke, then a spec edit
// heard as notifications/tools/list_changed and the new tool found. Prints one JSON line.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [command, ...args] = JSON.parse(process.env.SEZZLEE_COMMAND);
const transport = new StdioClientTransport({
  command,
  args,
  env: JSON.parse(process.env.SEZZLEE_ENV),
  stderr: "inherit",
});
const client = new Client({ name: "stdio-agent", version: "1.0.0" });
let heard;
const changed = new Promise((resolve) => (heard = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, () => heard());
await client.connect(transport);

const call = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(result.content[0].text);
  return JSON.parse(result.content[0].text);
};
const listed = (await client.listTools()).tools.map((t) => t.name);
const found = await call("search_tools", { query: "list orders" });
const tool = await call("load_tool", { name: found.results[0].name });
const answer = await call("invoke_tool", {
  name: tool.name,
  arguments: { limit: 1 },
  version: tool.version,
});
writeFileSync(process.env.SEZZLEE_EDIT_PATH, process.env.SEZZLEE_EDIT_TEXT);
const late = setTimeout(() => heard("timeout"), 30000);
const outcome = (await changed) ?? "list_changed";
clearTimeout(late);
const after = await call("search_tools", { query: process.env.SEZZLEE_EDIT_QUERY });
console.log(
  JSON.stringify({
    listed,
    found: found.results.map((r) => r.name),
    status: answer.status,
    outcome,
    after: after.results.map((r) => r.name),
  }),
);
await client.close();
