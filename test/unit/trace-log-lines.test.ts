// With tracing on, an error logged about a request names its trace: the line an operator finds
// in the logs leads to the trace, and the trace back to the line. Tracing off, no field at all.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/observability/log.js";
import type { Admitted } from "../../src/proxy/context.js";
import { checkFailed } from "../../src/proxy/decide.js";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split("\n")) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  return { lines, logger: createLogger("info", out) };
}

const env = (logger: ReturnType<typeof createLogger>) =>
  ({ logger, metrics: {}, sustained: {}, clock: { now: () => 0, monotonic: () => 0 } }) as never;

const request = (trace: { traceId: string } | undefined) =>
  ({ requestId: "req-1", route: { onFailure: "open" }, trace }) as unknown as Admitted;

describe("error lines during a request", () => {
  it("carry the request's trace id when it is traced", () => {
    const { lines, logger } = capture();
    checkFailed(request({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736" }), env(logger), new Error("boom"));
    expect(lines).toEqual([
      expect.objectContaining({
        msg: "limit check failed unexpectedly",
        request_id: "req-1",
        trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
      }),
    ]);
  });

  it("have no trace_id field with tracing off", () => {
    const { lines, logger } = capture();
    checkFailed(request(undefined), env(logger), new Error("boom"));
    expect(lines[0]).not.toHaveProperty("trace_id");
  });
});
