// Header rules (`request_headers`, `response_headers`): what `--check` refuses, with the position
// and never the value (a rule's values are secrets), and how a route's rules win over its
// upstream's per name (src/http/header-rules.ts).
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { mergeHeaderRules } from "../../src/http/header-rules.js";

const file = (upstream: string, route = "") => `store: { url: memory:// }
upstreams:
  llm:
    url: http://127.0.0.1:3001
${upstream}
routes:
  - { name: all, match: { path: / }, upstream: llm${route} }
`;

function problems(yaml: string, env: Record<string, string> = {}): string[] {
  const r = loadConfigText(yaml, "gw.yaml", env);
  return r.ok ? [] : r.problems.map(formatProblem);
}

describe("--check on header rules", () => {
  it("refuses names the gateway owns, a name both set and removed, an empty or unsendable value, never quoting it", () => {
    const out = problems(
      file(`    request_headers:
      set: { tollgate-client: x, x-forwarded-for: y, authorization: "\${KEY:-}", x-b: "a\\nb", cookie: c }
      remove: [cookie, host]
    response_headers: { set: { ratelimit-remaining: "1" } }`),
    );
    expect(out).toEqual([
      "gw.yaml:6:14: upstreams.llm.request_headers.set: tollgate-client cannot be set here: the gateway tells the upstream who called in Tollgate-* headers",
      "gw.yaml:6:34: upstreams.llm.request_headers.set: x-forwarded-for cannot be set here: the gateway writes the forwarding headers itself",
      'gw.yaml:6:54: upstreams.llm.request_headers.set: authorization is set to an empty value: the variable it comes from is probably unset (${NAME:-} gives ""); set it, or remove this rule',
      "gw.yaml:6:81: upstreams.llm.request_headers.set: x-b's value cannot be sent in a header (a line break, a control character or a character outside Latin-1); the value is not shown, it may be a secret",
      "gw.yaml:6:94: upstreams.llm.request_headers.set: cookie is both set and removed: keep one",
      "gw.yaml:7:24: upstreams.llm.request_headers.remove[1]: host cannot be removed here: it frames the request, hop by hop",
      "gw.yaml:8:32: upstreams.llm.response_headers.set: ratelimit-remaining cannot be set here: the rate-limit headers say what the gateway decided",
    ]);
    // A scheme whose secret came out empty, and owned names spelt as servers read them.
    expect(
      problems(
        file(
          `    request_headers: { set: { authorization: "Bearer \${EMPTY}", Tollgate_Client: a, x.forwarded.for: b, x-real-ip: c } }`,
        ),
        { EMPTY: "" },
      ),
    ).toEqual([
      "gw.yaml:5:31: upstreams.llm.request_headers.set: authorization names an authentication scheme with no credential after it: the variable that should follow it is probably empty; set it, or remove this rule",
      "gw.yaml:5:65: upstreams.llm.request_headers.set: Tollgate_Client cannot be set here: the gateway tells the upstream who called in Tollgate-* headers",
      "gw.yaml:5:85: upstreams.llm.request_headers.set: x.forwarded.for cannot be set here: the gateway writes the forwarding headers itself",
      "gw.yaml:5:105: upstreams.llm.request_headers.set: x-real-ip cannot be set here: the gateway writes the forwarding headers itself",
    ]);
    // A variable that is not set at all is named, at its position, by the substitution.
    expect(
      problems(file(`    request_headers: { set: { authorization: "Bearer \${OPENAI_API_KEY}" } }`)),
    ).toEqual([
      "gw.yaml:5:54: environment variable OPENAI_API_KEY is not set; set it, or give a default with ${OPENAI_API_KEY:-default}",
    ]);
    expect(
      problems(file(`    request_headers: { set: { authorization: "Bearer \${OPENAI_API_KEY}" } }`), {
        OPENAI_API_KEY: "sk-x",
      }),
    ).toEqual([]);
  });

  it("a route's rule for a name wins over its upstream's, set or removed", () => {
    const merged = mergeHeaderRules(
      { set: { Authorization: "Bearer up", "x-a": "1" }, remove: ["cookie"] },
      { set: { cookie: "route" }, remove: ["authorization"] },
    );
    expect(merged.set).toEqual([
      ["x-a", "1"],
      ["cookie", "route"],
    ]);
    expect([...merged.remove]).toEqual(["authorization"]);
  });
});
