// Every problem the gateway and its admin API answer comes from one table (src/http/problem.ts),
// each code with its own type URI. Operators and clients match on `type`, so the published URIs
// are pinned here: changing one must be a decision, never a side effect.
import { describe, expect, it } from "vitest";
import { PROBLEMS, type ProblemCode, problemFor, sendProblem } from "../../src/http/problem.js";
import { fakeResponse } from "./support/fake-http.js";

const OWN = "https://tollgate.dev/problems/";
const IANA = "https://iana.org/assignments/http-problem-types#";

const PUBLISHED: Record<ProblemCode, string> = {
  bad_path: `${OWN}bad-path`,
  bad_request: `${OWN}bad-request`,
  unauthorized: `${OWN}unauthorized`,
  caller_denied: `${OWN}caller-denied`,
  not_entitled: `${OWN}not-entitled`,
  no_route: `${OWN}no-route`,
  method_not_allowed: `${OWN}method-not-allowed`,
  request_timeout: `${OWN}request-timeout`,
  body_too_large: `${OWN}body-too-large`,
  unsupported_media_type: `${OWN}unsupported-media-type`,
  quota_exceeded: `${IANA}quota-exceeded`,
  headers_too_large: `${OWN}headers-too-large`,
  internal_error: `${OWN}internal-error`,
  upstream_unreachable: `${OWN}upstream-unreachable`,
  temporary_reduced_capacity: `${IANA}temporary-reduced-capacity`,
  upstream_timeout: `${OWN}upstream-timeout`,
  admin_disabled: `${OWN}admin-disabled`,
  no_endpoint: `${OWN}no-endpoint`,
  bad_caller: `${OWN}bad-caller`,
  bad_limit: `${OWN}bad-limit`,
  unknown_limit: `${OWN}unknown-limit`,
  bad_usage_query: `${OWN}bad-usage-query`,
  exports_busy: `${OWN}exports-busy`,
  unknown_caller: `${OWN}unknown-caller`,
  config_refused: `${OWN}config-refused`,
  bad_key_request: `${OWN}bad-key-request`,
  unknown_key_id: `${OWN}unknown-key-id`,
  key_being_replaced: `${OWN}key-being-replaced`,
  bad_override: `${OWN}bad-override`,
  no_override: `${OWN}no-override`,
  insufficient_scope: `${OWN}insufficient-scope`,
  bad_csrf: `${OWN}bad-csrf`,
  bad_denials_query: `${OWN}bad-denials-query`,
  bad_audit_query: `${OWN}bad-audit-query`,
  store_unavailable: `${OWN}store-unavailable`,
};

const codes = Object.keys(PROBLEMS) as ProblemCode[];

describe("the problem table", () => {
  it.each(codes)("%s is answered with its status, problem+json, its type URI and title", (code) => {
    const res = fakeResponse();
    sendProblem(res, problemFor(code, `detail of ${code}`), { "x-request-id": "r1" });
    const entry = PROBLEMS[code];
    expect(res.statusCode).toBe(entry.status);
    expect(res.headers["content-type"]).toBe("application/problem+json");
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(res.headers["x-request-id"]).toBe("r1");
    expect(res.headers["content-length"]).toBe(Buffer.byteLength(res.body));
    expect(res.json()).toEqual({
      type: PUBLISHED[code],
      title: entry.title,
      status: entry.status,
      detail: `detail of ${code}`,
    });
  });

  it("gives no two codes the same type URI", () => {
    const uris = codes.map((c) => PROBLEMS[c].type);
    expect(new Set(uris).size).toBe(uris.length);
  });

  it("publishes exactly the pinned codes: a new one is added here, on purpose", () => {
    expect(codes.sort()).toEqual(Object.keys(PUBLISHED).sort());
  });

  it("names its own types after their code, hyphenated", () => {
    for (const code of codes) {
      const type = PROBLEMS[code].type;
      expect(
        type === `${OWN}${code.replace(/_/g, "-")}` || type === `${IANA}${code.replace(/_/g, "-")}`,
      ).toBe(true);
    }
  });

  it("a response already started is cut, never given a second head", () => {
    const res = fakeResponse();
    res.headersSent = true;
    sendProblem(res, problemFor("internal_error", "boom"));
    expect(res.destroyed).toBe(true);
    expect(res.statusCode).toBe(0);
  });

  it("a header that cannot be sent costs the header, not the answer", () => {
    const res = fakeResponse();
    let first = true;
    const writeHead = res.writeHead.bind(res);
    res.writeHead = ((status: number, headers: Record<string, string | number>) => {
      if (first) {
        first = false;
        throw new TypeError("Invalid character in header content");
      }
      return writeHead(status, headers);
    }) as typeof res.writeHead;
    sendProblem(res, problemFor("quota_exceeded", "d"), { "ratelimit-policy": "検索" });
    expect(res.statusCode).toBe(429);
    expect(res.headers["ratelimit-policy"]).toBeUndefined();
    expect(res.json().type).toBe(PUBLISHED.quota_exceeded);
  });
});
