-- wrk script: every request carries one of 1000 API keys, round-robin per thread; with
-- BENCH_FLOOD=1 every request is one caller far past its limit (a flood of 429s).
-- BENCH_DELAY_MS > 0 paces the load: each connection waits that long between its requests.
local flood = os.getenv("BENCH_FLOOD") == "1"
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0") or 0
if pause > 0 then
  delay = function() return pause end
end
local i = 0
request = function()
  if flood then
    return wrk.format("GET", "/v1/bench", { ["x-api-key"] = "flood-key" })
  end
  i = (i + 1) % 1000
  return wrk.format("GET", "/v1/bench", { ["x-api-key"] = "bench-key-" .. i })
end

done = function(summary, latency, requests)
  io.write(string.format('BENCH {"requests":%d,"seconds":%.3f,"errors":%d,"non2xx":%d,"p50_ms":%.3f,"p99_ms":%.3f}\n',
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
