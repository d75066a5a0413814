-- wrk script of `make bench-load` (benchmarks/bench_load.py): POST each recorded webhook body
-- exactly once, with the secret header, from one connection per wrk thread.
--
--   wrk -t T -c T -d 300s --timeout 30s -s bench_load.lua URL -- BODIES OUT HEADER SECRET T
--
-- BODIES holds one request body per line; thread i (1..T) sends lines i, i+T, i+2T, … in turn
-- with "Connection: close", the next only once the last is answered (a closed loop, as a
-- Nextcloud background-job worker sends: its WebhookCall job makes a new HTTP client, so a new
-- connection, per delivery; wrk connects again after each answer). Each request's latency is
-- timed here, from the moment wrk asks for it (on a connected socket) to its complete answer. A thread whose bodies are all answered writes
-- its latencies (microseconds, one a line) to OUT.<i>.lat and appends one line to OUT.done:
--
--   <i> <sent> <answered> <queued> <coalesced> <first request s> <last answer s> <status>=<n>,…
--
-- (times on CLOCK_MONOTONIC; queued/coalesced summed over the 202 answers' JSON), then stops.
-- The caller ends wrk once OUT.done has T lines: wrk itself would sleep for all of -d.

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]])
local CLOCK_MONOTONIC = 1
local ts = ffi.new("bench_timespec")

local function now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

local bodies, headers, out
local mine, sent, answered, queued, coalesced = 0, 0, 0, 0, 0
local first, started = nil, nil
local latencies, statuses = {}, {}
local verifying = false

function init(args)
  local threads = tonumber(args[5])
  out = args[2]
  headers = { [args[3]] = args[4], ["Connection"] = "close" }
  bodies = {}
  local n = 0
  for line in io.lines(args[1]) do
    n = n + 1
    if (n - id) % threads == 0 then
      table.insert(bodies, line)
    end
  end
  mine = #bodies
  -- wrk 4.1 calls request() once on its first thread before the run, to check it: not sent
  verifying = id == 1
end

function request()
  if verifying then
    verifying = false
    return wrk.format("POST", nil, headers, bodies[1])
  end
  if sent == mine then
    -- wrk may ask once more while stop() takes effect: a health check, not a delivery
    return wrk.format("GET", "/livez")
  end
  sent = sent + 1
  started = now()
  first = first or started
  return wrk.format("POST", nil, headers, bodies[sent])
end

function response(status, _, body)
  if answered == mine then
    return -- the health check past the end
  end
  local finished = now()
  answered = answered + 1
  latencies[answered] = string.format("%.1f", (finished - started) * 1e6)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 202 then
    queued = queued + tonumber(body:match('"queued":%s*(%d+)') or 0)
    coalesced = coalesced + tonumber(body:match('"coalesced":%s*(%d+)') or 0)
  end
  if answered < mine then
    return
  end
  local file = io.open(string.format("%s.%d.lat", out, id), "w")
  file:write(table.concat(latencies, "\n"), "\n")
  file:close()
  local counts = {}
  for code, count in pairs(statuses) do
    table.insert(counts, string.format("%d=%d", code, count))
  end
  file = io.open(out .. ".done", "a")
  file:write(string.format("%d %d %d %d %d %.6f %.6f %s\n", id, sent, answered, queued,
    coalesced, first, finished, table.concat(counts, ",")))
  file:close()
  wrk.thread:stop()
end
