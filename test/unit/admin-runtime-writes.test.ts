// The key and override endpoints as the router calls them, over the in-process key store and a
// fake override store, with a fake clock: regressions an outside tester found (issue 18's
// review): a second rotation, caller ids no client can have, a 404 that was audited, audit
// targets that did not say what changed, unbounded durations, and duplicate JSON members.

import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { keyEndpoints } from "../../src/admin/endpoints/api-keys.js";
import { overrideEndpoints } from "../../src/admin/endpoints/overrides.js";
import { duplicateMember } from "../../src/admin/json-body.js";
import { ProblemError, replyProblem } from "../../src/admin/reply.js";
import type { AdminHandler } from "../../src/admin/router.js";
import { fromStoreDescribedBy } from "../../src/admin/store-failure.js";
import { KeyBeingReplacedError, MemoryKeyStore } from "../../src/operator-state/api-keys.js";
import { AUDIT_FIELD_MAX, type AuditWrite, auditField } from "../../src/operator-state/audit.js";
import { MemoryChangeFeed } from "../../src/operator-state/changes.js";
import type { OverrideRecord } from "../../src/operator-state/override-rules.js";
import { fakeResponse, NOW, runtimeOf } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
plans:
  pro: { global: { rate: 10/s, burst: 10 } }
routes: [{ name: default, match: { path: / }, upstream: api }]
`);

function request(body: string | undefined): IncomingMessage {
  const req = Readable.from(body === undefined ? [] : [Buffer.from(body)]) as unknown as IncomingMessage;
  return Object.assign(req, { method: "POST", url: "/", headers: {} });
}

/** Calls `handler` as the router does, a thrown ProblemError answered as its problem. */
async function call(handler: AdminHandler, params: Record<string, string>, body?: unknown) {
  const res = fakeResponse();
  const text = typeof body === "string" ? body : body === undefined ? undefined : JSON.stringify(body);
  try {
    await handler({
      req: request(text),
      res,
      params,
      query: new URLSearchParams(),
      principal: { name: "ops", scope: "write" },
    });
  } catch (err) {
    if (!(err instanceof ProblemError)) throw err;
    replyProblem(res, err.code, err.message);
  }
  return { status: res.statusCode, json: res.json() as Record<string, unknown> };
}

const fromStore = fromStoreDescribedBy((err) => `store: ${(err as Error).message}`);

function keysApi() {
  const clock = { t: NOW };
  const store = new MemoryKeyStore(new MemoryChangeFeed(), { now: () => clock.t });
  const written: AuditWrite[] = [];
  const api = keyEndpoints({
    runtime: () => rt,
    keys: () => store,
    fromStore,
    audit: { write: async (e) => void written.push(e) },
  });
  return { api, store, written, clock };
}

function overridesApi() {
  const stored = new Map<string, Map<string, OverrideRecord>>();
  const written: AuditWrite[] = [];
  const api = overrideEndpoints({
    runtime: () => rt,
    overrides: () => ({
      set: async (caller: string, name: string, record: OverrideRecord) => {
        const mine = stored.get(caller) ?? new Map();
        stored.set(caller, mine);
        const had = mine.has(name);
        mine.set(name, record);
        return had;
      },
      remove: async (caller: string, name: string) => stored.get(caller)?.delete(name) ?? false,
      read: async (caller: string) => new Map(stored.get(caller) ?? []),
      table: { hasRoomFor: () => true },
    }),
    fromStore,
    audit: { write: async (e) => void written.push(e) },
    now: () => NOW,
  });
  return { api, stored, written };
}

describe("rotating a key that a rotation already replaced", () => {
  it("is refused with 409 naming the successor to rotate, and issues nothing", async () => {
    const { api, store, written } = keysApi();
    const created = await call(api.create, {}, { client: "c1", plan: "pro", expires_in: "30d" });
    expect(created.status).toBe(201);
    const id = created.json.id as string;
    const first = await call(api.rotate, { id }, { grace: "2s" });
    expect(first.status).toBe(201);
    const successor = first.json.id as string;
    const second = await call(api.rotate, { id }, { grace: "2s" });
    expect(second.status).toBe(409);
    expect(second.json).toMatchObject({
      type: "https://tollgate.dev/problems/key-being-replaced",
      detail: `${id} was already rotated: rotate its successor ${successor} instead`,
    });
    expect((await store.list("c1")).map((k) => k.id).sort()).toEqual([id, successor].sort());
    expect(written.map((e) => e.action)).toEqual(["POST /admin/keys", "POST /admin/keys/rotate"]);
    // The successor itself rotates as usual, keeping the original expiry.
    const third = await call(api.rotate, { id: successor }, {});
    expect(third.status).toBe(201);
    expect(third.json.expires_at).toBe(created.json.expires_at);
  });

  it("two rotations at once: one successor, the other refused", async () => {
    const { store } = keysApi();
    const { record } = await store.create({ client: "c1", plan: "pro" });
    const results = await Promise.allSettled([store.rotate(record.id, 1000), store.rotate(record.id, 1000)]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(KeyBeingReplacedError);
  });
});

describe("durations have a cap", () => {
  it.each([
    ["create", { client: "c1", plan: "pro", expires_in: "100000d" }, '"expires_in" must be at most 3650d'],
    ["create", { client: "c1", plan: "pro", expires_in: "3651d" }, '"expires_in" must be at most 3650d'],
    ["rotate", { grace: "31d" }, '"grace" must be at most 30d'],
    ["rotate", { grace: "100000d" }, '"grace" must be at most 30d'],
  ] as const)("%s %j → 400 naming the cap", async (what, body, detail) => {
    const { api, store } = keysApi();
    const { record } = await store.create({ client: "c1", plan: "pro" });
    const r = await call(what === "create" ? api.create : api.rotate, { id: record.id }, body);
    expect(r.status).toBe(400);
    expect(String(r.json.detail)).toContain(detail);
  });

  it("the caps themselves are accepted", async () => {
    const { api } = keysApi();
    const created = await call(api.create, {}, { client: "c1", plan: "pro", expires_in: "3650d" });
    expect(created.status).toBe(201);
    expect((await call(api.rotate, { id: created.json.id as string }, { grace: "30d" })).status).toBe(201);
  });
});

describe("override callers are ids a client or tenant can have", () => {
  it.each([
    ["client:\u0000", "a client id may only hold letters, digits and . _ ~ @ + = : - /"],
    ["client:a b", "a client id may only hold letters, digits and . _ ~ @ + = : - /"],
    ["client:\u00e4", "a client id may only hold letters, digits and . _ ~ @ + = : - /"],
    ["tenant:*", "a tenant may only hold letters, digits and . _ ~ @ + = : - /"],
  ])("%j → 400 bad-caller naming the allowed characters, nothing stored", async (caller, detail) => {
    const { api, stored, written } = overridesApi();
    const r = await call(
      api.put,
      { caller, name: "pro.global" },
      { burst: 20, rate: "10/s", expires_in: "3s", reason: "x" },
    );
    expect(r.status).toBe(400);
    expect(r.json.type).toBe("https://tollgate.dev/problems/bad-caller");
    expect(String(r.json.detail)).toContain(detail);
    expect(stored.size).toBe(0);
    expect(written).toEqual([]);
  });

  it("ids a key's client may have are accepted, and so are JWT callers", async () => {
    const { api } = overridesApi();
    for (const caller of ["client:acme-prod", "client:team/a", "client:jwt:bob"])
      expect(
        (
          await call(
            api.put,
            { caller, name: "pro.global" },
            { burst: 20, rate: "10/s", expires_in: "3s", reason: "x" },
          )
        ).status,
      ).toBe(201);
  });
});

describe("the audit says what a write changed, and only writes that acted", () => {
  it("a created key: its client, plan, tenant, limits and expiry, never the key", async () => {
    const { api, written } = keysApi();
    const r = await call(
      api.create,
      {},
      { client: "c1", plan: "pro", tenant: "t1", limits: { global: { unlimited: true } }, expires_in: "30d" },
    );
    expect(r.status).toBe(201);
    expect(written).toEqual([
      {
        token: "ops",
        action: "POST /admin/keys",
        target: `${r.json.id} (client:c1, plan pro, tenant t1, limits {"global":{"unlimited":true}}, expires_in 30d)`,
      },
    ]);
    expect(JSON.stringify(written)).not.toContain(r.json.key as string);
    const plain = await call(api.create, {}, { client: "c2", plan: "pro" });
    expect(written[1]!.target).toBe(`${plain.json.id} (client:c2, plan pro, no expiry)`);
  });

  it("a rotation: the old and new ids and the grace", async () => {
    const { api, written } = keysApi();
    const id = (await call(api.create, {}, { client: "c1", plan: "pro" })).json.id as string;
    const r = await call(api.rotate, { id }, { grace: "2s" });
    expect(written[1]!.target).toBe(`${id} -> ${r.json.id} (client:c1, grace 2s)`);
    const next = await call(api.rotate, { id: r.json.id as string }, {});
    expect(written[2]!.target).toBe(`${r.json.id} -> ${next.json.id} (client:c1, grace 0s)`);
  });

  it("an override: its size, how long, and why", async () => {
    const { api, written } = overridesApi();
    const put = await call(
      api.put,
      { caller: "client:acme", name: "pro.global" },
      { burst: 20, rate: "10/s", expires_in: "3s", reason: "launch week" },
    );
    expect(put.status).toBe(201);
    expect(written).toEqual([
      {
        token: "ops",
        action: "PUT /admin/overrides",
        target: "client:acme/pro.global {burst: 20, rate: 10/s} for 3s: launch week",
      },
    ]);
  });

  it("an override's long reason is cut, so the entry stays bounded", async () => {
    const { api, written } = overridesApi();
    await call(
      api.put,
      { caller: "client:acme", name: "pro.global" },
      { burst: 20, rate: "10/s", expires_in: "3s", reason: "r".repeat(500) },
    );
    expect(written[0]!.target.length).toBeLessThan(250);
    expect(written[0]!.target.endsWith("…")).toBe(true);
  });

  it("DELETE of an override that is not there is a 404, not audited; one that was removed is", async () => {
    const { api, written } = overridesApi();
    const params = { caller: "client:acme", name: "pro.global" };
    expect((await call(api.remove, params)).status).toBe(404);
    expect(written).toEqual([]);
    await call(api.put, params, { burst: 20, rate: "10/s", expires_in: "3s", reason: "x" });
    expect((await call(api.remove, params)).status).toBe(200);
    expect(written.map((e) => [e.action, e.target])).toEqual([
      ["PUT /admin/overrides", "client:acme/pro.global {burst: 20, rate: 10/s} for 3s: x"],
      ["DELETE /admin/overrides", "client:acme/pro.global"],
    ]);
  });

  it("control characters in any field are escaped, and the field stays bounded", () => {
    expect(auditField("a\nb\u001b[2Jc\u0085\u2028")).toBe("a\\nb\\u001b[2Jc\\u0085\\u2028");
    const long = auditField("\u0000".repeat(AUDIT_FIELD_MAX));
    expect(long).toHaveLength(AUDIT_FIELD_MAX);
    expect(long.endsWith("…")).toBe(true);
  });
});

describe("a JSON body that names a member twice", () => {
  it.each([
    ['{"client":"c1","plan":"free","plan":"pro"}', "plan"],
    [
      '{"client":"c1","plan":"pro","limits":{"global":{"rate":"1/s","rate":"1000/s","burst":1}}}',
      "limits.global.rate",
    ],
    ['{ "client" : "c1", "plan":"pro", "cl\\u0069ent": "c2" }', "client"],
  ])("%s → 400 naming %s", async (body, member) => {
    const { api, written } = keysApi();
    const r = await call(api.create, {}, body);
    expect(r.status).toBe(400);
    expect(r.json.type).toBe("https://tollgate.dev/problems/bad-key-request");
    expect(String(r.json.detail)).toContain(`member "${member}" appears more than once`);
    expect(written).toEqual([]);
  });

  it("the scan finds repeats at any depth and nothing in names inside strings or arrays", () => {
    expect(duplicateMember('{"a":1,"b":{"c":1,"d":2}}')).toBeUndefined();
    expect(duplicateMember('{"a":"\\"a\\":","b":["a","a"],"c":[{"x":1},{"x":1}]}')).toBeUndefined();
    expect(duplicateMember('{"b":[{"x":1},{"x":1,"x":2}]}')).toBe("b[1].x");
    expect(duplicateMember('{"a":{"x":1},"b":{"x":1}}')).toBeUndefined();
  });
});
