// The admin router without sockets: patterns and their decoded parameters, 404 and 405 with
// Allow, the guard asked once before anything else, and a handler's failure answered as its
// problem or as a 500 that names only the request id.

import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { requireAdminToken } from "../../src/admin/auth.js";
import { ProblemError, sendJson } from "../../src/admin/reply.js";
import {
  type AdminRequest,
  type AdminRoute,
  createRouter,
  decodePathSegment,
  type RouterOptions,
} from "../../src/admin/router.js";
import { compileAdminTokens } from "../../src/config/admin-tokens.js";
import { PROBLEMS } from "../../src/http/problem.js";
import { fakeRequest, fakeResponse, Lines } from "./support/fake-http.js";
import { expectProblem } from "./support/problems.js";

const PARAMETERS = {
  caller: { code: "bad_caller", detail: "the caller is not UTF-8" },
  name: { code: "bad_path", detail: "the name is not UTF-8" },
  rest: { code: "bad_path", detail: "the rest is not UTF-8" },
} as const;

/** A handler that answers with what it was given. */
function echo(label: string) {
  return ({ req, res, params, query }: AdminRequest) =>
    sendJson(res, 200, { label, method: req.method, params, query: Object.fromEntries(query) });
}

const ROUTES: AdminRoute[] = [
  { method: "GET", pattern: "/admin/callers/{caller}", handle: echo("show caller") },
  { method: "DELETE", pattern: "/admin/callers/{caller}", handle: echo("reset caller") },
  { method: "GET", pattern: "/admin/limits/top", handle: echo("top limits") },
  { method: "GET", pattern: "/admin/limits/{name}", handle: echo("limit") },
  { method: "PUT", pattern: "/admin/limits/{name}/overrides/{caller}", handle: echo("override") },
  { method: "GET", pattern: "/admin/files/{rest...}", handle: echo("files") },
  { method: "POST", pattern: "/admin/reload", handle: echo("reload"), hint: "POST /admin/reload" },
];

async function ask(
  options: Partial<RouterOptions>,
  method: string,
  url: string,
  headers: Record<string, string> = {},
) {
  const router = createRouter({ routes: ROUTES, parameters: PARAMETERS, ...options });
  const res = fakeResponse();
  await router(fakeRequest({ method, url, headers: [["host", "admin"], ...Object.entries(headers)] }), res);
  return res;
}

describe("decodePathSegment", () => {
  it("decodes escapes, and says null when they are not valid UTF-8", () => {
    expect(decodePathSegment("client%3Aacme")).toBe("client:acme");
    expect(decodePathSegment("a%2Fb")).toBe("a/b");
    expect(decodePathSegment("plain")).toBe("plain");
    for (const bad of ["%80", "%E0%A4%A", "100%", "%C0%AF"]) expect(decodePathSegment(bad)).toBeNull();
  });
});

describe("matching", () => {
  it("hands the handler its parameters, decoded, and the query", async () => {
    const res = await ask({}, "GET", "/admin/callers/client%3Aacme?plan=free&tenant=100%&x=%E0%A4%A");
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      label: "show caller",
      method: "GET",
      params: { caller: "client:acme" },
      // A malformed escape in the query is no error: kept as written, or U+FFFD for bad UTF-8.
      query: { plan: "free", tenant: "100%", x: "\uFFFD%A" },
    });
  });

  it("routes the same path to the handler of each method", async () => {
    expect((await ask({}, "DELETE", "/admin/callers/ip:10.0.0.1")).json()).toMatchObject({
      label: "reset caller",
      params: { caller: "ip:10.0.0.1" },
    });
  });

  it("takes the first pattern that matches, in table order", async () => {
    expect((await ask({}, "GET", "/admin/limits/top")).json()).toMatchObject({ label: "top limits" });
    expect((await ask({}, "GET", "/admin/limits/login")).json()).toMatchObject({
      label: "limit",
      params: { name: "login" },
    });
  });

  it("reads several parameters, each from its own segment", async () => {
    const res = await ask({}, "PUT", "/admin/limits/log%20in/overrides/client%3Aa%2Fb");
    expect(res.json()).toMatchObject({ label: "override", params: { name: "log in", caller: "client:a/b" } });
  });

  it("{name...} takes the rest of the path, slashes and nothing included", async () => {
    expect((await ask({}, "GET", "/admin/files/a/b%20c/d")).json()).toMatchObject({
      params: { rest: "a/b c/d" },
    });
    expect((await ask({}, "GET", "/admin/files/")).json()).toMatchObject({ params: { rest: "" } });
    expectProblem(await ask({}, "GET", "/admin/files"), "no_endpoint", "no admin endpoint /admin/files");
  });

  it("compares literals as sent: no decoding, no empty or extra segments", async () => {
    for (const path of [
      "/admin/%72eload",
      "/admin//reload",
      "/admin/reload/",
      "/admin/limits/",
      "/admin/limits/a/b",
      "/admin/callers",
      "/admin",
      "admin/reload",
      "http://admin/admin/reload",
    ]) {
      expectProblem(await ask({}, "POST", path), "no_endpoint", `no admin endpoint ${path}`);
    }
  });

  it("a parameter whose escapes are not UTF-8: its own 400, before the method is looked at", async () => {
    for (const method of ["GET", "DELETE", "PATCH"]) {
      expectProblem(
        await ask({}, method, "/admin/callers/client:%80"),
        "bad_caller",
        "the caller is not UTF-8",
      );
    }
    expectProblem(await ask({}, "GET", "/admin/limits/%C0%AF"), "bad_path", "the name is not UTF-8");
  });
});

describe("405", () => {
  it("a known path with another method: Allow lists the table's methods, the detail how to ask", async () => {
    const res = await ask({}, "PUT", "/admin/callers/client:acme");
    expectProblem(res, "method_not_allowed", "use GET or DELETE");
    expect(res.headers.allow).toBe("GET, DELETE");
  });

  it("HEAD is a method like any other", async () => {
    const res = await ask({}, "HEAD", "/admin/limits/top");
    expectProblem(res, "method_not_allowed", "use GET");
    expect(res.headers.allow).toBe("GET");
  });

  it("a route's hint replaces its method in the detail, never in Allow", async () => {
    const res = await ask({}, "GET", "/admin/reload");
    expectProblem(res, "method_not_allowed", "use POST /admin/reload");
    expect(res.headers.allow).toBe("POST");
  });
});

describe("the guard", () => {
  const TOKEN = "s3cret-admin-token";
  const guarded = (token: string) => ({ guard: requireAdminToken(() => compileAdminTokens({ token })) });

  it("no token configured: 404 admin-disabled on every path, known or not", async () => {
    for (const path of ["/admin/reload", "/admin/nothing"]) {
      expectProblem(await ask(guarded(""), "POST", path, { authorization: "Bearer x" }), "admin_disabled");
    }
  });

  it("401 with WWW-Authenticate without the token or with a wrong one, before the path is looked at", async () => {
    for (const authorization of [
      undefined,
      "Bearer wrong",
      `Basic ${TOKEN}`,
      `Bearer ${TOKEN}x`,
      "Bearer ",
    ]) {
      for (const path of ["/admin/reload", "/admin/nothing", "/admin/callers/client:%80"]) {
        const res = await ask(guarded(TOKEN), "POST", path, authorization ? { authorization } : {});
        expectProblem(res, "unauthorized", "send Authorization: Bearer <admin.token>");
        expect(res.headers["www-authenticate"]).toBe('Bearer realm="tollgate-admin"');
      }
    }
  });

  it("the right token passes, in any case of the scheme and with trailing blanks", async () => {
    for (const authorization of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `Bearer\t${TOKEN} `]) {
      const res = await ask(guarded(TOKEN), "POST", "/admin/reload", { authorization });
      expect(res.statusCode, authorization).toBe(200);
    }
  });

  it("is asked once per request, whatever the route", async () => {
    let asked = 0;
    const guard = () => {
      asked++;
      return true;
    };
    await ask({ guard }, "GET", "/admin/callers/client:a");
    await ask({ guard }, "GET", "/admin/nothing");
    await ask({ guard }, "PUT", "/admin/reload");
    expect(asked).toBe(3);
  });
});

describe("a handler that fails", () => {
  function failing(err: unknown, logger?: RouterOptions["logger"]) {
    return {
      routes: [
        {
          method: "GET",
          pattern: "/admin/boom",
          handle: async () => {
            throw err;
          },
        },
      ],
      logger,
    };
  }

  it("a ProblemError is answered as its problem", async () => {
    const res = await ask(
      failing(new ProblemError("store_unavailable", "limit store unreachable")),
      "GET",
      "/admin/boom",
    );
    expectProblem(res, "store_unavailable", "limit store unreachable");
  });

  it("anything else: 500 naming only the request id, the error in the log", async () => {
    const lines = new Lines();
    const secret = "cannot read /etc/tollgate/secret-key.pem";
    const res = await ask(
      failing(new Error(secret), pino({ level: "info" }, lines)),
      "GET",
      "/admin/boom?x=1",
      {
        "x-request-id": "op-7",
      },
    );
    expect(res.statusCode).toBe(500);
    expect(res.headers["x-request-id"]).toBe("op-7");
    expect(res.body).not.toContain("secret-key");
    expect(res.json()).toEqual({
      type: PROBLEMS.internal_error.type,
      title: "Internal Server Error",
      status: 500,
      detail: "the admin API failed to handle this request; see the gateway's log for request_id op-7",
    });
    expect(lines.lines).toEqual([
      expect.objectContaining({
        msg: "admin request failed",
        request_id: "op-7",
        path: "/admin/boom",
        err: expect.objectContaining({ message: secret }),
      }),
    ]);
  });

  it("a request id that is not a plain token is replaced by a fresh one", async () => {
    const res = await ask(failing(new Error("x")), "GET", "/admin/boom", { "x-request-id": "a b\u0001" });
    const id = res.headers["x-request-id"] as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.json().detail).toBe(
      `the admin API failed to handle this request; see the gateway's log for request_id ${id}`,
    );
  });

  it("after the head is sent, the connection is cut instead", async () => {
    const router = createRouter({
      routes: [
        {
          method: "GET",
          pattern: "/admin/half",
          handle: ({ res }) => {
            res.writeHead(200, {});
            throw new Error("midway");
          },
        },
      ],
    });
    const res = fakeResponse();
    await router(fakeRequest({ method: "GET", url: "/admin/half" }), res);
    expect(res.destroyed).toBe(true);
    expect(res.body).toBe("");
  });

  it("a guard that throws is a 500 too", async () => {
    const guard = () => {
      throw new Error("no runtime");
    };
    expect((await ask({ guard }, "GET", "/admin/reload")).statusCode).toBe(500);
  });
});

describe("a table that cannot work is refused when the router is built", () => {
  const build =
    (pattern: string, parameters: RouterOptions["parameters"] = PARAMETERS, extra: AdminRoute[] = []) =>
    () =>
      createRouter({ routes: [{ method: "GET", pattern, handle: () => {} }, ...extra], parameters });

  it.each([
    ["no leading slash", "admin/x", /starts with \//],
    ["a parameter with no problem to answer", "/admin/{who}", /\{who\} has no entry in parameters/],
    ["the rest before the end", "/admin/{rest...}/x", /must be the last segment/],
    ["a parameter twice", "/admin/{name}/{name}", /appears twice/],
    ["a brace inside a literal", "/admin/x{name}", /neither a literal nor/],
  ])("%s", (_what, pattern, message) => {
    expect(build(pattern)).toThrow(message);
  });

  it("the same method on the same pattern twice", () => {
    expect(build("/admin/x", PARAMETERS, [{ method: "GET", pattern: "/admin/x", handle: () => {} }])).toThrow(
      "admin route GET /admin/x twice",
    );
  });
});
