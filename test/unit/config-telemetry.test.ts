// `telemetry.traces`: one case per failure mode with the exact message --check prints, the
// defaults, and what /admin/config shows of it (no secret).
import { describe, expect, it } from "vitest";
import { describeConfig } from "../../src/admin/describe-config.js";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { splitRestartOnly } from "../../src/config/restart.js";
import { traceSettings } from "../../src/config/telemetry.js";

const BASE = `listen: 127.0.0.1:8080
store:
  url: memory://
upstreams:
  api: http://127.0.0.1:3000
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

function problems(yaml: string, env: Record<string, string> = {}): string[] {
  const r = loadConfigText(yaml, "gw.yaml", env);
  return r.ok ? [] : r.problems.map(formatProblem);
}

function loaded(yaml: string, env: Record<string, string> = {}) {
  const r = loadConfigText(yaml, "gw.yaml", env);
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return r;
}

describe("telemetry.traces", () => {
  it("is off when absent", () => {
    expect(loaded(BASE).config.telemetry).toBeUndefined();
  });

  it("takes the endpoint alone, with the defaults documented", () => {
    const traces = loaded(`${BASE}telemetry:\n  traces: { endpoint: "http://collector:4318/v1/traces" }\n`)
      .config.telemetry?.traces;
    expect(traces).toEqual({
      endpoint: "http://collector:4318/v1/traces",
      sample: 1,
      service_name: "tollgate",
      caller_ids: false,
      timeout: 10_000,
    });
  });

  it("a URL without a path is sent to /v1/traces; one with a path as written", () => {
    const settings = (endpoint: string) =>
      traceSettings({ endpoint, sample: 1, service_name: "t", caller_ids: false, timeout: 1000 }).endpoint;
    expect(settings("http://collector:4318")).toBe("http://collector:4318/v1/traces");
    expect(settings("https://otlp.example.com/")).toBe("https://otlp.example.com/v1/traces");
    expect(settings("https://otlp.example.com/otlp/v1/traces")).toBe(
      "https://otlp.example.com/otlp/v1/traces",
    );
  });

  it("refuses an endpoint that is not an http(s) URL", () => {
    expect(problems(`${BASE}telemetry:\n  traces: { endpoint: "collector:4318" }\n`)).toEqual([
      "gw.yaml:9:23: telemetry.traces.endpoint: expected the collector's OTLP/HTTP traces URL, such as http://otel-collector:4318/v1/traces (http:// or https://)",
    ]);
    expect(problems(`${BASE}telemetry:\n  traces: { endpoint: "grpc://collector:4317" }\n`)).toEqual([
      "gw.yaml:9:23: telemetry.traces.endpoint: expected the collector's OTLP/HTTP traces URL, such as http://otel-collector:4318/v1/traces (http:// or https://)",
    ]);
  });

  it("refuses a missing endpoint", () => {
    expect(problems(`${BASE}telemetry:\n  traces: { sample: 0.5 }\n`)).toEqual([
      "gw.yaml:9:11: telemetry.traces: endpoint is required",
    ]);
  });

  it("refuses a ratio outside 0.0 to 1.0, or not a number", () => {
    const message =
      "telemetry.traces.sample: sample is the share of new traces kept: a number from 0.0 (none) to 1.0 (every one), such as 0.1";
    for (const sample of ["1.5", "-0.1", '"10%"']) {
      expect(
        problems(`${BASE}telemetry:\n  traces: { endpoint: "http://c:4318", sample: ${sample} }\n`),
        sample,
      ).toEqual([`gw.yaml:9:48: ${message}`]);
    }
    expect(
      loaded(`${BASE}telemetry:\n  traces: { endpoint: "http://c:4318", sample: 0 }\n`).config.telemetry
        ?.traces?.sample,
    ).toBe(0);
  });

  it("refuses unknown keys, an empty service name, a timeout out of bounds and a bad header name", () => {
    expect(problems(`${BASE}telemetry:\n  traces: { endpoint: "http://c:4318", sampler: 0.1 }\n`)).toEqual([
      expect.stringMatching(/^gw\.yaml:9:\d+: telemetry\.traces: unknown key "sampler"/),
    ]);
    expect(problems(`${BASE}telemetry:\n  logs: {}\n`)).toEqual([
      expect.stringMatching(/^gw\.yaml:9:\d+: telemetry: unknown key "logs"/),
    ]);
    expect(
      problems(`${BASE}telemetry:\n  traces: { endpoint: "http://c:4318", service_name: "" }\n`),
    ).toEqual([
      "gw.yaml:9:54: telemetry.traces.service_name: the service name is empty: leave it out for tollgate",
    ]);
    expect(problems(`${BASE}telemetry:\n  traces: { endpoint: "http://c:4318", timeout: 5m }\n`)).toEqual([
      "gw.yaml:9:49: telemetry.traces.timeout: an export's timeout is between 100ms and 60s",
    ]);
    expect(
      problems(`${BASE}telemetry:\n  traces: { endpoint: "http://c:4318", headers: { "bad header": x } }\n`),
    ).toEqual([expect.stringMatching(/^gw\.yaml:9:\d+: telemetry\.traces\.headers.*expected a header name/)]);
  });

  it("exporter headers take ${ENV}; /admin/config shows their names as set, and the endpoint without credentials", () => {
    const r = loaded(
      `${BASE}telemetry:\n  traces:\n    endpoint: "https://user:pw@otlp.example.com/v1/traces"\n    headers: { authorization: "Bearer \${OTLP_TOKEN}" }\n    sample: 0.25\n`,
      { OTLP_TOKEN: "tok-secret" },
    );
    expect(r.config.telemetry?.traces?.headers).toEqual({ authorization: "Bearer tok-secret" });
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: r.version });
    const shown = describeConfig(rt).telemetry;
    expect(shown).toEqual({
      traces: {
        endpoint: "https://otlp.example.com/v1/traces",
        sample: 0.25,
        service_name: "tollgate",
        caller_ids: false,
        headers: { authorization: "set" },
        timeout: "10s",
      },
    });
    expect(JSON.stringify(describeConfig(rt))).not.toMatch(/tok-secret|pw@/);
  });

  it("a reload cannot change it: the running exporter is kept and the change reported", () => {
    const before = loaded(`${BASE}telemetry:\n  traces: { endpoint: "http://a:4318" }\n`).config;
    const after = loaded(`${BASE}telemetry:\n  traces: { endpoint: "http://b:4318" }\n`).config;
    const split = splitRestartOnly(before, after);
    expect(split.restartRequired).toEqual(["telemetry"]);
    expect(split.config.telemetry?.traces?.endpoint).toBe("http://a:4318");
  });
});
