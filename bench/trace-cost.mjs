// `npm run bench:traces`: what tracing's span work costs per request in-process, apart from the
// noise of a loaded machine that bench:cost's BENCH_COST_TRACES rounds carry: a request's server
// span, limit check, decision, one upstream attempt (its traceparent written into the headers)
// and its end, through the same code the proxy calls, at sample 0 (the unsampled path: ids only)
// and 1 (every span recorded and queued). The export itself (JSON, HTTP) is left out: its
// collector is a port where nothing listens, and the queue drops what it cannot hold.
//
//   BENCH_TRACE_REQUESTS (100000)
import { pino } from "pino";
import { OtelTracing } from "../dist/observability/otel-tracing.js";
import { withTraceContext } from "../dist/proxy/trace.js";

const N = Number(process.env.BENCH_TRACE_REQUESTS ?? 100_000);
const headers = { host: "gw:8080", "x-api-key": "k", accept: "*/*" };
const raw = ["host", "gw:8080", "accept", "*/*", "x-api-key", "k", "user-agent", "wrk"];
const applied = [{ spec: { name: "pro.global" } }, { spec: { name: "pro.default" } }];
const decision = { kind: "allowed", applied };
const ended = {
  status: 200,
  outcome: "allowed",
  path: "/orders",
  route: { name: "orders", prefix: "/orders", upstream: "api" },
  plan: "pro",
  caller: { kind: "client", id: "c", tenant: undefined, address: "10.0.0.1" },
  queuedMs: undefined,
  upstreamError: undefined,
};

function run(tracing, n) {
  for (let i = 0; i < n; i++) {
    const trace = tracing.startRequest({
      method: "GET",
      headers,
      host: "gw:8080",
      scheme: "http",
      trusted: false,
    });
    trace.storeWait()(decision);
    trace.decided(decision);
    const attempt = trace.attempt({ host: "api:80", url: "http://api:80/orders" }, "GET", 0);
    withTraceContext(raw, attempt);
    attempt.end(200);
    trace.end(ended);
  }
}

for (const sample of [0, 1]) {
  const tracing = new OtelTracing(
    {
      endpoint: "http://127.0.0.1:9/v1/traces",
      sample,
      serviceName: "bench",
      callerIds: false,
      headers: {},
      exportTimeoutMs: 100,
    },
    pino({ level: "silent" }),
  );
  run(tracing, N / 5); // warm-up: the JIT
  const started = process.cpuUsage();
  run(tracing, N);
  const used = process.cpuUsage(started);
  console.log(
    `sample ${sample}: ${((used.user + used.system) / N).toFixed(2)} µs CPU per request for its spans (export aside)`,
  );
  await tracing.shutdown().catch(() => {});
}
process.exit(0);
