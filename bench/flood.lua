-- wrk script: one caller far past its limit (every request after its burst is a 429).
request = function()
  return wrk.format("GET", "/v1/bench", { ["x-api-key"] = "flood-key" })
end

done = function(summary, latency, requests)
  io.write(string.format('BENCH {"requests":%d,"seconds":%.3f,"errors":%d,"non2xx":%d,"p50_ms":%.3f,"p99_ms":%.3f}\n',
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
