-- wrk script: search_tools over MCP 2026-07-28, cycling through benchmarks/queries.txt.
-- Usage: wrk -t2 -c16 -d10s -s benchmarks/wrk_search.lua http://127.0.0.1:8000/mcp
-- Env: SEZZLEE_QUERIES (the query file; default benchmarks/queries.txt), SEZZLEE_LIMIT (20).
-- done() prints one JSON line (prefixed "WRK_JSON ") that bench_http.py parses.

local queries = {}
local path = os.getenv("SEZZLEE_QUERIES") or "benchmarks/queries.txt"
for line in io.lines(path) do
  if line ~= "" then queries[#queries + 1] = line end
end
local limit = tonumber(os.getenv("SEZZLEE_LIMIT") or "20")

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("offset", counter * 37)
  table.insert(threads, thread)
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "search_tools"

local n = 0
local template = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search_tools",'
  .. '"arguments":{"query":"%s","limit":%d,"detail":"card"},'
  .. '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{}}}}'

function request()
  n = n + 1
  local q = queries[((n + (offset or 0)) % #queries) + 1]
  return wrk.format(nil, nil, nil, string.format(template, n, q, limit))
end

function done(summary, latency, requests)
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"errors_status":%d,"errors_connect":%d,'
      .. '"errors_read":%d,"errors_timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect,
    summary.errors.read, summary.errors.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max))
end
